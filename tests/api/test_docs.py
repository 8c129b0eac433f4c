"""``/docs`` and ``/redoc`` work offline: their pages load Swagger UI and ReDoc from the app
itself (no external URL), the assets are served, and, where Debian's chromium is installed,
Swagger UI renders the API's operations with every host but 127.0.0.1 unreachable."""

from __future__ import annotations

import re
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from regimetune.api import create_app
from regimetune.api.docs import ASSETS_URL
from regimetune.cli.demo import free_port

from .conftest import TestClient, settings_for

ASSET = re.compile(r"""(?:src|href)\s*=\s*["']([^"']+)["']|url\s*:\s*["']([^"']+)["']""")


def _assets(html: str) -> list[str]:
    return [a or b for a, b in ASSET.findall(html)]


@pytest.mark.parametrize(
    ("page", "assets"),
    [
        ("/docs", {"swagger-ui-bundle.js": "javascript", "swagger-ui.css": "text/css"}),
        ("/redoc", {"redoc.standalone.js": "javascript"}),
    ],
)
def test_the_docs_pages_load_their_assets_from_the_app(
    make_client: Callable[..., TestClient], page: str, assets: dict[str, str]
) -> None:
    client = make_client()
    r = client.get(page)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    html = r.text
    assert "http://" not in html and "https://" not in html and "//cdn" not in html
    urls = _assets(html)
    assert f"{ASSETS_URL}/favicon.png" in urls
    for name, kind in assets.items():
        url = f"{ASSETS_URL}/{name}"
        assert url in urls
        got = client.get(url)
        assert got.status_code == 200 and kind in got.headers["content-type"]
        assert len(got.content) > 100_000 if name.endswith(".js") else len(got.content) > 10_000
    for url in urls:  # everything the page names is served by the app
        assert url.startswith("/"), url
        assert client.get(url).status_code == 200, url


def test_the_swagger_bundle_reads_openapi_3_1(make_client: Callable[..., TestClient]) -> None:
    client = make_client()
    assert client.get("/openapi.json").json()["openapi"].startswith("3.1")
    js = client.get(f"{ASSETS_URL}/swagger-ui-bundle.js").text
    assert re.search(r'"5\.\d+\.\d+"', js), "Swagger UI 5 (the first to render OpenAPI 3.1) is needed"


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    import uvicorn

    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(create_app(settings_for(tmp_path)), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    end = time.monotonic() + 30
    while not server.started and time.monotonic() < end:
        time.sleep(0.05)
    assert server.started
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(10)


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_chromium_renders_the_docs_offline(served: str) -> None:
    dom = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=10000",
         "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1", "--dump-dom", f"{served}/docs"],
        capture_output=True, text=True, timeout=120, check=True,
    ).stdout  # fmt: skip
    assert 'class="swagger-ui' in dom
    operations = set(re.findall(r'data-path="([^"]+)"', dom))
    assert {"/v1/policy", "/v1/ingest", "/v1/regimes"} <= operations, sorted(operations)[:10]
    assert "Unable to render this definition" not in dom
