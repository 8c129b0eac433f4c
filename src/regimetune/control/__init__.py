"""The application layer: the service's two loops, between ``tuner`` and ``api``.

- :class:`Controller` (``controller``): the whole application over one store, and the rules
  that connect its loops (operator and tuned policies, tuning an unknown regime, push outcomes);
- the online loop, :class:`Engine` (``engine``): ingest -> windows -> regimes -> decisions ->
  policy versions for the outbox, with event-time lateness (``lateness``), the windowing
  state (``windowing``), stale-telemetry rules (``telemetry``) and the decisions (modes, the
  flap budget: ``decisions``);
- tuning jobs, :class:`JobManager` (``jobs``): tune on a recorded trace in a worker pool;
- which policy a regime gets (``policies``) and starting from an offline policy file
  (``policy_file``).

It speaks no HTTP and writes no SQL: it keeps its state through the :class:`Store` protocol
and reports through the :class:`Recorder` protocol, which the service (``regimetune.api``)
implements with its SQL store and its Prometheus metrics. Its settings are sections of the
service's one ``Settings`` (``settings``).

The names below are imported on first use (PEP 562), so reading the settings loads none of
the loops.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from regimetune._lazy import lazy_attributes

if TYPE_CHECKING:
    from regimetune.control.controller import Controller
    from regimetune.control.engine import Engine, IngestResult
    from regimetune.control.jobs import JobManager, run_tuning
    from regimetune.control.policies import check_bounds, merge_tuned
    from regimetune.control.recorder import Recorder
    from regimetune.control.settings import ControlSettings
    from regimetune.control.store import JobStore, Store, StoredBatch, StoreUnavailable

_WHERE = {
    "Controller": "controller",
    "Engine": "engine",
    "IngestResult": "engine",
    "JobManager": "jobs",
    "run_tuning": "jobs",
    "check_bounds": "policies",
    "merge_tuned": "policies",
    "Recorder": "recorder",
    "ControlSettings": "settings",
    "JobStore": "store",
    "Store": "store",
    "StoredBatch": "store",
    "StoreUnavailable": "store",
}

__getattr__ = lazy_attributes(__name__, _WHERE)

__all__ = [
    "ControlSettings",
    "Controller",
    "Engine",
    "IngestResult",
    "JobManager",
    "JobStore",
    "Recorder",
    "Store",
    "StoredBatch",
    "StoreUnavailable",
    "check_bounds",
    "merge_tuned",
    "run_tuning",
]
