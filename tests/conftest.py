"""Shared fixtures. ``shared_data`` points at ../shared/data when present; tests that need it
skip cleanly on a user's clone, which has no ../shared."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"


@pytest.fixture(scope="session", autouse=True)
def _compiled_detector() -> None:
    """Compile the detector's numba loop once, before any test: services that tests start in
    subprocesses then load it from numba's disk cache instead of compiling it on their first
    window while a client waits (a fresh clone has no cache)."""
    from regimetune.regimes.detector import compile_kernel

    compile_kernel()


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip("../shared/data is absent (a user's clone has none)")
    return SHARED_DATA
