"""The application layer: the service's two loops, between ``tuner`` and ``api``.

- the online loop (:mod:`~regimetune.control.engine`): ingest -> windows -> regimes ->
  decisions -> policy versions for the outbox, with event-time lateness
  (:mod:`~regimetune.control.lateness`) and stale-telemetry rules
  (:mod:`~regimetune.control.telemetry`);
- tuning jobs (:mod:`~regimetune.control.jobs`): tune on a recorded trace in a worker pool.

It speaks no HTTP and writes no SQL.
"""
