"""Every metric of the service, on an injected registry (tests use a fresh one).

Names are ``regimetune_<name>_<unit>``, base units, ``_total`` on counters, and no label
with unbounded values (never a label per key or per regime id). :class:`Metrics` is the
application layer's :class:`~regimetune.control.Recorder`: what the engine, the tuning jobs
and the push worker report becomes these metrics; the gauges that mirror the engine's state
and the delivered version are read at scrape time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from regimetune.control.recorder import HoldReason

ENGINE_MODES = ("off", "recommend", "auto")


class EngineView(Protocol):
    """What the engine gauges read at scrape time."""

    @property
    def paused(self) -> bool: ...

    @property
    def mode(self) -> str: ...

    @property
    def current_regime(self) -> int | None: ...

    @property
    def owed_windows(self) -> int: ...


@dataclass(frozen=True)
class Metrics:
    registry: CollectorRegistry
    ingest_batches: Counter
    ingest_keys: Counter
    ingest_events: Counter
    ingest_bytes: Counter
    ingest_rejected: Counter
    pruned_batches: Counter
    windows: Counter
    regime_changes: Counter
    current_regime: Gauge
    decisions: Counter
    policy_version: Gauge
    delivered_version: Gauge
    changes_held: Counter
    pushes: Counter
    outbox_pending: Gauge
    push_refused: Gauge
    windows_owed: Gauge
    store_writable: Gauge
    telemetry_stale: Gauge
    tuning_jobs: Counter
    request_duration: Histogram
    engine_paused: Gauge
    engine_mode: Gauge

    @classmethod
    def create(cls, registry: CollectorRegistry | None = None) -> Metrics:
        r = registry if registry is not None else CollectorRegistry()
        return cls(
            registry=r,
            ingest_batches=Counter(
                "regimetune_ingest_batches_total", "Ingest batches made durable.", registry=r
            ),
            ingest_keys=Counter("regimetune_ingest_keys_total", "Per-key count rows ingested.", registry=r),
            ingest_events=Counter("regimetune_ingest_events_total", "Raw events ingested.", registry=r),
            ingest_bytes=Counter("regimetune_ingest_bytes_total", "Request body bytes ingested.", registry=r),
            ingest_rejected=Counter(
                "regimetune_ingest_rejected_total",
                "Ingest requests refused, by reason.",
                ["reason"],
                registry=r,
            ),
            pruned_batches=Counter(
                "regimetune_pruned_batches_total",
                "Ingest batches deleted once a snapshot of the windowing state covered them.",
                registry=r,
            ),
            windows=Counter("regimetune_windows_total", "Windows closed by the aggregator.", registry=r),
            regime_changes=Counter(
                "regimetune_regime_changes_total", "Regime changes confirmed by the detector.", registry=r
            ),
            current_regime=Gauge(
                "regimetune_current_regime_id", "Id of the current regime (-1 before the first).", registry=r
            ),
            decisions=Counter(
                "regimetune_decisions_total", "Decisions logged, by engine mode.", ["mode"], registry=r
            ),
            policy_version=Gauge("regimetune_policy_version", "Newest policy version stored.", registry=r),
            delivered_version=Gauge(
                "regimetune_policy_delivered_version",
                "Newest policy version the backend acknowledged (0 before the first, or when pulled).",
                registry=r,
            ),
            changes_held=Counter(
                "regimetune_policy_changes_held_total",
                "Policy changes held back instead of applied, by reason (flap_budget: push.max_per_hour "
                "spent; stale_telemetry: no daemon reported, the policy in force is held).",
                ["reason"],
                registry=r,
            ),
            pushes=Counter("regimetune_pushes_total", "Push attempts by outcome.", ["outcome"], registry=r),
            outbox_pending=Gauge(
                "regimetune_outbox_pending_versions", "Policy versions waiting in the outbox.", registry=r
            ),
            push_refused=Gauge(
                "regimetune_push_refused_versions",
                "Policy versions the backend refused or the push worker gave up on.",
                registry=r,
            ),
            windows_owed=Gauge(
                "regimetune_windows_owed",
                "Closed windows waiting for a store that failed to take them (committed in order).",
                registry=r,
            ),
            store_writable=Gauge(
                "regimetune_store_writable", "0 while the store's last write failed, else 1.", registry=r
            ),
            telemetry_stale=Gauge(
                "regimetune_telemetry_stale",
                "1 while no ingest batch arrived for engine.stale_after_windows windows (policy held).",
                registry=r,
            ),
            tuning_jobs=Counter(
                "regimetune_tuning_jobs_total", "Tuning jobs finished, by status.", ["status"], registry=r
            ),
            request_duration=Histogram(
                "regimetune_http_request_duration_seconds",
                "HTTP request latency by route template and method.",
                ["route", "method"],
                buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10),
                registry=r,
            ),
            engine_paused=Gauge(
                "regimetune_engine_paused",
                "1 while the engine is paused (decisions are logged, nothing is pushed).",
                registry=r,
            ),
            engine_mode=Gauge(
                "regimetune_engine_mode",
                "1 for the engine's current mode (off, recommend or auto), 0 for the others.",
                ["mode"],
                registry=r,
            ),
        )

    def watch_engine(self, engine: EngineView) -> None:
        """Read the engine's pause switch, mode and current regime at every scrape, so the
        gauges can never lag behind a ``POST /v1/engine/pause`` or a restart that restored
        the switch."""
        self.engine_paused.set_function(lambda: float(engine.paused))
        for mode in ENGINE_MODES:
            self.engine_mode.labels(mode=mode).set_function(_is_mode(engine, mode))
        self.current_regime.set_function(lambda: _regime(engine.current_regime))
        self.windows_owed.set_function(lambda: float(engine.owed_windows))

    def watch_store(self, write_error: Callable[[], str | None]) -> None:
        """Read whether the store's last write succeeded at every scrape."""
        self.store_writable.set_function(lambda: float(write_error() is None))

    def watch_delivery(self, delivered: Callable[[], int | None]) -> None:
        """Read the newest version the backend acknowledged at every scrape (``delivered``
        answers from the store's cache)."""
        self.delivered_version.set_function(lambda: float(delivered() or 0))

    # -- the application layer's Recorder ------------------------------------------------------
    def batch_ingested(self, kind: str, rows: int) -> None:
        self.ingest_batches.inc()
        (self.ingest_keys if kind == "counts" else self.ingest_events).inc(rows)

    def batches_pruned(self, n: int) -> None:
        self.pruned_batches.inc(n)

    def window_closed(self, *, changed: bool) -> None:
        self.windows.inc()
        if changed:
            self.regime_changes.inc()

    def decision_logged(self, mode: str) -> None:
        self.decisions.labels(mode=mode).inc()

    def newest_version(self, version: int) -> None:
        self.policy_version.set(version)

    def change_held(self, reason: HoldReason) -> None:
        self.changes_held.labels(reason=reason).inc()

    def telemetry_state(self, *, stale: bool) -> None:
        self.telemetry_stale.set(1 if stale else 0)

    def ingest_answered(self, status: int, body_bytes: int) -> None:
        """An ingest request was answered ``status``: an accepted batch's body bytes are
        counted, a refusal by its reason."""
        if 200 <= status < 300:
            self.ingest_bytes.inc(body_bytes)
        else:
            reason = _REJECTED.get(status, "other" if 400 <= status < 500 else "server_error")
            self.ingest_rejected.labels(reason=reason).inc()

    def push_event(self, kind: str) -> None:
        self.pushes.labels(outcome=kind).inc()

    def job_ended(self, status: str) -> None:
        self.tuning_jobs.labels(status=status).inc()


