"""``regimetune demo`` as a user runs it: a real process with its ``serve`` and ``backend``
children. It stops all three on SIGTERM (``kill``) as on SIGINT (Ctrl-C), keeps no log path it
deletes, and its narration puts each decision before the backend's delivery of its version."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np
import pytest

from regimetune.cli.demo import Narrator, demo_workload

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads children from /proc")


def _children(pid: int) -> set[int]:
    out = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.add(int(stat.parent.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1.0).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_stops_the_demo_and_its_children(tmp_path: Path, signum: int) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "COLUMNS": "200"}
    demo = subprocess.Popen(
        [sys.executable, "-m", "regimetune.cli.main", "demo", "--no-tune", "--seconds", "120"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=tmp_path,
    )
    try:
        urls: dict[str, str] = {}
        lines = []
        assert demo.stdout is not None
        for line in demo.stdout:  # up to the replay's first line: both children are serving
            lines.append(line)
            if m := re.match(r"(reference backend|service)\s+(http://127\.0\.0\.1:\d+)", line):
                urls[m.group(1)] = m.group(2)
            if line.startswith("replaying"):
                break
        assert set(urls) == {"reference backend", "service"}, "".join(lines)
        children = _children(demo.pid)
        assert len(children) == 2
        health = [f"{urls['service']}/healthz", f"{urls['reference backend']}/healthz"]
        assert all(_answers(u) for u in health)
        time.sleep(2)  # a few windows into the replay
        demo.send_signal(signum)
        rest, _ = demo.communicate(timeout=60)
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
    assert demo.returncode == 128 + signum
    assert f"stopped by {signal.Signals(signum).name}" in rest
    assert "Traceback" not in rest
    assert not any(_alive(c) for c in children)
    assert not any(_answers(u) for u in health)
    # no path to a log in the temporary directory the demo removes
    assert "logs removed on exit" in "".join(lines)
    assert not re.search(r"/\S*regimetune-demo-\S*\.log", "".join(lines) + rest)


class _Http:
    """The service's decisions and the backend's policies, as the demo reads them: the backend
    has already applied a version whose decision the service only now lists."""

    def __init__(self) -> None:
        self.decisions: list[dict[str, object]] = []
        self.backend_versions: list[int] = []

    def get(self, url: str, **_: object) -> httpx.Response:
        if "/v1/decisions" in url:
            return httpx.Response(200, json={"items": list(reversed(self.decisions))})
        return httpx.Response(200, json={"entries": [{"version": v} for v in self.backend_versions]})


def _decision(n: int, version: int) -> dict[str, object]:
    return {
        "id": n,
        "regime_from": None if n == 1 else n - 2,
        "regime_to": n - 1,
        "policy_version": version,
        "policy": {"cache": {"mode": "unlimited"}},
        "inputs": {"window": 10 * n},
        "detail": "",
    }


def test_a_delivery_is_told_after_the_decision_that_made_it(capsys: pytest.CaptureFixture[str]) -> None:
    from regimetune.cli.demo import Processes

    http = _Http()
    procs = Processes(None, None, "http://b", "http://s", "t", "bt")  # type: ignore[arg-type]
    narrator = Narrator(http, procs)
    http.decisions.append(_decision(1, 1))
    http.backend_versions = [1, 2]  # v2 applied before its decision is listed
    narrator.poll(truth=0)
    first = capsys.readouterr().out
    assert "policy v1" in first and "applied policy v1" in first and "v2" not in first
    http.decisions.append(_decision(2, 2))
    narrator.poll(truth=1)
    second = capsys.readouterr().out
    assert second.index("regime change 0 -> 1") < second.index("applied policy v2")


def test_the_demo_workload_outlasts_min_regime_s_in_each_regime() -> None:
    """Each regime of the demo's run lasts longer than the detector's min_regime_s, so each
    can be confirmed online (a flash crowd shorter than that falls in the warm-up)."""
    from regimetune.collectors.presets import build_shape
    from regimetune.regimes import DetectorParams

    cfg = demo_workload(workers=64, seed=1)
    shape = build_shape(
        cfg.preset, seed=cfg.seed, timescale_s=cfg.scale, duration_s=cfg.duration_s, workers=64
    )
    t = np.arange(0.0, cfg.duration_s, 1.0)
    labels = shape.label(t)
    lengths = [int((labels == r).sum()) for r in range(4)]
    assert all(n > DetectorParams().min_regime_s for n in lengths), lengths
