"""Telemetry in: collectors (trace readers, Prometheus, NATS JetStream; one protocol and
registry, see ``base``, ``registry`` and ``checks``), the workload generator, and the windowing
aggregator.

The names below are imported on first use (PEP 562), so that a command which needs one reader
does not pay for pyarrow, numba and the generator at start-up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from regimetune._lazy import lazy_attributes

if TYPE_CHECKING:
    from regimetune.collectors.base import BaseCollector, Collector, WindowBatch, window_from_ingest
    from regimetune.collectors.frames import read_windows, write_windows
    from regimetune.collectors.generator import GeneratorConfig, bucket_view, generate, regime_of
    from regimetune.collectors.jetstream import JetStreamCollector
    from regimetune.collectors.keys import hash_key
    from regimetune.collectors.prometheus import PrometheusRangeCollector, PrometheusScrapeCollector
    from regimetune.collectors.readers import ORACLE_DTYPE, TraceReader, detect_format, read_trace
    from regimetune.collectors.registry import build_collector, collector_class, register_collector
    from regimetune.collectors.spec import TraceSpec
    from regimetune.collectors.windows import WindowAggregator, window_frame
    from regimetune.collectors.writers import write_events

_WHERE = {
    "BaseCollector": "base",
    "Collector": "base",
    "WindowBatch": "base",
    "window_from_ingest": "base",
    "JetStreamCollector": "jetstream",
    "hash_key": "keys",
    "PrometheusRangeCollector": "prometheus",
    "PrometheusScrapeCollector": "prometheus",
    "build_collector": "registry",
    "collector_class": "registry",
    "register_collector": "registry",
    "read_windows": "frames",
    "write_windows": "frames",
    "GeneratorConfig": "generator",
    "bucket_view": "generator",
    "generate": "generator",
    "regime_of": "generator",
    "ORACLE_DTYPE": "readers",
    "TraceReader": "readers",
    "detect_format": "readers",
    "read_trace": "readers",
    "TraceSpec": "spec",
    "WindowAggregator": "windows",
    "window_frame": "windows",
    "write_events": "writers",
}


__getattr__ = lazy_attributes(__name__, _WHERE)


__all__ = [
    "ORACLE_DTYPE",
    "BaseCollector",
    "Collector",
    "GeneratorConfig",
    "JetStreamCollector",
    "PrometheusRangeCollector",
    "PrometheusScrapeCollector",
    "TraceReader",
    "TraceSpec",
    "WindowAggregator",
    "WindowBatch",
    "bucket_view",
    "build_collector",
    "collector_class",
    "detect_format",
    "generate",
    "hash_key",
    "read_trace",
    "read_windows",
    "regime_of",
    "register_collector",
    "window_frame",
    "window_from_ingest",
    "write_events",
    "write_windows",
]
