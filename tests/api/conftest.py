"""Fixtures of the service tests: an app on a temp SQLite store with a recording backend."""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from regimetune.api import create_app, load_settings
from regimetune.client.ingest import WindowCounts, count_windows
from regimetune.collectors import GeneratorConfig, generate
from regimetune.push import RecordingBackend

with warnings.catch_warnings():  # starlette's TestClient warns about its httpx dependency
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

TOKEN = "write-token-for-tests"
READ_TOKEN = "read-token-for-tests"
#: min_regime_s for services in tests: their traces last minutes, not the hours of a real run
SHORT_REGIME_S = 300.0
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def settings_for(tmp_path: Path, **over: Any) -> Any:
    base: dict[str, Any] = {
        "store": {"url": f"sqlite:///{tmp_path / 'rt.db'}"},
        "auth": {"write_tokens": [TOKEN], "read_tokens": [READ_TOKEN]},
        # the tests replay half an hour or so of a run: regimes of 5 minutes give them several
        "engine": {"window_s": 60.0, "detector": {"min_regime_s": SHORT_REGIME_S}},
        "ingest": {"apply": "sync", "allowed_lateness_windows": 0},  # a window closes when a later one comes
        "push": {"backoff_base_s": 0.01, "backoff_max_s": 0.05, "poll_interval_s": 0.02},
    }
    for k, v in over.items():
        base[k] = {**base.get(k, {}), **v} if isinstance(v, dict) else v
    return load_settings(**base)


@pytest.fixture
def make_client(tmp_path: Path) -> Iterator[Callable[..., TestClient]]:
    opened: list[TestClient] = []

    def make(*, backend: Any = None, clock: Callable[[], float] = time.time, **over: Any) -> TestClient:
        app = create_app(settings_for(tmp_path, **over), backend=backend, clock=clock)
        c = TestClient(app)
        c.__enter__()
        opened.append(c)
        return c

    yield make
    for c in opened:
        c.__exit__(None, None, None)


@pytest.fixture
def recorder() -> RecordingBackend:
    return RecordingBackend()


@pytest.fixture(scope="session")
def workload() -> list[WindowCounts]:
    """A ParSplice-like run (four regimes) as 150 windows of 60 s of per-key counts."""
    return list(
        count_windows(generate(GeneratorConfig(duration_s=9000, workers=64, seed=1, preset="classic")), 60.0)
    )


def post_window(client: TestClient, wc: WindowCounts) -> Any:
    body = {
        "window_start": wc.start,
        "counts": {"keys": wc.keys.tolist(), "reads": wc.reads.tolist(), "writes": wc.writes.tolist()},
    }
    r = client.post("/v1/ingest", json=body, headers=AUTH)
    assert r.status_code == 200, r.text
    return r.json()
