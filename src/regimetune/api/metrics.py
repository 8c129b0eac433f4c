"""Every metric of the service, on an injected registry (tests use a fresh one).

Names are ``regimetune_<name>_<unit>``, base units, ``_total`` on counters, and no label
with unbounded values (never a label per key or per regime id).
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


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
    pushes: Counter
    outbox_pending: Gauge
    tuning_jobs: Counter
    request_duration: Histogram

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
            pushes=Counter("regimetune_pushes_total", "Push attempts by outcome.", ["outcome"], registry=r),
            outbox_pending=Gauge(
                "regimetune_outbox_pending_versions", "Policy versions waiting in the outbox.", registry=r
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
        )


__all__ = ["Metrics"]
