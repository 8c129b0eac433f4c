"""Deliveries that cannot work are said, and version numbers are never reused: a backend that
refuses the credentials shows in ``GET /v1/policy/status`` and the metrics within one outbox
pass; a backend that holds a version the service's cannot follow (a store that lost versions
it had delivered) is reported and resolved by a new version above it."""

from __future__ import annotations

import httpx

from regimetune.models import Policy, PolicyVersion
from regimetune.push import RecordingBackend, RestBackend

from .conftest import post_window
from .test_delivery import decisions
from .test_flow import wait_for
from .test_ingest import metric


def made_versions(c) -> list[int]:
    return [d["policy_version"] for d in decisions(c) if d["policy_version"] is not None]


def test_refused_credentials_show_in_status_and_metrics_within_one_pass(make_client, workload) -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, json={"detail": "invalid credentials"})

    backend = RestBackend(
        "http://backend/v1/policy", token="wrong", client=httpx.Client(transport=httpx.MockTransport(answer))
    )
    c = make_client(backend=backend)
    for wc in workload[:60]:
        post_window(c, wc)
    made = made_versions(c)
    assert made
    wait_for(lambda: not c.get("/v1/policy/status").json()["pending"])
    status = c.get("/v1/policy/status").json()
    assert [r["version"] for r in status["refused"]] == made[::-1]  # newest first
    assert all("401" in r["reason"] and "invalid credentials" in r["reason"] for r in status["refused"]), (
        status["refused"]
    )
    assert "401" in status["last_error"] and status["delivered_version"] is None
    assert metric(c, "regimetune_push_refused_versions") == len(made)
    assert metric(c, 'regimetune_pushes_total{outcome="refused"}') == len(made)


def test_a_version_conflict_is_resolved_above_the_backends_version(make_client, workload) -> None:
    backend = RecordingBackend()
    c = make_client(backend=backend)
    backend.push(PolicyVersion(version=1, policy=Policy(regime_id=7), created_at=0.0))  # not ours
    for wc in workload[:60]:
        post_window(c, wc)
    wait_for(lambda: not c.get("/v1/policy/status").json()["pending"])
    made = made_versions(c)
    status = c.get("/v1/policy/status").json()
    # our version 1 had other content: refused once, reported, and its policy made version 2
    assert status["refused"][-1]["version"] == 1 and "different content" in status["refused"][-1]["reason"]
    assert made[0] == 1 and made[1] == 2 and made == sorted(set(made))
    assert any("version conflict at the backend" in d["detail"] for d in decisions(c))
    assert backend.attempted_versions.count(1) == 2  # the backend's own push, and ours once
    served = c.get("/v1/policy").json()
    assert backend.current is not None and served == backend.current.model_dump(mode="json")
    assert status["delivered_version"] == served["version"] == made[-1]


def test_a_backend_ahead_of_the_store_gets_versions_above_its_own(make_client, workload) -> None:
    backend = RecordingBackend()
    backend.push(PolicyVersion(version=9, policy=Policy(regime_id=3), created_at=0.0))  # delivered, then lost
    c = make_client(backend=backend)
    for wc in workload[:60]:
        post_window(c, wc)
    wait_for(lambda: not c.get("/v1/policy/status").json()["pending"])
    made = made_versions(c)
    assert made and made[0] == 10  # asked at the first pass: never a number the backend saw
    assert c.get("/v1/policy/status").json()["refused"] == []
    assert backend.current is not None and c.get("/v1/policy").json()["version"] == backend.current.version
