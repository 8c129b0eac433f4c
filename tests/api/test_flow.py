"""The online loop in process: ingest -> windows -> regimes -> decisions -> push."""

from __future__ import annotations

import logging
import time

from regimetune.client.ingest import COUNTS_MEDIA_TYPE, encode_counts

from .conftest import AUTH, READ_TOKEN, post_window


def wait_for(pred, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(0.02)
    raise AssertionError("condition not met in time")


def test_workload_regimes_become_pushed_versions_in_order(make_client, recorder, workload) -> None:
    c = make_client(backend=recorder)
    for wc in workload:
        post_window(c, wc)
    segs = c.get("/v1/regimes", params={"limit": 1000}).json()
    ids = [s["regime_id"] for s in segs["items"]]
    assert len(set(ids)) >= 3, ids  # the generator has four regimes
    decisions = c.get("/v1/decisions").json()["items"][::-1]
    assert [d["regime_to"] for d in decisions] == [d["regime_to"] for d in decisions]
    changes = [d for d in decisions if d["regime_from"] != d["regime_to"]]
    assert len(changes) >= 3
    versions = [d["policy_version"] for d in decisions]
    assert versions == list(range(1, len(decisions) + 1))
    wait_for(lambda: recorder.received_versions == versions)
    wait_for(lambda: all(d["outcome"] == "delivered" for d in c.get("/v1/decisions").json()["items"]))
    cur = c.get("/v1/regimes/current").json()
    assert cur["regime_id"] == decisions[-1]["regime_to"]
    # each segment says what its regime is, and the current regime is the last segment's
    assert {s["kind"] for s in segs["items"]} <= {"level", "transition"}
    last = c.get("/v1/regimes", params={"offset": segs["total"] - 1}).json()["items"][-1]
    assert (cur["regime_id"], cur["kind"]) == (last["regime_id"], last["kind"]) and cur["kind"]
    assert c.get("/v1/policy").json()["version"] == versions[-1]


def test_binary_counts_equal_json_counts(make_client, workload, tmp_path) -> None:
    c = make_client()
    for wc in workload[:40]:
        body = encode_counts(wc.keys, wc.reads, wc.writes)
        r = c.post(
            "/v1/ingest/counts",
            params={"window_start": wc.start},
            content=body,
            headers={**AUTH, "Content-Type": COUNTS_MEDIA_TYPE},
        )
        assert r.status_code == 200, r.text
    got = c.get("/v1/windows").json()
    assert [w["requests"] for w in got] == [wc.requests for wc in workload[:39]]


def test_recommend_mode_logs_but_pushes_nothing(make_client, recorder, workload) -> None:
    c = make_client(backend=recorder, engine={"mode": "recommend"})
    for wc in workload[:75]:
        post_window(c, wc)
    items = c.get("/v1/decisions").json()["items"]
    assert items and all(d["outcome"] == "not_pushed" and d["policy_version"] is None for d in items)
    assert all(d["policy"] is not None for d in items)
    assert c.get("/v1/policy").status_code == 404
    time.sleep(0.1)
    assert recorder.received_versions == []


def test_pause_then_resume(make_client, recorder, workload) -> None:
    c = make_client(backend=recorder)
    assert c.post("/v1/engine/pause", headers=AUTH).json()["paused"] is True
    for wc in workload[:75]:
        post_window(c, wc)
    assert recorder.received_versions == []
    assert c.post("/v1/engine/resume", headers=AUTH).json()["paused"] is False
    for wc in workload[75:]:
        post_window(c, wc)
    items = c.get("/v1/decisions").json()["items"]
    pushed = [d for d in items if d["policy_version"] is not None]
    assert pushed, items
    wait_for(lambda: recorder.received_versions == sorted(d["policy_version"] for d in pushed))


def test_operator_policy_used_on_next_change_and_at_once(make_client, recorder, workload) -> None:
    c = make_client(backend=recorder)
    body = {"cache": {"mode": "lru", "limit_keys": 500}, "weights": {"w_load": 1, "w_data": 0.5, "w_time": 2}}
    r = c.put("/v1/policies/1", json=body, headers=AUTH)
    assert r.status_code == 200, r.text
    assert r.json()["source"] == "operator"
    for wc in workload:
        post_window(c, wc)
    decisions = c.get("/v1/decisions").json()["items"]
    to1 = [d for d in decisions if d["regime_to"] == 1]
    assert to1 and all(d["policy"]["cache"]["limit_keys"] == 500 for d in to1)
    current = c.get("/v1/regimes/current").json()["regime_id"]
    before = c.get("/v1/policy").json()["version"]
    r = c.put(f"/v1/policies/{current}", json={"cache": {"mode": "lru", "limit_keys": 77}}, headers=AUTH)
    assert r.status_code == 200
    now = c.get("/v1/policy").json()
    assert now["version"] == before + 1 and now["policy"]["cache"]["limit_keys"] == 77


def test_policy_etag_gives_304(make_client, workload) -> None:
    c = make_client()
    for wc in workload[:30]:
        post_window(c, wc)
    r = c.get("/v1/policy")
    assert r.status_code == 200
    etag = r.headers["etag"]
    r2 = c.get("/v1/policy", headers={"If-None-Match": etag})
    assert r2.status_code == 304 and r2.content == b""
    assert c.get("/v1/policy", headers={"If-None-Match": '"v999"'}).status_code == 200


def _policy_requests_timed(c) -> float:
    for line in c.get("/metrics").text.splitlines():
        if line.startswith("regimetune_http_request_duration_seconds_count") and 'route="/v1/policy"' in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_policy_fast_path_is_timed_once_and_falls_back_to_the_route(
    make_client, workload, monkeypatch
) -> None:
    c = make_client()
    assert c.app.policy_fast_path is not None
    assert c.get("/v1/policy").status_code == 404  # no version yet: the route gives the reason
    for wc in workload[:30]:
        post_window(c, wc)
    r = c.get("/v1/policy")
    assert r.status_code == 200
    assert c.get("/v1/policy", headers={"If-None-Match": r.headers["etag"]}).status_code == 304
    store = c.app.state.store
    real, calls = store.policy_status, []

    def flaky():
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("store hiccup")
        return real()

    monkeypatch.setattr(store, "policy_status", flaky)
    again = c.get("/v1/policy")  # the fast path fails before answering: the route answers
    assert again.status_code == 200 and again.json() == r.json() and len(calls) == 2
    assert _policy_requests_timed(c) == 4.0


def test_policy_with_protected_reads_goes_through_the_framework(make_client) -> None:
    c = make_client(auth={"protect_reads": True})
    assert c.app.policy_fast_path is None
    assert c.get("/v1/policy").status_code == 401
    assert c.get("/v1/policy", headers={"Authorization": f"Bearer {READ_TOKEN}"}).status_code == 404
    assert _policy_requests_timed(c) == 2.0


def test_metrics_exposed_without_per_key_labels(make_client, workload) -> None:
    c = make_client()
    for wc in workload[:30]:
        post_window(c, wc)
    text = c.get("/metrics").text
    assert "regimetune_ingest_keys_total" in text
    assert "regimetune_windows_total 29.0" in text
    assert "regimetune_http_request_duration_seconds_bucket" in text
    assert "key=" not in text


def test_async_apply_acks_durable_then_applies_in_order(make_client, workload, tmp_path) -> None:
    sync = make_client()
    for wc in workload[:60]:
        post_window(sync, wc)
    c = make_client(
        ingest={"apply": "async", "queue_batches": 4}, store={"url": f"sqlite:///{tmp_path / 'a.db'}"}
    )
    acks = [post_window(c, wc) for wc in workload[:60]]
    assert [a["seq"] for a in acks] == list(range(1, 61))
    assert c.app.state.engine.wait_applied(timeout=30)
    status = c.get("/v1/engine").json()
    assert status["applied_seq"] == status["last_seq"] == 60
    assert c.get("/v1/windows").json() == sync.get("/v1/windows").json()
    strip = lambda d: (d["regime_from"], d["regime_to"], d["policy_version"])  # noqa: E731
    assert [strip(d) for d in c.get("/v1/decisions").json()["items"]] == [
        strip(d) for d in sync.get("/v1/decisions").json()["items"]
    ]


def test_refused_push_is_logged_and_last_good_policy_stays(make_client, workload) -> None:
    from regimetune.push import RecordingBackend

    c = make_client(backend=RecordingBackend(reject=[2]))
    for wc in workload:  # until a third regime change (the decline ends near window 70)
        post_window(c, wc)
        items = c.get("/v1/decisions").json()["items"]
        if len(items) >= 3:
            break
    assert len(items) >= 3, items
    wait_for(lambda: all(d["outcome"] != "pending" for d in c.get("/v1/decisions").json()["items"]))
    by_version = {d["policy_version"]: d for d in c.get("/v1/decisions").json()["items"]}
    assert by_version[2]["outcome"] == "refused"
    assert "refused by the backend" in by_version[2]["detail"]
    assert "the backend keeps version 1" in by_version[2]["detail"]
    assert by_version[3]["outcome"] == "delivered"
    assert c.get("/v1/policy").json()["version"] == max(by_version)


def test_upload_limits(make_client) -> None:
    from .conftest import AUTH

    c = make_client(tuning={"max_upload_bytes": 1000, "executor": "thread"})
    h = {**AUTH, "Content-Type": "application/octet-stream"}
    r = c.post("/v1/tuning-jobs/upload", params={"filename": "t.csv"}, content=b"x" * 2000, headers=h)
    assert r.status_code == 413
    r = c.post("/v1/tuning-jobs/upload", params={"filename": "t.csv"}, content=b"", headers=h)
    assert r.status_code == 422 and "empty" in r.json()["detail"]
    r = c.post("/v1/tuning-jobs/upload", params={"filename": "../x"}, content=b"x", headers=h)
    assert r.status_code == 422


def test_unknown_regime_starts_a_tuning_job_once(make_client, workload, tmp_path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from regimetune.api import create_app

    from .conftest import TestClient, settings_for

    calls = []

    def runner(trace, objective, budget, optimizer, **kw):
        calls.append((trace, kw["detector_state"] is not None))
        return {"policy_file": {"regimes": {"0": {"cache": {"mode": "lru", "limit_keys": 42}}}}, "report": {}}

    trace = tmp_path / "t.csv"
    trace.write_text("ts,key\n")
    s = settings_for(tmp_path, engine={"tune_unknown_regimes": True, "tuning_trace": str(trace)})
    with ThreadPoolExecutor(1) as pool, TestClient(create_app(s, executor=pool, jobs_runner=runner)) as c:
        for wc in workload[:30]:
            post_window(c, wc)
        wait_for(lambda: c.get("/v1/policies").json().get("0", {}).get("source") == "tuned")
        n_regimes = len({d["regime_to"] for d in c.get("/v1/decisions").json()["items"]})
        assert len(calls) == n_regimes and all(has_state for _, has_state in calls)
        first = c.get("/v1/decisions").json()["items"][-1]
        assert "safe default" in first["detail"]


def test_a_snapshot_prunes_batches_and_a_restart_from_it_decides_the_same(tmp_path, workload, caplog) -> None:
    from fastapi.testclient import TestClient

    from regimetune.api import create_app

    from .conftest import settings_for

    def history(c) -> tuple[list[tuple], list[dict]]:
        d = c.get("/v1/decisions", params={"limit": 1000}).json()["items"]
        segs = c.get("/v1/regimes", params={"limit": 1000}).json()["items"]
        return [(x["regime_from"], x["regime_to"], x["inputs"]["window"]) for x in d], segs

    for d in ("ref", "snap", "auto"):
        (tmp_path / d).mkdir()
    with TestClient(create_app(settings_for(tmp_path / "ref"))) as c:
        for wc in workload:
            post_window(c, wc)
        want = history(c)
    s = settings_for(tmp_path / "snap", ingest={"snapshot_every_s": 0.0, "keep_batches_s": 0.0})
    with TestClient(create_app(s)) as c:
        for wc in workload[:70]:
            post_window(c, wc)
        # every batch so far is covered and old enough; the newest one stays (it holds the
        # sequence number up)
        assert c.app.state.engine.snapshot() == 69
        assert c.app.state.store.count_batches() == 1
        for wc in workload[70:100]:
            post_window(c, wc)
    app = create_app(s)  # restores the snapshot (it took batch 70); the lifespan replays the rest
    assert app.state.engine.last_seq == 70
    with TestClient(app) as c:  # restart: the snapshot, then batches 71-100 again
        assert c.app.state.store.count_batches() == 31
        assert c.get("/v1/engine").json()["last_seq"] == 100
        for wc in workload[100:]:
            post_window(c, wc)
        assert history(c) == want
    # a snapshot taken with other windowing settings is not used (and says so)
    other = settings_for(tmp_path / "snap", engine={"window_s": 30.0}, ingest={"snapshot_every_s": 0.0})
    with (
        caplog.at_level(logging.WARNING, logger="regimetune.control.windowing"),
        TestClient(create_app(other)) as c,
    ):
        assert c.get("/readyz").status_code == 200
    assert "snapshot was taken with other settings" in caplog.text
    # taken on its own every snapshot_every_s (here by the background apply thread); young
    # batches stay for resends
    auto = {"apply": "async", "snapshot_every_s": 1e-6, "keep_batches_s": 3600.0}
    with TestClient(create_app(settings_for(tmp_path / "auto", ingest=auto))) as c:
        for wc in workload[:5]:
            post_window(c, wc)
        assert c.app.state.engine.wait_applied(timeout=30)
        assert c.app.state.store.count_batches() == 5
        assert c.app.state.store.load_snapshot("aggregator")[0] == 5
