"""Bad requests get a 4xx with a reason; auth; idempotent ingest; settings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from regimetune.api import load_settings
from regimetune.client.ingest import COUNTS_MEDIA_TYPE, encode_counts
from regimetune.models import ConfigError

from .conftest import AUTH, READ_TOKEN

COUNTS = {"window_start": 0.0, "counts": {"keys": [1, 2, 3], "reads": [4, 5, 6]}}


def test_writes_need_a_valid_token(make_client) -> None:
    c = make_client()
    r = c.post("/v1/ingest", json=COUNTS)
    assert r.status_code == 401 and "bearer token" in r.json()["detail"]
    assert r.headers["www-authenticate"] == "Bearer"
    r = c.post("/v1/ingest", json=COUNTS, headers={"Authorization": "Bearer wrong"})
    assert r.status_code == 403 and "wrong" not in r.text
    r = c.post("/v1/ingest", json=COUNTS, headers={"Authorization": f"Bearer {READ_TOKEN}"})
    assert r.status_code == 403  # a read token does not grant writes
    assert c.post("/v1/engine/pause").status_code == 401
    assert c.put("/v1/policies/0", json={}).status_code == 401


def test_reads_open_or_protected_by_setting(make_client) -> None:
    assert make_client().get("/v1/decisions").status_code == 200
    c = make_client(auth={"protect_reads": True})
    assert c.get("/v1/decisions").status_code == 401
    assert c.get("/v1/decisions", headers={"Authorization": f"Bearer {READ_TOKEN}"}).status_code == 200
    assert c.get("/v1/decisions", headers=AUTH).status_code == 200
    assert c.get("/healthz").status_code == 200


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({"window_start": 0.0}, "exactly one of"),
        ({"window_start": 0.0, "counts": {"keys": [1, 2], "reads": [1]}}, "equal lengths"),
        ({"window_start": -1.0, "counts": {"keys": [1], "reads": [1]}}, "greater than or equal"),
        ({"window_start": 0.0, "counts": {"keys": [-1], "reads": [1]}}, "greater than or equal"),
        ({"window_start": 0.0, "counts": {"keys": [2**64], "reads": [1]}}, "less than or equal"),
        ({"window_start": 0.0, "counts": {"keys": ["a"], "reads": [1]}}, "integer"),
        ({"window_start": 0.0, "events": {"ts": [2.0, 1.0], "key": [1, 2]}}, "time order"),
        ({"window_start": 0.0, "counts": {"keys": [1], "reads": [1]}, "x": 1}, "Extra inputs"),
        (
            {
                "window_start": 0.0,
                "counts": {"keys": [1], "reads": [1]},
                "buckets": {"ids": [0], "load": [1.0], "bytes": [1.0]},
            },
            "n_buckets",
        ),
    ],
)
def test_malformed_ingest_is_422_with_reason(make_client, body, reason) -> None:
    r = make_client().post("/v1/ingest", json=body, headers=AUTH)
    assert r.status_code == 422, r.text
    assert reason in json.dumps(r.json()["detail"])


def test_not_json_and_bad_binary(make_client) -> None:
    c = make_client()
    r = c.post("/v1/ingest", content=b"{not json", headers={**AUTH, "Content-Type": "application/json"})
    assert r.status_code == 422
    r = c.post(
        "/v1/ingest/counts",
        params={"window_start": 0},
        content=b"x" * 17,
        headers={**AUTH, "Content-Type": COUNTS_MEDIA_TYPE},
    )
    assert r.status_code == 422 and "16-byte" in r.json()["detail"]
    r = c.post(
        "/v1/ingest/counts",
        params={"window_start": 0},
        content=b"x" * 16,
        headers={**AUTH, "Content-Type": "text/plain"},
    )
    assert r.status_code == 415


def test_oversized_body_is_413(make_client) -> None:
    c = make_client(ingest={"max_body_bytes": 4096})
    big = {"window_start": 0.0, "counts": {"keys": list(range(2000)), "reads": [1] * 2000}}
    r = c.post("/v1/ingest", json=big, headers=AUTH)
    assert r.status_code == 413 and "4096" in r.json()["detail"]
    assert c.post("/v1/ingest", json=COUNTS, headers=AUTH).status_code == 200
    assert 'regimetune_ingest_rejected_total{reason="too_large"} 1.0' in c.get("/metrics").text


def test_closed_window_is_refused(make_client) -> None:
    c = make_client()
    assert c.post("/v1/ingest", json={**COUNTS, "window_start": 120.0}, headers=AUTH).status_code == 200
    assert c.post("/v1/ingest", json={**COUNTS, "window_start": 240.0}, headers=AUTH).status_code == 200
    r = c.post("/v1/ingest", json={**COUNTS, "window_start": 60.0}, headers=AUTH)
    assert r.status_code == 422 and "already closed" in r.json()["detail"]


def test_idempotency_key_acknowledges_a_resend_once(make_client) -> None:
    c = make_client()
    body = encode_counts(*(x for x in __import__("numpy").array([[1, 2], [3, 4], [0, 1]], dtype="u8")))
    h = {**AUTH, "Content-Type": COUNTS_MEDIA_TYPE, "Idempotency-Key": "batch-1"}
    a = c.post("/v1/ingest/counts", params={"window_start": 0}, content=body, headers=h).json()
    b = c.post("/v1/ingest/counts", params={"window_start": 0}, content=body, headers=h).json()
    assert a["seq"] == b["seq"] and not a["duplicate"] and b["duplicate"]
    assert c.get("/v1/engine").json()["last_seq"] == a["seq"]


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({"cache": {"mode": "lru", "limit_keys": 10**9}}, "cache.limit_keys=1000000000 is outside"),
        ({"weights": {"w_load": 1.0, "w_data": 1.0, "w_time": 1e7}}, "weights.w_time"),
        (
            {"cache": {"mode": "two_phase", "limit_keys": 100, "high_watermark_keys": 2 * 10**9}},
            "high_watermark",
        ),
        ({"cache": {"mode": "lru"}}, "needs limit_keys"),
        ({"weights": {"w_load": 0.5, "w_data": 0.5}}, "max(W_L, W_D) must be 1"),
    ],
)
def test_out_of_bounds_policy_is_422(make_client, body, reason) -> None:
    c = make_client()
    r = c.put("/v1/policies/3", json=body, headers=AUTH)
    assert r.status_code == 422, r.text
    assert reason in json.dumps(r.json()["detail"])
    assert c.get("/v1/policies").json() == {}


def test_bounds_come_from_settings(make_client) -> None:
    c = make_client(engine={"bounds": {"limit_keys": [10, 1000]}})
    assert (
        c.put("/v1/policies/0", json={"cache": {"mode": "lru", "limit_keys": 5}}, headers=AUTH).status_code
        == 422
    )
    r = c.put("/v1/policies/0", json={"cache": {"mode": "lru", "limit_keys": 500}}, headers=AUTH)
    assert r.status_code == 200
    assert c.get("/v1/policies/0").json()["cache"]["limit_keys"] == 500
    assert c.get("/v1/policies/1").json()["source"] == "default"


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("DELETE", "/v1/policies/0", "GET, PUT"),  # two routes on one path: both named
        ("DELETE", "/v1/tuning-jobs", "GET, POST"),
        ("DELETE", "/v1/tuning-jobs/upload", "POST"),  # not the job "upload" of .../{job_id}
        ("POST", "/v1/policy", "GET"),  # the fast path's route too
        ("GET", "/v1/ingest/counts", "POST"),
        ("PATCH", "/v1/engine/mode", "PUT"),
    ],
)
def test_a_405_names_every_method_the_path_serves(make_client, method: str, path: str, allow: str) -> None:
    c = make_client()
    r = c.request(method, path, headers=AUTH)
    assert r.status_code == 405 and r.headers["allow"] == allow
    assert r.json() == {"detail": "Method Not Allowed"}
    for m in allow.split(", "):  # and each method named is served there
        assert c.request(m, path, headers=AUTH).status_code != 405, m


def test_detector_settings_reach_the_engines_detector(make_client) -> None:
    c = make_client(engine={"detector": {"max_regimes": 4, "min_step": 0.2}})
    params = c.app.state.engine.detector_state()["params"]
    assert (params["max_regimes"], params["min_step"]) == (4, 0.2)
    assert params["window_s"] == 60.0  # unset in the section: the engine's window length
    # the detector gives out ids 0-3 only, so no operator policy for id 4
    assert c.get("/v1/policies/3").status_code == 200
    assert c.get("/v1/policies/4").status_code == 404


def test_unknown_things_are_404_or_422(make_client) -> None:
    c = make_client()
    assert c.get("/v1/policy").status_code == 404
    assert c.get("/v1/tuning-jobs/nope").status_code == 404
    assert c.get("/v1/policies/-1").status_code == 422
    assert c.get("/v1/regimes", params={"limit": 0}).status_code == 422
    r = c.post("/v1/tuning-jobs", json={"trace": "/etc/passwd"}, headers=AUTH)
    assert r.status_code == 422 and "trace_dirs" in r.json()["detail"]


def test_tuning_job_paths_confined_to_trace_dirs(make_client, tmp_path: Path) -> None:
    traces = tmp_path / "traces"
    traces.mkdir()
    c = make_client(tuning={"trace_dirs": [str(traces)], "executor": "thread"})
    r = c.post("/v1/tuning-jobs", json={"trace": str(traces / ".." / "rt.db")}, headers=AUTH)
    assert r.status_code == 422 and "not under an allowed directory" in r.json()["detail"]
    r = c.post("/v1/tuning-jobs", json={"trace": str(traces / "missing.csv")}, headers=AUTH)
    assert r.status_code == 404


def test_engine_mode_switch_persists(make_client) -> None:
    c = make_client()
    assert c.put("/v1/engine/mode", json={"mode": "recommend"}, headers=AUTH).json()["mode"] == "recommend"
    assert c.put("/v1/engine/mode", json={"mode": "bogus"}, headers=AUTH).status_code == 422
    assert make_client().get("/v1/engine").json()["mode"] == "recommend"  # same store, new app


def test_settings_file_env_and_errors(tmp_path: Path, monkeypatch) -> None:
    f = tmp_path / "rt.toml"
    f.write_text('[engine]\nmode = "recommend"\nwindow_s = 5.0\n[store]\nurl = "sqlite://"\n')
    assert load_settings(f).engine.mode == "recommend"
    monkeypatch.setenv("REGIMETUNE_ENGINE__MODE", "off")
    s = load_settings(f)
    assert s.engine.mode == "off" and s.engine.window_s == 5.0  # env beats file, file beats defaults
    monkeypatch.setenv("REGIMETUNE_AUTH__WRITE_TOKENS", '["s3cret"]')
    s = load_settings()
    assert "s3cret" not in repr(s) and s.auth.write_tokens[0].get_secret_value() == "s3cret"
    with pytest.raises(ConfigError, match=r"needs push\.url"):
        load_settings(push={"backend": "reference"})
    with pytest.raises(ConfigError, match="cannot read config"):
        load_settings(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[engine\n")
    with pytest.raises(ConfigError, match="not valid"):
        load_settings(bad)


def test_app_refuses_to_start_without_write_token(tmp_path: Path) -> None:
    from regimetune.api import create_app

    with pytest.raises(ConfigError, match="no write token"):
        create_app(load_settings(store={"url": f"sqlite:///{tmp_path / 'x.db'}"}))


def test_tuning_job_on_a_server_side_trace_applies_tuned_policies(make_client, tmp_path: Path) -> None:
    from regimetune.collectors import GeneratorConfig, generate, write_events

    traces = tmp_path / "traces"
    traces.mkdir()
    trace = traces / "run.csv"
    write_events(generate(GeneratorConfig(duration_s=1800, workers=8, seed=3, preset="classic")), trace)
    c = make_client(tuning={"trace_dirs": [str(traces)], "executor": "thread"}, engine={"window_s": 10.0})
    r = c.post("/v1/tuning-jobs", json={"trace": str(trace), "budget": 6, "apply": True}, headers=AUTH)
    assert r.status_code == 202, r.text
    job = r.json()
    assert job["status"] == "running"
    run = c.app.state.jobs.wait(job["id"], timeout=120)
    assert run.status.value == "succeeded", run.error
    got = c.get(f"/v1/tuning-jobs/{job['id']}").json()
    assert got["status"] == "succeeded" and got["policies"]
    stored = c.get("/v1/policies").json()
    assert set(stored) == {str(k) for k in got["policies"]}
    assert all(p["source"] == "tuned" for p in stored.values())
    assert 'regimetune_tuning_jobs_total{status="succeeded"} 1.0' in c.get("/metrics").text


def test_rescale_tuning_job_sets_weights_and_keeps_each_regimes_cache_limits(
    make_client, tmp_path: Path
) -> None:
    from regimetune.collectors import GeneratorConfig, generate, write_events

    traces = tmp_path / "traces"
    traces.mkdir()
    trace = traces / "run.csv"
    write_events(generate(GeneratorConfig(duration_s=1800, workers=8, seed=3, preset="classic")), trace)
    c = make_client(tuning={"trace_dirs": [str(traces)], "executor": "thread"}, engine={"window_s": 10.0})
    cache = {"mode": "lru", "limit_keys": 500}
    for rid in range(4):  # an operator set cache limits on every regime the trace can show
        assert c.put(f"/v1/policies/{rid}", json={"cache": cache}, headers=AUTH).status_code == 200
    body = {"trace": str(trace), "objective": "rescale", "budget": 4, "apply": True}
    r = c.post("/v1/tuning-jobs", json=body, headers=AUTH)
    assert r.status_code == 202, r.text
    run = c.app.state.jobs.wait(r.json()["id"], timeout=300)
    assert run.status.value == "succeeded", run.error
    assert run.objective.value == "rescale" and run.policies
    stored = c.get("/v1/policies").json()
    for rid, tuned in run.policies.items():
        got = stored[str(rid)]
        assert got["source"] == "tuned"
        assert got["weights"] == tuned.weights.model_dump(mode="json")
        assert got["cache"] == {**got["cache"], **cache}  # the operator's limits stay
    # the tuned weights differ from the defaults somewhere (the job really tuned them)
    assert any(p.weights != type(p.weights)() for p in run.policies.values())
