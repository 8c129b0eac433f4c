"""The backend as a real process under uvicorn on 127.0.0.1: pushes through both REST
adapters and refusals; a crash (SIGKILL) and restart that keeps placement and policy, with
the outbox riding out the outage."""

from __future__ import annotations

import time

import httpx
import pytest

from regimetune.models import Policy, PolicyVersion, PufferscaleWeights
from regimetune.push import (
    InMemoryOutboxStore,
    OutboxWorker,
    PermanentPushError,
    ReferenceBackend,
    RestBackend,
    RetryPolicy,
    TransientPushError,
)

from .conftest import BackendProcess


def pv(n: int) -> PolicyVersion:
    weights = PufferscaleWeights.normalised(1.0, 0.5 + 0.1 * n, 1.0)
    return PolicyVersion(version=n, policy=Policy(regime_id=n % 3, weights=weights), created_at=float(n))


def received(bp: BackendProcess) -> list[tuple[int, int]]:
    log = httpx.get(f"{bp.url}/v1/policies", timeout=30.0).json()
    return [(e["version"]["version"], e["duplicates"]) for e in log["entries"]]


def test_push_and_refusals(backend_process: BackendProcess) -> None:
    bp = backend_process
    url = bp.url
    client = httpx.Client(timeout=60.0)  # generous: the machine may be loaded
    with (
        ReferenceBackend(url, timeout=60.0) as ref,
        RestBackend(f"{url}/v1/policy", method="POST", timeout=60.0) as rest,
    ):
        assert ref.push(pv(1)).status == "applied"
        assert rest.push(pv(1)).status == "duplicate"
        assert rest.push(pv(2)).status == "applied"
        assert ref.push(pv(2)).status == "duplicate"
        with pytest.raises(PermanentPushError, match="older than version 2"):
            ref.push(pv(1))
    assert received(bp) == [(1, 1), (2, 1)]

    bad = client.put(
        f"{url}/v1/policy",
        json={"version": 3, "created_at": 0, "policy": {"weights": {"w_load": 0.4, "w_data": 0.4}}},
    )
    assert bad.status_code == 422 and "max(W_L, W_D)" in bad.json()["detail"]
    unknown = client.post(f"{url}/v1/rescale", json={"kind": "decommission", "servers": [42]})
    assert unknown.status_code == 404 and "42" in unknown.json()["detail"]
    impossible = client.post(f"{url}/v1/rescale", json={"kind": "decommission", "servers": [0, 1, 2, 3]})
    assert impossible.status_code == 409 and impossible.json()["detail"]
    done = client.post(f"{url}/v1/rescale", json={"kind": "decommission", "servers": [2]})
    assert done.status_code == 200 and done.json()["policy_version"] == 2
    placement = client.get(f"{url}/v1/placement").json()
    assert placement["servers"] == [0, 1, 3] and placement["revision"] == 1
    assert received(bp) == [(1, 1), (2, 1)]
    client.close()


def test_outbox_rides_out_a_crash(backend_process: BackendProcess) -> None:
    bp = backend_process
    store = InMemoryOutboxStore()
    events = []
    worker = OutboxWorker(
        store,
        ReferenceBackend(bp.url, timeout=30.0),
        retry=RetryPolicy(base=0.05, cap=0.4),
        on_event=events.append,
        seed=0,
    )
    for n in (1, 2):
        store.append(pv(n))
    worker.drain(timeout=10.0)
    assert received(bp) == [(1, 0), (2, 0)]
    # change the placement (without the planner, which is slow to load) so a restart that
    # re-initialised the demo placement would show
    moved = {"servers": [0, 9], "buckets": [{"id": 1, "load": 2.0, "size": 3.0}], "replace": True}
    assert httpx.post(f"{bp.url}/v1/placement", json=moved, timeout=30.0).status_code == 201
    placement = httpx.get(f"{bp.url}/v1/placement", timeout=30.0).json()
    assert placement["servers"] == [0, 9] and placement["revision"] == 1

    bp.kill()  # SIGKILL: a crash
    with ReferenceBackend(bp.url, timeout=1.0) as ref, pytest.raises(TransientPushError):
        ref.push(pv(3))
    for n in range(3, 8):
        store.append(pv(n))
    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline:  # the backend is down: attempts fail, nothing is lost
        worker.step()
        time.sleep(0.05)
    assert [e.version.version for e in store.pending()] == [3, 4, 5, 6, 7]
    assert any(e.kind == "stalled" and e.version == 3 and e.in_force == 2 for e in events)

    bp.start()  # same state file; --servers is ignored since a placement exists
    assert httpx.get(f"{bp.url}/v1/placement", timeout=30.0).json() == placement
    assert httpx.get(f"{bp.url}/v1/policy", timeout=30.0).json() == pv(2).model_dump(mode="json")
    worker.drain(timeout=20.0)
    assert store.pending() == []
    assert received(bp) == [(n, 0) for n in range(1, 8)]  # each once, in order
    assert not any(e.kind == "failed" for e in events)
    worker.backend.close()
