"""Deliveries that cannot work are said, and version numbers are never reused: a backend that
refuses the credentials shows in ``GET /v1/policy/status`` and the metrics within one outbox
pass; a backend that holds a version the service's cannot follow (a store that lost versions
it had delivered) is reported and resolved by a new version above it, once, even when the
store fails while it is resolved and the service restarts before it recovers."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

import httpx
import pytest
import sqlalchemy as sa

from regimetune.api import create_app
from regimetune.models import Policy, PolicyVersion
from regimetune.push import PushReceipt, RecordingBackend, RestBackend, VersionConflictError

from .conftest import TestClient, post_window, settings_for
from .test_delivery import decisions
from .test_flow import wait_for
from .test_ingest import metric

#: Windows of the workload in which the detector knows one regime only (the second is known
#: at window 40): a version made later would supersede version 1 before its conflict.
ONE_REGIME = 30


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
    # a backend that cannot say which version it holds: the conflict is found at our push,
    # whenever the outbox's first pass runs
    backend.held_version = None  # type: ignore[method-assign,assignment]
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


MOMENTS = {
    # the conflict's resolution: the version floor raised to the backend's, then a new version
    "floor": lambda sql, params: "rt_kv" in sql and "versions.floor" in repr(params),
    "version": lambda sql, params: sql.startswith("INSERT INTO rt_policy_versions"),
    # after the resolution: the conflicting version recorded as refused
    "refusal": lambda sql, params: sql.startswith("UPDATE rt_outbox") and "'refused'" in repr(params),
}


class StoreFault:
    """SQLite's "database or disk is full" for the store's statements that ``matches``, the
    next ``left`` times (as a full disk refuses them: through the driver)."""

    def __init__(self, db: sa.Engine, matches: Callable[[str, object], bool]) -> None:
        self.matches = matches
        self.left = self.hits = 0
        sa.event.listen(db, "before_cursor_execute", self._before)

    def _before(self, _conn, _cursor, statement: str, parameters: object, _context, _many) -> None:
        if self.left and self.matches(statement, parameters):
            self.left -= 1
            self.hits += 1
            raise sqlite3.OperationalError("database or disk is full")


class ConflictingBackend(RecordingBackend):
    """Holds a version 1 of its own and does not say so when asked (as a backend that cannot
    tell which version it holds): our version 1 meets a 409 ``version_conflict``.
    ``on_conflict`` runs when it refuses one of ours."""

    def __init__(self) -> None:
        super().__init__()
        self.on_conflict: Callable[[], None] = lambda: None
        super().push(PolicyVersion(version=1, policy=Policy(regime_id=7), created_at=0.0))  # not ours

    def held_version(self) -> int | None:
        return None

    def push(self, version: PolicyVersion) -> PushReceipt:
        try:
            return super().push(version)
        except VersionConflictError:
            self.on_conflict()
            raise


def assert_resolved_once(c, backend: ConflictingBackend) -> None:
    """Our version 1 finished (refused, or superseded by a delivered newer version when its
    refusal could not be recorded), its policy made a version above the backend's exactly
    once, no number made twice or sent out of order, and the backend serves what
    GET /v1/policy does."""
    wait_for(lambda: not c.get("/v1/policy/status").json()["pending"])
    status = c.get("/v1/policy/status").json()
    assert [r["version"] for r in status["refused"]] in ([1], []), status
    assert c.app.state.outbox.entries()[0].state in ("refused", "superseded")
    made = made_versions(c)
    assert made[0] == 1 and made == sorted(set(made)) and len(made) >= 2
    resolutions = [d for d in decisions(c) if "version conflict at the backend" in d["detail"]]
    assert [d["policy_version"] for d in resolutions] == [2]  # once, however often it was tried
    ours = [v for v in backend.received_versions if v != 1]
    assert ours == sorted(set(ours)) and ours[0] == 2
    served = c.get("/v1/policy").json()
    assert backend.current is not None and served == backend.current.model_dump(mode="json")
    assert status["delivered_version"] == served["version"] == made[-1]


@pytest.mark.parametrize("moment", sorted(MOMENTS))
def test_a_conflict_resolution_the_store_fails_is_finished_once_it_recovers(
    make_client, workload, moment
) -> None:
    backend = ConflictingBackend()
    c = make_client(backend=backend)
    fault = StoreFault(c.app.state.store.db, MOMENTS[moment])
    backend.on_conflict = lambda: setattr(fault, "left", 3) if not fault.hits else None
    for wc in workload[:60]:
        post_window(c, wc)
    wait_for(lambda: fault.hits >= 1)
    assert_resolved_once(c, backend)


@pytest.mark.parametrize("moment", ["floor", "version"])
def test_a_conflict_resolution_cut_short_by_a_restart_is_finished_after_it(
    tmp_path, workload, moment
) -> None:
    backend = ConflictingBackend()
    s = settings_for(tmp_path)
    with TestClient(create_app(s, backend=backend)) as c:
        fault = StoreFault(c.app.state.store.db, MOMENTS[moment])
        backend.on_conflict = lambda: setattr(fault, "left", 10**9)  # fails until the service stops
        for wc in workload[:ONE_REGIME]:  # our version 1 alone, so the conflict is its to resolve
            post_window(c, wc)
        wait_for(lambda: fault.hits >= 2)
        assert c.get("/v1/policy/status").json()["last_error"] is not None
    with TestClient(create_app(s, backend=backend)) as c:
        assert_resolved_once(c, backend)
