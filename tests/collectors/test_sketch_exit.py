"""A run ends without nanobind's leak report: the datasketches objects an aggregator still
holds at exit (kept by a daemon thread, or by a cache that outlives the modules, as FastAPI's
cache of dependency callables keeps a service's engine) are freed before the interpreter's
last collection."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HELD_AT_EXIT = """
import threading
import numpy as np
from regimetune.collectors.windows import WindowAggregator
from regimetune.models import EventBatch

agg = WindowAggregator(10.0, exact_key_limit=10)  # an HLL sketch and a hot-keys sketch
rng = np.random.default_rng(0)
agg.push(EventBatch.from_columns(ts=np.sort(rng.random(5000) * 100), key=rng.integers(0, 1000, 5000)))
agg.flush()
agg.to_state()  # the unsigned SerDe, cached
never = threading.Event()
threading.Thread(target=lambda held=agg: never.wait(), daemon=True).start()
"""


def _stderr(code: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stderr


@pytest.mark.parametrize("released", [True, False], ids=["released", "without-the-release"])
def test_sketches_held_at_exit_are_released(released: bool) -> None:
    unregister = (
        ""
        if released
        else ("import atexit, regimetune.collectors.windows as w\natexit.unregister(w._release_sketches)\n")
    )
    err = _stderr(HELD_AT_EXIT + unregister)
    assert ("nanobind: leaked" in err) is not released, err
