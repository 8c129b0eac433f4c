"""Conformance checks for collectors (as river's ``checks`` and ``push.checks``).

A :class:`CollectorCase` names a registered collector, a factory for a fresh one over a known
fixture (``requests`` requests in all) and, optionally, a factory for one over a bad source.
Each check raises ``AssertionError`` when the contract is broken. Parametrise one test over
``COLLECTOR_CHECKS`` and every case::

    @pytest.mark.parametrize("check", COLLECTOR_CHECKS, ids=lambda c: c.__name__)
    def test_my_collector(check):
        check(CollectorCase("csv", lambda: CsvReader(path), requests=100))
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from regimetune.collectors.base import Collector, Telemetry, WindowBatch, window_from_ingest
from regimetune.collectors.registry import collector_class
from regimetune.models.errors import RegimetuneError
from regimetune.models.events import EventBatch


@dataclass(frozen=True)
class CollectorCase:
    """``make`` builds a fresh collector over a fixture of ``requests`` requests; ``make_bad``
    (optional) one whose source is malformed or unreachable."""

    name: str
    make: Callable[[], Collector]
    requests: int
    make_bad: Callable[[], Collector] | None = None


def _collect(case: CollectorCase) -> list[Telemetry]:
    c = case.make()
    try:
        return list(c.collect())
    finally:
        c.close()


def check_registered_under_its_name(case: CollectorCase) -> None:
    c = case.make()
    try:
        assert isinstance(c, Collector), f"{type(c).__name__} is not a Collector"
        assert c.name == case.name, (c.name, case.name)
        assert collector_class(case.name) is type(c), f"{case.name!r} is registered as another class"
    finally:
        c.close()


def check_yields_telemetry_in_time_order(case: CollectorCase) -> None:
    items = _collect(case)
    assert items, f"{case.name} yielded nothing from its fixture"
    last_ts, last_start = -np.inf, -np.inf
    for item in items:
        assert isinstance(item, EventBatch | WindowBatch), type(item)
        if isinstance(item, EventBatch):
            if len(item):
                assert (np.diff(item.ts) >= 0).all(), "events out of time order within a batch"
                assert item.ts[0] >= last_ts, "events out of time order across batches"
                last_ts = float(item.ts[-1])
            continue
        assert item.window_start >= last_start, "windows out of order"
        last_start = item.window_start
        assert item.keys.dtype == np.uint64 and item.reads.dtype == np.uint32, (
            item.keys.dtype,
            item.reads.dtype,
        )
        assert len(item.keys) == len(item.reads) == len(item.writes)
        assert len(item.bucket_ids) == len(item.bucket_load) == len(item.bucket_bytes)
        assert item.reads_total >= int(item.reads.sum()) and item.writes_total >= int(item.writes.sum())
        assert item.length >= 0


def check_counts_every_request(case: CollectorCase) -> None:
    total = 0
    for item in _collect(case):
        total += len(item) if isinstance(item, EventBatch) else item.requests
    assert total == case.requests, f"{case.name} counted {total} requests, the fixture holds {case.requests}"


def check_windows_survive_the_ingest_json(case: CollectorCase) -> None:
    for item in _collect(case):
        if not isinstance(item, WindowBatch):
            continue
        again = window_from_ingest(item.to_ingest(), source_id=item.source_id, length=item.length)
        assert again.window_start == item.window_start
        assert again.keys.tolist() == item.keys.tolist() and again.reads.tolist() == item.reads.tolist()
        assert again.bucket_load.tolist() == item.bucket_load.tolist()


def check_bad_source_raises_a_project_error(case: CollectorCase) -> None:
    if case.make_bad is None:
        return
    c = case.make_bad()
    try:
        for _ in c.collect():
            pass
    except RegimetuneError as exc:
        assert str(exc), "an error without a reason"
    else:
        raise AssertionError(f"{case.name} read a bad source without an error")
    finally:
        c.close()


def check_close_twice_and_context_manager(case: CollectorCase) -> None:
    c = case.make()
    with c as entered:
        assert entered is c
    c.close()
    c.close()


COLLECTOR_CHECKS: tuple[Callable[[CollectorCase], None], ...] = (
    check_registered_under_its_name,
    check_yields_telemetry_in_time_order,
    check_counts_every_request,
    check_windows_survive_the_ingest_json,
    check_bad_source_raises_a_project_error,
    check_close_twice_and_context_manager,
)


__all__ = ["COLLECTOR_CHECKS", "CollectorCase"]
