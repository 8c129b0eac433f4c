"""The gauges the alerts need follow the real state: the engine's pause switch and mode on the
service's /metrics, the policy in force and the placement on the backend's /metrics."""

from __future__ import annotations

import warnings
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from regimetune.api import create_app, load_settings
from regimetune.backend import create_app as create_backend
from regimetune.backend import demo_placement
from regimetune.backend import load_settings as backend_settings

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

TOKEN = "t"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }


def test_engine_gauges_follow_pause_and_mode(tmp_path: Path) -> None:
    settings = load_settings(
        store={"url": f"sqlite:///{tmp_path / 'rt.db'}"},
        auth={"write_tokens": [TOKEN]},
        ingest={"apply": "sync"},
    )
    with TestClient(create_app(settings)) as c:
        m = samples(c.get("/metrics").text)
        assert m[("regimetune_engine_paused", ())] == 0
        assert m[("regimetune_engine_mode", (("mode", "auto"),))] == 1
        assert m[("regimetune_engine_mode", (("mode", "recommend"),))] == 0
        assert c.post("/v1/engine/pause", headers=AUTH).status_code == 200
        assert c.put("/v1/engine/mode", json={"mode": "recommend"}, headers=AUTH).status_code == 200
        m = samples(c.get("/metrics").text)
        assert m[("regimetune_engine_paused", ())] == 1
        assert m[("regimetune_engine_mode", (("mode", "auto"),))] == 0
        assert m[("regimetune_engine_mode", (("mode", "recommend"),))] == 1
    # a restart restores the switch from the store, and the gauge says so
    with TestClient(create_app(settings)) as c:
        assert samples(c.get("/metrics").text)[("regimetune_engine_paused", ())] == 1


def test_backend_metrics_follow_its_state(tmp_path: Path) -> None:
    app = create_backend(backend_settings(state=tmp_path / "b.db"))
    with TestClient(app) as c:
        m = samples(c.get("/metrics").text)
        assert m[("regimetune_backend_policy_version", ())] == -1
        assert m[("regimetune_backend_servers", ())] == 0
        app.state.service.init_placement(demo_placement(servers=5, buckets=16, seed=0))
        m = samples(c.get("/metrics").text)
        assert m[("regimetune_backend_servers", ())] == 5
        assert m[("regimetune_backend_placement_revision", ())] >= 0
