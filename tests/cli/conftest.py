"""Generated traces for the commands (one stamped with epoch seconds, as real traces are)
and a headless Chromium that reports what it rendered."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from regimetune.collectors import GeneratorConfig, generate, write_events

EPOCH = 1_504_000_000.0


@pytest.fixture(scope="session")
def epoch_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A realistic run of 3 h (16 workers, about 240k requests) that starts at 2017-08-29
    09:46:40 UTC: the flash crowd, the decline and the plateaus."""
    root = tmp_path_factory.mktemp("epoch")
    plain = root / "plain.csv"
    write_events(generate(GeneratorConfig(duration_s=3 * 3600, workers=16, seed=3)), plain, None)
    lines = plain.read_text().splitlines()
    shifted = [lines[0]]
    for line in lines[1:]:
        ts, rest = line.split(",", 1)
        shifted.append(f"{float(ts) + EPOCH:.6f},{rest}")
    path = root / "epoch.csv"
    path.write_text("\n".join(shifted) + "\n")
    return path


#: Regimes of five minutes, as the README advises for traces shorter than an hour: the
#: default 15 minutes would confirm one regime in :func:`regimes_trace`.
SHORT_REGIME_S = 300.0


@pytest.fixture(scope="session")
def short_regimes() -> tuple[str, ...]:
    """The ``detect``/``tune`` options for regimes of :data:`SHORT_REGIME_S`."""
    return ("--param", f"min_regime_s={SHORT_REGIME_S:g}")


@pytest.fixture(scope="session")
def regimes_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 3000 s run (67K requests) in which the online detector with regimes of
    :data:`SHORT_REGIME_S` confirms three regimes and holds two of them (0 and 2) as the
    service would: enough for per-regime tuning."""
    path = tmp_path_factory.mktemp("regimes") / "run.csv"
    write_events(generate(GeneratorConfig(duration_s=3000, workers=16, seed=1)), path, None)
    return path


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

# Added to a copy of a report: what the browser made of it, written into the DOM it dumps.
_PROBE = """<script>
window.addEventListener("load", () => {
  const imgs = [...document.images].map(i => `${i.complete}:${i.naturalWidth}x${i.naturalHeight}`);
  const rows = [...document.querySelectorAll("table")].map(t => t.tBodies[0].rows.length);
  const probe = document.createElement("pre");
  probe.id = "probe";
  probe.textContent = JSON.stringify({imgs, rows});
  document.body.appendChild(probe);
});
</script></body>"""


@pytest.fixture
def chromium_probe(tmp_path: Path) -> Callable[[Path], dict[str, Any]]:
    """Load a report in headless Chromium; return each image as ``complete:WxH`` (as decoded)
    and each table's body row count. Skips where Debian's chromium is not installed."""
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    chromium = CHROMIUM

    def probe(report: Path) -> dict[str, Any]:
        page = tmp_path / f"probed-{report.name}"
        page.write_text(report.read_text().replace("</body>", _PROBE))
        dom = subprocess.run(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000",
             "--dump-dom", page.as_uri()],
            capture_output=True, text=True, timeout=120, check=True,
        ).stdout  # fmt: skip
        found = re.search(r'<pre id="probe">(.*?)</pre>', dom)
        assert found, dom[-2000:]
        return dict(json.loads(found.group(1)))

    return probe
