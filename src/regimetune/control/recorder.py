"""What the application layer reports as it works, as a protocol: the service records it as
Prometheus metrics (:class:`regimetune.api.metrics.Metrics`), a test with a fake.

Gauges that mirror the engine's state (its mode, the current regime) are read by the
metrics at scrape time instead, so they never lag behind it.
"""

from __future__ import annotations

from typing import Literal, Protocol

HoldReason = Literal["flap_budget", "stale_telemetry"]
"""Why the policy in force was held instead of changed: the flap budget was spent, or no
daemon reported for ``engine.stale_after_windows`` windows."""


class Recorder(Protocol):
    def batch_ingested(self, kind: str, rows: int) -> None:
        """A batch of ``rows`` per-key counts or events (``kind``) was made durable."""
        ...

    def batches_pruned(self, n: int) -> None:
        """``n`` stored batches went, covered by a snapshot of the windowing state."""
        ...

    def window_closed(self, *, changed: bool) -> None:
        """A window was closed and committed; ``changed``: the detector confirmed a change."""
        ...

    def decision_logged(self, mode: str) -> None:
        """A decision was logged in engine mode ``mode`` (``paused`` while paused)."""
        ...

    def newest_version(self, version: int) -> None:
        """The newest policy version stored (0 before the first)."""
        ...

    def change_held(self, reason: HoldReason) -> None:
        """The policy in force was held instead of changed, and why."""
        ...

    def telemetry_state(self, *, stale: bool) -> None:
        """Telemetry went stale, or resumed (``stale=False``)."""
        ...

    def push_event(self, kind: str) -> None:
        """The push worker reported a delivery event of ``kind`` (delivered, failed...)."""
        ...

    def job_ended(self, status: str) -> None:
        """A tuning job ended (or was found interrupted) with ``status``."""
        ...


__all__ = ["HoldReason", "Recorder"]
