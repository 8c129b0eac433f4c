"""Issue 13, finding 3, with real processes on 127.0.0.1: the service under uvicorn and four
storage daemons (separate processes) sending 1 s windows at real-time pace; one SIGKILL of
the service. After the restart the daemons resend their backlogs in any interleaving: no
batch within the allowed lateness may be refused ("window ... is already closed" told a
daemon not to retry), and every acknowledged request is counted once."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from regimetune.cli.demo import free_port, spawn, stop, wait_ready

from .conftest import TOKEN

pytestmark = pytest.mark.slow
WINDOW_S = 1.0
LATENESS = 60  # windows: covers the restart, even on a loaded machine (a daemon is as many windows behind as the outage)
N_WINDOWS = 16
DAEMON = r"""
import json, sys, time
import httpx, numpy as np
from regimetune.client.ingest import COUNTS_MEDIA_TYPE, encode_counts

base, token, me, first, n, window_s = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])
rng = np.random.default_rng(me)
acked = requests = 0
refused = []
with httpx.Client(timeout=2.0) as client:
    for k in range(first, first + n):
        while time.time() < (k + 1) * window_s:  # report a window once it has ended
            time.sleep(0.01)
        keys = np.arange(me * 1000, me * 1000 + 50, dtype=np.uint64)
        reads = rng.integers(1, 100, 50).astype(np.uint32)
        while True:
            try:
                r = client.post(
                    f"{base}/v1/ingest/counts",
                    params={"window_start": repr(k * window_s)},
                    content=encode_counts(keys, reads),
                    headers={"Content-Type": COUNTS_MEDIA_TYPE, "Authorization": f"Bearer {token}",
                             "Idempotency-Key": f"daemon-{me}-window-{k}"},
                )
            except httpx.HTTPError:
                time.sleep(0.05)  # the service is down: retry, as a daemon does
                continue
            if r.status_code >= 500:
                time.sleep(0.05)
                continue
            if r.status_code == 200:
                acked += 1
                requests += int(reads.sum())
            else:
                refused.append([k, r.status_code, r.text])
            break
print(json.dumps({"acked": acked, "requests": requests, "refused": refused}))
"""


def start_service(tmp: Path, port: int) -> Any:
    env = {
        "REGIMETUNE_STORE__URL": f"sqlite:///{tmp / 'service.db'}",
        "REGIMETUNE_AUTH__WRITE_TOKENS": json.dumps([TOKEN]),
        "REGIMETUNE_ENGINE__WINDOW_S": str(WINDOW_S),
        "REGIMETUNE_INGEST__ALLOWED_LATENESS_WINDOWS": str(LATENESS),
    }
    log = tmp / f"service-{time.monotonic_ns()}.log"
    p = spawn(["serve", "--host", "127.0.0.1", "--port", str(port)], env, log)
    wait_ready(f"http://127.0.0.1:{port}/readyz", p, log)
    return p


@pytest.mark.timeout(120)
def test_four_daemons_and_a_sigkill_lose_no_batch_within_the_lateness(tmp_path: Path) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    svc = start_service(tmp_path, port)
    script = tmp_path / "daemon.py"
    script.write_text(DAEMON)
    first = math.floor(time.time() / WINDOW_S) + 1
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    daemons = [
        subprocess.Popen(
            [sys.executable, str(script), base, TOKEN, str(i), str(first), str(N_WINDOWS), str(WINDOW_S)],
            stdout=subprocess.PIPE,
            env=env,
        )
        for i in range(4)
    ]
    try:
        while time.time() < (first + N_WINDOWS // 2) * WINDOW_S:  # halfway through
            time.sleep(0.05)
        os.kill(svc.pid, signal.SIGKILL)
        svc.wait(10)
        t0 = time.monotonic()
        svc = start_service(tmp_path, port)
        restart_s = time.monotonic() - t0
        results = [
            json.loads(d.communicate(timeout=90)[0].decode().strip().splitlines()[-1]) for d in daemons
        ]
        # one batch far enough ahead closes every window the daemons reported
        closer = {
            "window_start": (first + N_WINDOWS + LATENESS + 1) * WINDOW_S,
            "counts": {"keys": [], "reads": []},
        }
        auth = {"Authorization": f"Bearer {TOKEN}"}
        assert httpx.post(f"{base}/v1/ingest", json=closer, headers=auth).status_code == 200
        deadline = time.monotonic() + 30
        while (s := httpx.get(f"{base}/v1/engine").json())["applied_seq"] != s["last_seq"]:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        got = httpx.get(f"{base}/v1/windows", params={"limit": 1000}).json()
    finally:
        for d in daemons:
            if d.poll() is None:
                d.kill()
                d.wait(5)
        stop(svc)
    assert restart_s < LATENESS * WINDOW_S, f"the restart took {restart_s:.1f} s, more than the lateness"
    refused = [r for res in results for r in res["refused"]]
    assert refused == [], refused
    assert sum(res["acked"] for res in results) == 4 * N_WINDOWS
    mine = [w for w in got if first * WINDOW_S <= w["start"] < (first + N_WINDOWS) * WINDOW_S]
    assert sum(w["requests"] for w in mine) == sum(res["requests"] for res in results)
    assert len(mine) == N_WINDOWS
