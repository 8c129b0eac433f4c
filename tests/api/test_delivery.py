"""Issue 13 in process: desired against delivered, the flap budget, credentials kept out of
the decision log, unknown regimes, and a policy file's detector state and default."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import pytest

from regimetune.api import create_app
from regimetune.models import ConfigError
from regimetune.push import RecordingBackend

from .conftest import AUTH, TestClient, post_window, settings_for
from .test_flow import wait_for
from .test_ingest import metric


def decisions(c: TestClient) -> list[dict[str, Any]]:
    return c.get("/v1/decisions", params={"limit": 1000}).json()["items"][::-1]


def test_policy_serves_desired_and_says_delivered(make_client, recorder, workload) -> None:
    # finding 2: the service served versions the backend never got without saying so
    c = make_client(backend=recorder)
    recorder.go_down()
    for wc in workload[:80]:
        post_window(c, wc)
    made = [d["policy_version"] for d in decisions(c) if d["policy_version"] is not None]
    assert len(made) >= 2
    r = c.get("/v1/policy")
    assert r.json()["version"] == made[-1] and r.headers["x-delivered-version"] == "none"
    wait_for(lambda: c.get("/v1/policy/status").json()["last_error"] is not None)
    status = c.get("/v1/policy/status").json()
    assert status["desired"]["version"] == made[-1] and status["delivered_version"] is None
    assert status["pending"] == made and status["pushing"] is True
    assert "down" in status["last_error"]
    delivered = "regimetune_policy_delivered_version"
    assert metric(c, delivered) == 0.0 and metric(c, "regimetune_policy_version") == made[-1]
    recorder.come_up()
    wait_for(lambda: c.get("/v1/policy/status").json()["delivered_version"] == made[-1])
    assert metric(c, delivered) == made[-1]  # the metric says what the backend acknowledged
    assert c.get("/v1/policy/status").json()["pending"] == []
    again = c.get("/v1/policy", headers={"If-None-Match": r.headers["etag"]})
    assert again.status_code == 304 and again.headers["x-delivered-version"] == str(made[-1])
    # the backend went straight to the newest; the older versions say they were superseded
    assert recorder.received_versions == [made[-1]]
    outcomes = {d["policy_version"]: d for d in decisions(c) if d["policy_version"]}
    for n in made[:-1]:
        assert outcomes[n]["outcome"] == "superseded"
        assert f"superseded by version {made[-1]}, delivered first" in outcomes[n]["detail"]
    assert outcomes[made[-1]]["outcome"] == "delivered"


def test_without_supersede_every_version_is_delivered_in_order(make_client, recorder, workload) -> None:
    c = make_client(backend=recorder, push={"supersede": False})
    recorder.go_down()
    for wc in workload[:80]:
        post_window(c, wc)
    made = [d["policy_version"] for d in decisions(c) if d["policy_version"] is not None]
    time.sleep(0.5)  # many attempts at backoff_max_s 0.05: none is given up
    recorder.come_up()
    wait_for(lambda: recorder.received_versions == made)


def test_flap_budget_holds_changes_back_and_logs_them(make_client, recorder, workload) -> None:
    c = make_client(backend=recorder, push={"max_per_hour": 1})
    for wc in workload[:100]:
        post_window(c, wc)
    log = decisions(c)
    changes = [d for d in log if d["regime_from"] != d["regime_to"]]
    assert len(changes) >= 2, log
    assert changes[0]["policy_version"] == 1
    held = [d for d in log if d["outcome"] == "held"]
    assert held and all(d["policy_version"] is None for d in held)
    assert "flap budget spent (1 versions in the last hour, push.max_per_hour=1)" in held[-1]["detail"]
    assert c.get("/v1/policy").json()["version"] == 1
    assert c.app.state.store.get_kv("engine.held") == held[-1]["regime_to"]  # a restart keeps it
    held_metric = 'regimetune_policy_changes_held_total{reason="flap_budget"}'
    assert metric(c, held_metric) == len(held)
    # an hour later the budget allows again: the held-back change is applied
    engine = c.app.state.engine
    engine.decider.clock = lambda: time.time() + 3601.0  # what the flap budget reads
    post_window(c, workload[100])
    last = decisions(c)[-1]
    assert last["policy_version"] == 2 and last["regime_to"] == held[-1]["regime_to"]
    assert "flap budget allows again" in last["detail"] or last["regime_from"] != last["regime_to"]
    wait_for(lambda: recorder.received_versions == [1, 2])


def test_push_credentials_never_reach_the_decision_log_or_logs(make_client, workload, caplog) -> None:
    # finding 8: the push URL with its userinfo appeared verbatim in GET /v1/decisions
    url = "http://ops:pa55word@127.0.0.1:9/rescale?token=t0psecret"
    caplog.set_level(logging.DEBUG)
    c = make_client(push={"backend": "rest", "url": url, "headers": {"X-Api-Key": "bearer-secret"}})
    for wc in workload[:40]:
        post_window(c, wc)
    wait_for(lambda: any("backend behind" in d["detail"] for d in decisions(c)))
    text = c.get("/v1/decisions").text + c.get("/v1/policy/status").text + caplog.text
    assert "127.0.0.1:9" in text  # the error is there, only masked
    for secret in ("pa55word", "t0psecret", "bearer-secret", "ops:"):
        assert secret not in text


def test_a_push_url_with_a_password_and_a_token_is_refused_at_start(tmp_path) -> None:
    # the URL's Basic auth would silently replace the bearer token: every version refused (401)
    url = "http://ops:pa55word@127.0.0.1:9/rescale"
    with pytest.raises(ConfigError, match=r"push\.url carries a user and password and push\.token") as err:
        settings_for(tmp_path, push={"backend": "rest", "url": url, "token": "bearer-secret"})
    assert "pa55word" not in str(err.value)


def test_unknown_regime_is_404_with_a_reason(make_client) -> None:
    c = make_client()
    body = {"cache": {"mode": "lru", "limit_keys": 5}}
    for r in (c.get("/v1/policies/999"), c.put("/v1/policies/999", json=body, headers=AUTH)):
        assert r.status_code == 404 and "no regime 999" in r.json()["detail"], r.text
    assert c.get("/v1/policies").json() == {}
    # ids the detector may still give out (below max_regimes) can be set ahead of time
    assert c.put("/v1/policies/3", json=body, headers=AUTH).status_code == 200
    assert c.get("/v1/policies/3").json()["cache"]["limit_keys"] == 5


# -- a policy file (finding 9) ----------------------------------------------------------------
def _policy_file(tmp_path: Path, state: dict[str, Any]) -> Path:
    pf = {
        "default": {"cache": {"mode": "lru", "limit_keys": 42}},
        "regimes": {"0": {"cache": {"mode": "lru", "limit_keys": 11}}},
        "detector_state": state,
    }
    path = tmp_path / "policy.json"
    path.write_text(json.dumps(pf))
    return path


def _dir(path: Path) -> Path:
    path.mkdir(exist_ok=True)
    return path


def _open(settings: Any) -> TestClient:
    c = TestClient(create_app(settings, backend=RecordingBackend()))
    c.__enter__()
    return c


@pytest.fixture
def learnt_state(tmp_path: Path, workload) -> dict[str, Any]:
    """A detector state learnt elsewhere (as `detect --state` or `tune` save it)."""
    c = _open(settings_for(_dir(tmp_path / "offline")))
    try:
        for wc in workload[:60]:
            post_window(c, wc)
        state = c.app.state.engine.detector_state()
    finally:
        c.__exit__(None, None, None)
    assert state is not None
    return state


def test_policy_file_detector_state_and_default_are_used(tmp_path, learnt_state) -> None:
    path = _policy_file(tmp_path, learnt_state)
    c = _open(settings_for(_dir(tmp_path / "online"), policy_file=str(path)))
    try:
        assert c.app.state.engine.detector_state() == learnt_state  # same ids online as offline
        r = c.get("/v1/policy")  # was 404 until the first change
        assert r.status_code == 200, r.text
        assert r.json()["version"] == 1 and r.json()["policy"]["cache"]["limit_keys"] == 42
        assert c.get("/v1/policies/0").json()["cache"]["limit_keys"] == 11
    finally:
        c.__exit__(None, None, None)


def test_policy_file_against_a_store_that_learnt_otherwise(tmp_path, learnt_state, workload) -> None:
    path = _policy_file(tmp_path, learnt_state)
    here = _dir(tmp_path / "svc")
    c = _open(settings_for(here))  # this store's detector learns from its own windows
    for wc in workload[:15]:
        post_window(c, wc)
    own = c.app.state.engine.detector_state()
    c.__exit__(None, None, None)
    with pytest.raises(ConfigError, match="--detector-from policy-file"):
        create_app(settings_for(here, policy_file=str(path)))
    c = _open(settings_for(here, policy_file=str(path), detector_from="store"))
    assert c.app.state.engine.detector_state() == own
    assert c.get("/v1/policies").json() == {}  # the file's ids would name other regimes here
    c.__exit__(None, None, None)
    c = _open(settings_for(here, policy_file=str(path), detector_from="policy-file"))
    assert c.app.state.engine.detector_state() == learnt_state
    assert c.get("/v1/policies/0").json()["cache"]["limit_keys"] == 11
    c.__exit__(None, None, None)
    # from now on the store's detector started from the file: the two agree
    c = _open(settings_for(here, policy_file=str(path)))
    assert c.app.state.engine.detector_state() == learnt_state
    c.__exit__(None, None, None)


def test_dashboard_shows_desired_and_delivered(make_client) -> None:
    page = make_client().get("/dashboard").text
    assert "/v1/policy/status" in page and "desired / delivered" in page
    assert "status.delivered_version" in page and "backend behind" in page
