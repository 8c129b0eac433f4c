"""Shared fixtures. ``shared_data`` points at ../shared/data when present; tests that need it
skip cleanly on a user's clone, which has no ../shared."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"

#: What a run writes to the system's temp dir (pytest's ``tmp_path``, the services it starts
#: in subprocesses, each service's per-store tuning work dir, ``regimetune-jobs-*``) goes
#: under one directory, removed when the run ends: a run leaves nothing behind in /tmp.
RUN_TMP = Path(tempfile.mkdtemp(prefix="regimetune-tests-"))
os.environ["TMPDIR"] = str(RUN_TMP)
tempfile.tempdir = None  # read TMPDIR again


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    shutil.rmtree(RUN_TMP, ignore_errors=True)


@pytest.fixture(scope="session", autouse=True)
def _compiled_detector() -> None:
    """Compile the detector's numba loop once, before any test: services that tests start in
    subprocesses then load it from numba's disk cache instead of compiling it on their first
    window while a client waits (a fresh clone has no cache)."""
    from regimetune.regimes.detector import compile_kernel

    compile_kernel()


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture
def screenshot(tmp_path: Path) -> Callable[..., Path]:
    """``screenshot(url, name, height=...)`` renders ``url`` in headless Chromium (Debian's
    package; the test skips without it) 1400 px wide and saves what a reader sees as
    ``tmp_path/<name>.png``, with the test's output (kept where ``--basetemp`` points)."""
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    chromium = CHROMIUM

    def shoot(url: str, name: str, *, height: int = 1400) -> Path:
        path = tmp_path / f"{name}.png"
        subprocess.run(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             f"--window-size=1400,{height}", "--virtual-time-budget=8000",
             "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1", f"--screenshot={path}", url],
            capture_output=True, timeout=120, check=True,
        )  # fmt: skip
        assert path.is_file(), f"chromium wrote no screenshot of {url}"
        return path

    return shoot


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip("../shared/data is absent (a user's clone has none)")
    return SHARED_DATA
