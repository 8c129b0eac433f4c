"""The application runs without HTTP: a Python program drives the Controller over the SQL
store, ingesting windows, setting a policy and hearing the push worker's reports, and what
it reports reaches its Recorder."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from regimetune.api import load_settings
from regimetune.api.store import SqlStore
from regimetune.client.ingest import WindowCounts, count_windows
from regimetune.collectors import GeneratorConfig, generate
from regimetune.control import Controller
from regimetune.models import CachePolicy, NotFoundError, PolicyVersion, PufferscaleWeights
from regimetune.push import DeliveryEvent


class FakeRecorder:
    """Every report, by method name (a Recorder, as the service's metrics are one)."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.args: dict[str, list[Any]] = {}

    def __getattr__(self, name: str) -> Any:
        def record(*args: Any, **kwargs: Any) -> None:
            self.calls[name] += 1
            self.args.setdefault(name, []).append(args or kwargs)

        return record


@pytest.fixture(scope="module")
def workload() -> list[WindowCounts]:
    """A ParSplice-like run (four regimes) as 150 windows of 60 s of per-key counts."""
    run = generate(GeneratorConfig(duration_s=9000, workers=64, seed=1, preset="classic"))
    return list(count_windows(run, 60.0))


@pytest.fixture
def app(tmp_path: Path) -> Iterator[tuple[Controller, SqlStore, FakeRecorder, list[PolicyVersion]]]:
    settings = load_settings(
        store={"url": f"sqlite:///{tmp_path / 'rt.db'}"},
        auth={"allow_anonymous_writes": True},
        engine={"window_s": 60.0},
        ingest={"apply": "sync", "allowed_lateness_windows": 0},
        push={"max_per_hour": 3},
    )
    store = SqlStore.open(settings.store)
    recorder = FakeRecorder()
    queued: list[PolicyVersion] = []
    control = Controller(
        settings=settings, store=store, recorder=recorder, pushing=True, on_version=queued.append
    )
    control.restore()
    control.start()
    try:
        yield control, store, recorder, queued
    finally:
        control.stop()
        store.close()


def test_the_application_runs_without_http(app, workload) -> None:
    control, store, recorder, queued = app
    for wc in workload[:100]:
        columns = {"keys": wc.keys, "reads": wc.reads, "writes": wc.writes}
        control.engine.ingest(kind="counts", window_start=wc.start, columns=columns)
    engine = control.engine
    assert recorder.calls["batch_ingested"] == 100
    assert recorder.calls["window_closed"] == engine.n_windows == 99  # the newest stays open
    changes = sum(1 for a in recorder.args["window_closed"] if a["changed"])
    assert changes >= 2 and engine.current_regime is not None
    # each change made a version queued for the push worker, until the flap budget held them
    assert [v.version for v in queued] == list(range(1, len(queued) + 1))
    assert len(queued) == min(changes, 3)
    assert recorder.calls["change_held"] == max(changes - 3, 0)
    assert recorder.args["newest_version"][-1] == (len(queued),)

    # an operator's policy for the current regime: applied at once (a version if the budget allows)
    cur = engine.current_regime
    lru = CachePolicy(mode="lru", limit_keys=500)
    policy = control.set_policy(cur, cache=lru, weights=PufferscaleWeights())
    assert store.regime_policy(cur) == policy and control.regime_policy(cur) == policy
    with pytest.raises(NotFoundError, match="no regime 99"):
        control.set_policy(99, cache=lru, weights=PufferscaleWeights())

    # the push worker's report lands on the decision that made the version
    v = queued[0].version
    control.delivered(DeliveryEvent(kind="delivered", version=v, at=time.time(), attempts=1))
    assert recorder.args["push_event"] == [("delivered",)]
    made = [d for d in store.decisions(limit=1000)[0] if d.policy_version == v]
    assert made and made[0].outcome.value == "delivered" and made[0].detail.endswith("| push: delivered")
