"""A closed window whose commit the store refuses (a full disk) stays owed: committed later in
order, never passed by the checkpoint or a snapshot, replayed after a restart. Checked against
the same run on a store that never fails."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from regimetune.api import load_settings
from regimetune.api.store import SqlStore
from regimetune.client.ingest import WindowCounts
from regimetune.control import Controller, StoreUnavailable
from regimetune.control.store import ENGINE_CHECKPOINT
from regimetune.control.windowing import SNAPSHOT

from .test_controller import FakeRecorder


class FullDisk(SqlStore):
    """The service's store whose disk is full while ``full`` is set: windows are refused (a
    batch, smaller, still fits)."""

    full = False

    def commit_window(self, *args: Any, **kwargs: Any) -> Any:
        if self.full:
            raise StoreUnavailable("the store cannot write: database or disk is full")
        return super().commit_window(*args, **kwargs)


def open_app(path: Path, apply: str = "sync") -> tuple[Controller, FullDisk]:
    settings = load_settings(
        store={"url": f"sqlite:///{path}"},
        auth={"allow_anonymous_writes": True},
        engine={"window_s": 60.0, "detector": {"min_regime_s": 300.0}},
        ingest={"apply": apply, "allowed_lateness_windows": 0},
    )
    store = FullDisk.open(settings.store)
    control = Controller(settings=settings, store=store, recorder=FakeRecorder(), pushing=False)
    control.start()
    return control, store


def feed(control: Controller, windows: list[WindowCounts]) -> None:
    for wc in windows:
        columns = {"keys": wc.keys, "reads": wc.reads, "writes": wc.writes}
        control.engine.ingest(kind="counts", window_start=wc.start, columns=columns)


def history(store: SqlStore) -> tuple[Any, ...]:
    decisions = [
        (d.regime_from, d.regime_to, d.inputs.get("window"), d.policy_version)
        for d in store.decisions(limit=1000)[0]
    ]
    return store.windows(limit=10_000), store.segments(limit=1000)[0], decisions


@pytest.fixture(scope="module")
def reference(workload, tmp_path_factory) -> tuple[Any, ...]:
    control, store = open_app(tmp_path_factory.mktemp("ref") / "rt.db")
    try:
        feed(control, workload)
        return history(store)
    finally:
        control.stop()
        store.close()


def test_refused_windows_stay_owed_and_are_committed_in_order(tmp_path, workload, reference) -> None:
    control, store = open_app(tmp_path / "rt.db")
    try:
        feed(control, workload[:40])
        store.full = True
        feed(control, workload[40:50])  # acknowledged: the batches are stored
        assert control.engine.owed_windows == 10
        assert store.load_checkpoint(ENGINE_CHECKPOINT)[1] == 38  # never past a window not stored
        assert len(store.windows(limit=10_000)) == 39
        assert control.engine.store_error is not None and "disk is full" in control.engine.store_error
        store.full = False
        feed(control, workload[50:])  # the next batch commits the owed windows first
        assert control.engine.owed_windows == 0 and control.engine.store_error is None
        assert history(store) == reference
    finally:
        control.stop()
        store.close()


def test_owed_windows_are_replayed_after_a_restart(tmp_path, workload, reference) -> None:
    control, store = open_app(tmp_path / "rt.db")
    feed(control, workload[:40])
    control.engine.snapshot()
    snap_seq = store.load_snapshot(SNAPSHOT)[0]  # type: ignore[index]
    store.full = True
    feed(control, workload[40:60])
    assert control.engine.snapshot() == 0  # nothing saved while windows are owed
    assert store.load_snapshot(SNAPSHOT)[0] == snap_seq  # type: ignore[index]
    control.stop()  # the process dies with 20 windows owed
    store.close()
    control, store = open_app(tmp_path / "rt.db")  # the disk was freed meanwhile
    try:
        assert control.engine.owed_windows == 0
        feed(control, workload[60:])
        assert history(store) == reference
    finally:
        control.stop()
        store.close()


def test_the_engine_thread_retries_owed_windows_without_new_batches(tmp_path, workload) -> None:
    control, store = open_app(tmp_path / "rt.db", apply="async")
    try:
        feed(control, workload[:20])
        assert control.engine.wait_applied(timeout=10.0)
        store.full = True
        feed(control, workload[20:30])
        assert control.engine.wait_applied(timeout=10.0)
        assert control.engine.owed_windows == 10
        store.full = False  # no batch comes: the engine tries again on its own
        end = time.monotonic() + 10.0
        while control.engine.owed_windows and time.monotonic() < end:
            time.sleep(0.05)
        assert control.engine.owed_windows == 0
        assert [w[0] for w in store.windows(limit=10_000)] == list(range(29))
    finally:
        control.stop()
        store.close()