def _regime(regime: int | None) -> float:
    return -1.0 if regime is None else float(regime)


def _is_mode(engine: EngineView, mode: str) -> Callable[[], float]:
    return lambda: float(engine.mode == mode)


_REJECTED = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    409: "conflict",
    413: "too_large",
    415: "unsupported_media_type",
    422: "invalid",
    503: "store_unavailable",
}
"""The ``reason`` label of ``regimetune_ingest_rejected_total``, by status (bounded)."""


class IngestAccounting:
    """ASGI middleware on the ingest routes: the body bytes of every accepted batch go to
    ``regimetune_ingest_bytes_total``, every refusal (auth, size, type, validation, lateness,
    a reused Idempotency-Key, a server error) to ``regimetune_ingest_rejected_total``."""

    def __init__(self, app: Any, *, metrics: Metrics, prefix: str = "/v1/ingest") -> None:
        self.app = app
        self.metrics = metrics
        self.prefix = prefix

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(self.prefix):
            await self.app(scope, receive, send)
            return
        seen = 0
        status = 0

        async def counted() -> Any:
            nonlocal seen
            msg = await receive()
            if msg["type"] == "http.request":
                seen += len(msg.get("body", b""))
            return msg

        async def sent(msg: Any) -> None:
            nonlocal status
            if msg["type"] == "http.response.start":
                status = int(msg["status"])
            await send(msg)

        try:
            await self.app(scope, counted, sent)
        finally:
            self.metrics.ingest_answered(status, seen)


__all__ = ["ENGINE_MODES", "EngineView", "IngestAccounting", "Metrics"]
