"""Ingest under careless input and faults (issue 13, findings 1, 6, 7, 8 and stale
telemetry): event time with bounded lateness, bad numbers, auth before the body, reused
Idempotency-Keys, rejection metrics."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import sqlalchemy as sa

from regimetune.api import create_app
from regimetune.client.ingest import COUNTS_MEDIA_TYPE, encode_counts

from .conftest import AUTH, TestClient, settings_for


def counts(start: float, keys: list[int], reads: list[int] | None = None) -> dict[str, Any]:
    return {"window_start": start, "counts": {"keys": keys, "reads": reads or [1] * len(keys)}}


def windows(c: TestClient) -> dict[float, int]:
    return {w["start"]: w["requests"] for w in c.get("/v1/windows", params={"limit": 1000}).json()}


def metric(c: TestClient, line: str) -> float:
    for row in c.get("/metrics").text.splitlines():
        if row.startswith(line + " "):
            return float(row.rsplit(" ", 1)[1])
    return 0.0


# -- finding 1: event time with bounded lateness ----------------------------------------------
@pytest.mark.parametrize("apply", ["sync", "async"])
def test_a_far_future_window_is_refused_before_it_is_stored(make_client, apply) -> None:
    """Finding 1: 1e12 (milliseconds sent as seconds) was acknowledged (async) or stored
    anyway (sync), and every later batch then got 422."""
    c = make_client(ingest={"apply": apply})
    assert c.post("/v1/ingest", json=counts(0.0, [1]), headers=AUTH).status_code == 200
    r = c.post("/v1/ingest", json=counts(1e12, [1]), headers=AUTH)
    assert r.status_code == 422 and "max_future_s" in r.json()["detail"], r.text
    r = c.post("/v1/ingest", json={"window_start": 0.0, "events": {"ts": [5e12], "key": [1]}}, headers=AUTH)
    assert r.status_code == 422 and "milliseconds" in r.json()["detail"]
    assert c.app.state.store.count_batches() == 1
    assert c.post("/v1/ingest", json=counts(60.0, [2]), headers=AUTH).status_code == 200


def test_a_late_batch_within_the_lateness_is_merged_into_its_window(make_client) -> None:
    """Finding 1 / event time: another daemon's window 0 after windows 1-2 is merged, not
    refused as 'already closed'; beyond the lateness it is a 422 and not stored."""
    c = make_client(ingest={"allowed_lateness_windows": 2})
    for start, key in ((0.0, 1), (60.0, 1), (120.0, 1)):
        assert c.post("/v1/ingest", json=counts(start, [key], [10]), headers=AUTH).status_code == 200
    r = c.post("/v1/ingest", json=counts(0.0, [7], [5]), headers=AUTH)  # the second daemon, late
    assert r.status_code == 200, r.text
    assert windows(c) == {}  # nothing closed yet: window 0 is still within the lateness
    assert c.post("/v1/ingest", json=counts(180.0, [1], [10]), headers=AUTH).json()["windows_closed"] == 1
    assert windows(c) == {0.0: 15}
    n = c.app.state.store.count_batches()
    r = c.post("/v1/ingest", json=counts(0.0, [8], [5]), headers=AUTH)
    assert r.status_code == 422 and "already closed" in r.json()["detail"]
    assert "allowed_lateness_windows" in r.json()["detail"]
    assert c.app.state.store.count_batches() == n


@pytest.mark.timeout(60)
def test_an_idle_gap_costs_nothing(make_client, tmp_path: Path) -> None:
    """Finding 1: a jump of 100,000 windows took 125 s and 28 MB closing empty windows."""
    c = make_client()
    assert c.post("/v1/ingest", json=counts(0.0, [1, 2]), headers=AUTH).status_code == 200
    t0 = time.perf_counter()
    for start in (6e6, 6e6 + 60, 12e6):  # 100,000 windows of 60 s later, then 100,000 more
        assert c.post("/v1/ingest", json=counts(start, [3]), headers=AUTH).status_code == 200
    assert time.perf_counter() - t0 < 5.0
    assert sorted(windows(c)) == [0.0, 6e6, 6e6 + 60]  # nobody reported the gap: not stored
    assert c.get("/v1/engine").json()["windows"] == 3
    assert (tmp_path / "rt.db").stat().st_size < 2_000_000


def test_an_idle_window_is_a_window_of_zero_requests(make_client) -> None:
    c = make_client()
    for start, keys in ((0.0, [1]), (60.0, []), (180.0, [2])):
        assert c.post("/v1/ingest", json=counts(start, keys), headers=AUTH).status_code == 200
    assert windows(c) == {0.0: 1, 60.0: 0}  # window 120 s: nobody reported it, not an idle window


def test_a_restart_skips_a_stored_bad_batch_instead_of_wedging(tmp_path: Path, caplog) -> None:
    """Finding 1: a stored 1e12 batch (from an older version) made every restart fail."""
    s = settings_for(tmp_path)
    with TestClient(create_app(s)) as c:
        assert c.post("/v1/ingest", json=counts(0.0, [1]), headers=AUTH).status_code == 200
        store = c.app.state.store
        cols = {"keys": np.array([1], np.uint64), "reads": np.array([1], np.uint32)}
        store.append_batch(kind="counts", window_start=1e12, columns=cols)  # as an older version did
        store.append_batch(kind="counts", window_start=60.0, columns=cols)
    with caplog.at_level(logging.WARNING, logger="regimetune.control.engine"), TestClient(create_app(s)) as c:
        assert c.get("/readyz").status_code == 200
        assert "stored ingest batch 2 skipped on replay" in caplog.text and "1e+12" in caplog.text
        assert c.post("/v1/ingest", json=counts(120.0, [1]), headers=AUTH).status_code == 200
        assert windows(c) == {0.0: 1, 60.0: 1}


# -- finding 6: bad numbers -------------------------------------------------------------------
NAN_BODIES = [
    '{"window_start": NaN, "counts": {"keys": [1], "reads": [1]}}',
    '{"window_start": Infinity, "counts": {"keys": [1], "reads": [1]}}',
    '{"window_start": 1e400, "counts": {"keys": [1], "reads": [1]}}',
    '{"window_start": 0, "counts": {"keys": [1], "reads": [NaN]}}',
    '{"window_start": 0, "counts": {"keys": [1], "reads": [1e400]}}',
    '{"window_start": 0, "events": {"ts": [NaN], "key": [1]}}',
    '{"window_start": 0, "events": {"ts": [-Infinity], "key": [1]}}',
    '{"window_start": 0, "counts": {"keys": [1], "reads": [1]},'
    ' "buckets": {"ids": [0], "load": [NaN], "bytes": [1]}}',
    '{"window_start": 0, "counts": {"keys": [1], "reads": [1]},'
    ' "buckets": {"ids": [0], "load": [1e400], "bytes": [1]}}',
]


@pytest.mark.parametrize("body", NAN_BODIES)
def test_nan_and_infinity_are_a_422_whose_body_serialises(make_client, body) -> None:
    """Finding 6: these were 500s (the 422 body echoed the NaN and failed to serialise)."""
    c = make_client(engine={"n_buckets": 4})
    r = c.post("/v1/ingest", content=body, headers={**AUTH, "Content-Type": "application/json"})
    assert r.status_code == 422, r.text
    detail = json.loads(r.text, parse_constant=lambda name: pytest.fail(f"bare {name} in the body"))
    assert detail["detail"]
    assert c.app.state.store.count_batches() == 0


@pytest.mark.parametrize(
    "weights", ['{"w_load": NaN, "w_data": 1, "w_time": 1}', '{"w_load": 1, "w_data": 1, "w_time": 1e400}']
)
def test_nan_policy_weights_are_a_422(make_client, weights) -> None:
    c = make_client()
    body = f'{{"weights": {weights}}}'
    r = c.put("/v1/policies/0", content=body, headers={**AUTH, "Content-Type": "application/json"})
    assert r.status_code == 422, r.text
    json.loads(r.text, parse_constant=lambda name: pytest.fail(f"bare {name} in the body"))


@pytest.mark.parametrize("value", ["nan", "inf", "1e400", "-1"])
def test_binary_ingest_refuses_bad_window_start(make_client, value) -> None:
    c = make_client()
    r = c.post(
        "/v1/ingest/counts",
        params={"window_start": value},
        content=encode_counts(np.array([1], np.uint64), np.array([1], np.uint32)),
        headers={**AUTH, "Content-Type": COUNTS_MEDIA_TYPE},
    )
    assert r.status_code == 422
    json.loads(r.text, parse_constant=lambda name: pytest.fail(f"bare {name} in the body"))


@pytest.mark.postgres
def test_a_window_of_more_than_2_to_the_32_requests_is_kept_on_postgresql(tmp_path: Path) -> None:
    """Finding 6: 2^32-1 requests overflowed the INTEGER column: acknowledged, then missing."""
    from .test_store import PG_URL, _pg_reachable

    if not _pg_reachable():
        pytest.skip("PostgreSQL at 127.0.0.1:5432 is unreachable")
    name = f"rt_test_{uuid.uuid4().hex[:12]}"
    s = settings_for(tmp_path, store={"url": PG_URL, "schema_name": name})
    big = 2**32 - 1
    try:
        with TestClient(create_app(s)) as c:
            assert c.post("/v1/ingest", json=counts(0.0, [1, 2], [big, big]), headers=AUTH).status_code == 200
            assert c.post("/v1/ingest", json=counts(60.0, [1], [1]), headers=AUTH).status_code == 200
            assert windows(c) == {0.0: 2 * big}
    finally:
        eng = sa.create_engine(PG_URL)
        with eng.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{name}" CASCADE'))
        eng.dispose()


# -- finding 7: auth before work, streamed bodies capped --------------------------------------
def test_a_large_body_without_a_token_is_401_before_it_is_read(tmp_path: Path) -> None:
    """Finding 7: a 62 MB body was read and parsed before the 401."""
    app = create_app(settings_for(tmp_path))
    reads: list[int] = []
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        reads.append(1)
        return {"type": "http.request", "body": b"x" * (1 << 20), "more_body": True}

    async def send(msg: dict[str, Any]) -> None:
        sent.append(msg)

    for path, headers in (
        ("/v1/ingest", []),
        ("/v1/ingest/counts", [(b"authorization", b"Bearer wrong")]),
        ("/v1/engine/pause", []),
    ):
        reads.clear()
        sent.clear()
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"window_start=0",
            "root_path": "",
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(62 << 20).encode()),
                *headers,
            ],
            "client": ("127.0.0.1", 1),
            "server": ("127.0.0.1", 80),
            "app": app,
        }
        asyncio.run(app(scope, receive, send))
        assert sent[0]["status"] in (401, 403) and not reads, path
    app.state.engine.stop()
    app.state.store.close()


def test_a_streamed_body_over_the_cap_is_413(make_client) -> None:
    """Finding 7: a chunked body over the limit was a 400 on the JSON route."""
    c = make_client(ingest={"max_body_bytes": 4096})

    def chunks() -> Any:
        yield b'{"window_start": 0, "counts": {"keys": ['
        for _ in range(200):
            yield b"1, 2, 3, 4, 5, 6, 7, 8, 9, 10, "
        yield b'1], "reads": [1]}}'

    r = c.post("/v1/ingest", content=chunks(), headers={**AUTH, "Content-Type": "application/json"})
    assert r.status_code == 413 and "4096" in r.json()["detail"], r.text
    r = c.post(
        "/v1/ingest/counts",
        params={"window_start": 0},
        content=(b"\0" * 1024 for _ in range(8)),
        headers={**AUTH, "Content-Type": COUNTS_MEDIA_TYPE},
    )
    assert r.status_code == 413
    assert metric(c, 'regimetune_ingest_rejected_total{reason="too_large"}') == 2


# -- finding 8: idempotency and ingest metrics -------------------------------------------------
def test_the_same_idempotency_key_with_another_body_is_409(make_client) -> None:
    """Finding 8: it was acknowledged as a duplicate and the new batch silently dropped."""
    c = make_client()
    h = {**AUTH, "Idempotency-Key": "daemon-3-window-0"}
    a = c.post("/v1/ingest", json=counts(0.0, [1, 2]), headers=h)
    b = c.post("/v1/ingest", json=counts(0.0, [1, 2]), headers=h)
    assert a.status_code == b.status_code == 200 and b.json()["duplicate"]
    r = c.post("/v1/ingest", json=counts(0.0, [1, 3]), headers=h)
    assert r.status_code == 409 and "daemon-3-window-0" in r.json()["detail"]
    assert "another batch" in r.json()["detail"]
    assert c.app.state.store.count_batches() == 1


def test_ingest_metrics_count_bytes_and_every_rejection(make_client) -> None:
    """Finding 8: ingest_bytes_total never moved; rejected_total counted only oversize."""
    c = make_client()
    body = json.dumps(counts(0.0, [1, 2, 3])).encode()
    blob = encode_counts(np.array([4, 5], np.uint64), np.array([1, 1], np.uint32))
    assert (
        c.post("/v1/ingest", content=body, headers={**AUTH, "Content-Type": "application/json"}).status_code
        == 200
    )
    r = c.post(
        "/v1/ingest/counts",
        params={"window_start": 60},
        content=blob,
        headers={**AUTH, "Content-Type": COUNTS_MEDIA_TYPE},
    )
    assert r.status_code == 200
    assert metric(c, "regimetune_ingest_bytes_total") == len(body) + len(blob)
    assert c.post("/v1/ingest", json=counts(120.0, [1])).status_code == 401
    assert (
        c.post("/v1/ingest", json=counts(120.0, [1]), headers={"Authorization": "Bearer no"}).status_code
        == 403
    )
    assert c.post("/v1/ingest", json=counts(0.0, [1]), headers=AUTH).status_code == 422  # closed
    assert c.post("/v1/ingest", json={"window_start": "x"}, headers=AUTH).status_code == 422
    h = {**AUTH, "Idempotency-Key": "k"}
    assert c.post("/v1/ingest", json=counts(120.0, [1]), headers=h).status_code == 200
    assert c.post("/v1/ingest", json=counts(120.0, [2]), headers=h).status_code == 409
    r = c.post(
        "/v1/ingest/counts",
        params={"window_start": 180},
        content=blob,
        headers={**AUTH, "Content-Type": "text/plain"},
    )
    assert r.status_code == 415
    for reason, n in (
        ("unauthorized", 1),
        ("forbidden", 1),
        ("invalid", 2),
        ("conflict", 1),
        ("unsupported_media_type", 1),
    ):
        assert metric(c, f'regimetune_ingest_rejected_total{{reason="{reason}"}}') == n, reason


# -- stale telemetry ----------------------------------------------------------------------------
def _wait(pred: Any, timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


class ManualClock:
    """A wall clock that moves only when a test moves it, so a bound in seconds is checked
    exactly, whatever the machine's load (the service's background checks read it too)."""

    def __init__(self) -> None:
        self.now = float(int(time.time()))  # whole seconds: steps of 1/4 s add exactly

    def __call__(self) -> float:
        return self.now


def test_silence_holds_the_policy_and_says_so_and_an_idle_batch_is_not_silence(make_client) -> None:
    clock = ManualClock()
    c = make_client(engine={"window_s": 0.25, "stale_after_windows": 4}, clock=clock)
    assert c.post("/v1/ingest", json=counts(0.0, [1, 2]), headers=AUTH).status_code == 200
    clock.now += 1.0  # four windows of silence: the limit, not past it
    assert c.get("/readyz").json()["detail"]["telemetry"].startswith("ok")
    assert metric(c, "regimetune_telemetry_stale") == 0.0
    clock.now += 0.25
    _wait(lambda: metric(c, "regimetune_telemetry_stale") == 1.0)
    ready = c.get("/readyz")
    assert ready.status_code == 200 and ready.json()["detail"]["telemetry"].startswith("telemetry stale")
    assert "holding no policy yet" in ready.json()["detail"]["telemetry"]
    details = [d["detail"] for d in c.get("/v1/decisions").json()["items"]]
    assert sum("telemetry stale" in d for d in details) == 1  # said once, not every check
    assert metric(c, 'regimetune_policy_changes_held_total{reason="stale_telemetry"}') == 1.0
    n_windows = len(windows(c))
    # a daemon that reports an idle window (no keys) is idle, not silent
    assert c.post("/v1/ingest", json=counts(0.25, []), headers=AUTH).status_code == 200
    assert metric(c, "regimetune_telemetry_stale") == 0.0
    assert c.get("/readyz").json()["detail"]["telemetry"].startswith("ok")
    assert any("telemetry resumed" in d["detail"] for d in c.get("/v1/decisions").json()["items"])
    assert len(windows(c)) == n_windows + 1 and windows(c)[0.0] == 2
    assert not math.isnan(metric(c, "regimetune_telemetry_stale"))


def test_stale_telemetry_logs_the_policy_it_holds(make_client, workload) -> None:
    from .conftest import post_window

    c = make_client(engine={"window_s": 60.0, "stale_after_windows": 0.01})  # 0.6 s of silence
    for wc in workload[:40]:
        post_window(c, wc)
    version = c.get("/v1/policy").json()["version"]
    _wait(lambda: c.get("/readyz").json()["detail"]["telemetry"].startswith("telemetry stale"))
    assert f"holding policy version {version}" in c.get("/readyz").json()["detail"]["telemetry"]
    assert c.get("/v1/policy").json()["version"] == version


def test_open_windows_survive_a_snapshot_and_a_restart(tmp_path: Path) -> None:
    """The windows held open for late batches are in the snapshot: after the batches it
    covers were pruned and the service restarted, a late batch is still merged."""
    s = settings_for(
        tmp_path, ingest={"allowed_lateness_windows": 2, "snapshot_every_s": 0, "keep_batches_s": 0}
    )
    with TestClient(create_app(s)) as c:
        for start in (0.0, 60.0, 120.0):
            assert c.post("/v1/ingest", json=counts(start, [1], [10]), headers=AUTH).status_code == 200
        assert c.app.state.engine.snapshot() == 2  # every batch but the newest is pruned
    with TestClient(create_app(s)) as c:
        assert c.app.state.engine.open_windows == 3
        assert c.post("/v1/ingest", json=counts(0.0, [2], [5]), headers=AUTH).status_code == 200
        assert c.post("/v1/ingest", json=counts(60.0, [2], [5]), headers=AUTH).status_code == 200
        assert c.post("/v1/ingest", json=counts(240.0, [1], [1]), headers=AUTH).status_code == 200
        assert windows(c) == {0.0: 15, 60.0: 15}
        assert c.post("/v1/ingest", json=counts(60.0, [3], [1]), headers=AUTH).status_code == 422


def test_an_events_batch_over_several_windows_merges_with_late_counts(make_client) -> None:
    c = make_client(ingest={"allowed_lateness_windows": 1})
    events = {"window_start": 0.0, "events": {"ts": [1.0, 61.0, 62.0, 121.0], "key": [1, 2, 2, 3]}}
    assert c.post("/v1/ingest", json=events, headers=AUTH).status_code == 200
    assert windows(c) == {0.0: 1}  # window 60 s is within the lateness of window 120 s
    assert c.post("/v1/ingest", json=counts(60.0, [9], [4]), headers=AUTH).status_code == 200
    assert c.post("/v1/ingest", json=counts(180.0, [9], [1]), headers=AUTH).status_code == 200
    assert windows(c) == {0.0: 1, 60.0: 6}


# -- the ingest fast path -----------------------------------------------------------------------
def _ingest_requests() -> list[tuple[str, dict[str, Any]]]:
    """POSTs to the ingest routes: accepted, duplicated, and refused for every reason the
    framework or the engine has."""
    blob = encode_counts(np.array([4, 5], np.uint64), np.array([1, 1], np.uint32))
    json_h = {**AUTH, "Content-Type": "application/json"}
    bin_h = {**AUTH, "Content-Type": COUNTS_MEDIA_TYPE}
    key = {"Idempotency-Key": "daemon-1"}
    return [
        ("/v1/ingest", {"json": counts(0.0, [1, 2, 3]), "headers": AUTH}),
        ("/v1/ingest", {"json": counts(60.0, [1]), "headers": {**AUTH, **key}}),
        ("/v1/ingest", {"json": counts(60.0, [1]), "headers": {**AUTH, **key}}),  # the resend
        ("/v1/ingest", {"json": counts(60.0, [2]), "headers": {**AUTH, **key}}),  # 409
        ("/v1/ingest", {"json": counts(60.0, [2]), "headers": {**AUTH, "Idempotency-Key": "k" * 129}}),
        ("/v1/ingest", {"json": counts(60.0, [2]), "headers": {**AUTH, "Idempotency-Key": ""}}),
        ("/v1/ingest", {"content": b"not json", "headers": json_h}),
        (
            "/v1/ingest",
            {"content": b'{"window_start": NaN, "counts": {"keys": [1], "reads": [1]}}', "headers": json_h},
        ),
        ("/v1/ingest", {"content": b"\xff\xfe", "headers": json_h}),
        (
            "/v1/ingest",
            {"json": {"window_start": 60.0, "counts": {"keys": [1, 2], "reads": [1]}}, "headers": AUTH},
        ),
        ("/v1/ingest", {"json": {"window_start": 60.0}, "headers": AUTH}),
        ("/v1/ingest", {"json": counts(0.0, [1]), "headers": AUTH}),  # a closed window
        ("/v1/ingest", {"json": counts(60.0, [1])}),  # no token
        ("/v1/ingest", {"json": counts(60.0, [1]), "headers": {"Authorization": "Bearer no"}}),
        ("/v1/ingest/counts", {"params": {"window_start": 120}, "content": blob, "headers": bin_h}),
        ("/v1/ingest/counts", {"params": {"window_start": "1.8e2"}, "content": blob, "headers": bin_h}),
        ("/v1/ingest/counts", {"params": {"window_start": 180}, "content": blob[:-1], "headers": bin_h}),
        ("/v1/ingest/counts", {"params": {"window_start": "nan"}, "content": blob, "headers": bin_h}),
        ("/v1/ingest/counts", {"params": {"window_start": -60}, "content": blob, "headers": bin_h}),
        ("/v1/ingest/counts", {"params": {"window_start": " 180"}, "content": blob, "headers": bin_h}),
        ("/v1/ingest/counts", {"content": blob, "headers": bin_h}),
        ("/v1/ingest/counts", {"params": {"window_start": 180}, "content": blob, "headers": json_h}),
        ("/v1/ingest/counts", {"params": {"window_start": 180, "x": 1}, "content": blob, "headers": bin_h}),
    ]


def test_the_ingest_fast_path_answers_as_the_framework(tmp_path: Path) -> None:
    """Every answer of the ingest routes is the same with the fast path as through the
    framework alone (status, body, Retry-After), and each request is timed once."""
    answers = []
    for fast in (True, False):
        (tmp_path / str(fast)).mkdir()
        with TestClient(create_app(settings_for(tmp_path / str(fast)))) as c:
            assert c.app.ingest_fast_path is not None
            if not fast:
                c.app.ingest_fast_path = None
            got = []
            for path, kw in _ingest_requests():
                r = c.post(path, **kw)
                got.append((path, r.status_code, r.json(), r.headers.get("retry-after")))
            answers.append(got)
            timed = {
                path: metric(
                    c, f'regimetune_http_request_duration_seconds_count{{method="POST",route="{path}"}}'
                )
                for path in ("/v1/ingest", "/v1/ingest/counts")
            }
            # once each: those refused for their token before routing are timed as "unmatched"
            assert sum(timed.values()) == len(_ingest_requests()) - 2
            rejected = metric(c, 'regimetune_ingest_rejected_total{reason="invalid"}')
            got.append(("counted", rejected, c.app.state.store.count_batches(), timed))
    assert answers[0] == answers[1]
    statuses = [a[1] for a in answers[0][:-1]]
    assert statuses.count(200) == 7 and {401, 403, 409, 415, 422} <= set(statuses)


def test_an_ingest_fast_path_that_fails_before_the_body_hands_the_request_on(
    make_client, monkeypatch
) -> None:
    c = make_client()
    fast = c.app.ingest_fast_path

    def broken(*_a: Any, **_k: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr(fast, "_arguments", broken)
    r = c.post("/v1/ingest", json=counts(0.0, [1, 2]), headers=AUTH)
    assert r.status_code == 200 and r.json()["rows"] == 2
