"""Tuning jobs under a real ``regimetune serve`` on 127.0.0.1: SIGKILL and SIGTERM of the
service leave no pool worker behind (none holds the port), the job is ``interrupted``, and a
restart resumes it from its stored evaluations."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import httpx
import pytest

from regimetune.cli.demo import free_port, spawn, stop, wait_ready

from .conftest import AUTH

pytestmark = pytest.mark.slow
UPLOAD = {**AUTH, "Content-Type": "application/octet-stream"}


def start(tmp: Path, port: int):
    from .conftest import SHORT_REGIME_S, TOKEN

    env = {
        "REGIMETUNE_STORE__URL": f"sqlite:///{tmp / 'service.db'}",
        "REGIMETUNE_AUTH__WRITE_TOKENS": json.dumps([TOKEN]),
        "REGIMETUNE_ENGINE__WINDOW_S": "10",
        "REGIMETUNE_ENGINE__DETECTOR": json.dumps({"min_regime_s": SHORT_REGIME_S}),
        "REGIMETUNE_TUNING__EXECUTOR": "process",
        "REGIMETUNE_TUNING__UPLOAD_DIR": str(tmp / "work"),
    }
    log = tmp / f"service-{time.monotonic_ns()}.log"
    p = spawn(["serve", "--host", "127.0.0.1", "--port", str(port)], env, log)
    wait_ready(f"http://127.0.0.1:{port}/readyz", p, log)
    return p


def children(pid: int) -> list[int]:
    """Live (not zombie) processes whose parent is ``pid``."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2 :].split()
            if int(fields[1]) == pid and fields[0] != "Z":
                out.append(int(d.name))
    return out


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def wait_for(pred, timeout: float = 60.0, what: str = "condition") -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(0.1)
    raise AssertionError(f"{what} not met within {timeout} s")


def checkpointed(tmp: Path, job_id: str) -> int:
    files = list((tmp / "work").glob(f"*/checkpoints/{job_id}.jsonl"))
    return len(files[0].read_text().splitlines()) if files else 0


def start_long_job(base: str, trace: bytes) -> str:
    params = {"filename": "run.csv", "budget": 600, "optimizer": "RandomSearch"}
    r = httpx.post(f"{base}/v1/tuning-jobs/upload", params=params, content=trace, headers=UPLOAD, timeout=30)
    assert r.status_code == 202, r.text
    return r.json()["id"]


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    from regimetune.collectors import GeneratorConfig, generate, write_events

    path = tmp_path_factory.mktemp("trace") / "run.csv"
    write_events(generate(GeneratorConfig(duration_s=1800, workers=8, seed=3)), path)
    return path.read_bytes()


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_the_service_stopping_stops_its_workers_and_the_job_resumes(
    tmp_path: Path, trace: bytes, sig
) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    service = start(tmp_path, port)
    restarted = None
    try:
        job = start_long_job(base, trace)
        wait_for(lambda: checkpointed(tmp_path, job) >= 20, what="20 evaluations checkpointed")
        workers = [p for p in children(service.pid) if "spawn_main" in Path(f"/proc/{p}/cmdline").read_text()]
        assert workers, "no pool worker found"
        assert all(os.getpgid(w) == w for w in workers)  # each in its own process group

        os.kill(service.pid, sig)
        service.wait(30)
        wait_for(lambda: not any(alive(w) for w in workers), timeout=15, what="workers gone")

        restarted = start(tmp_path, port)  # the port is free again
        got = httpx.get(f"{base}/v1/tuning-jobs/{job}").json()
        assert got["status"] == "interrupted" and got["n_evaluations"] >= 20, got["error"]
        r = httpx.post(f"{base}/v1/tuning-jobs/{job}/restart", headers=AUTH)
        assert r.status_code == 202, r.text
        new = r.json()["id"]
        wait_for(
            lambda: httpx.get(f"{base}/v1/tuning-jobs/{new}").json()["status"] != "running",
            timeout=180,
            what="resumed job finished",
        )
        done = httpx.get(f"{base}/v1/tuning-jobs/{new}").json()
        assert done["status"] == "succeeded", done["error"]
        assert done["report"]["resumed_evaluations"] == got["n_evaluations"]
        assert done["n_evaluations"] == 600
        assert not list((tmp_path / "work").glob("*/uploads/*"))  # the upload went with it
    finally:
        stop(service)
        stop(restarted)
