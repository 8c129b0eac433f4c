"""Telemetry in: trace readers, the workload generator, and the windowing aggregator."""

from regimetune.collectors.frames import read_windows, write_windows
from regimetune.collectors.generator import GeneratorConfig, bucket_view, generate, regime_of
from regimetune.collectors.readers import ORACLE_DTYPE, TraceReader, detect_format, read_trace
from regimetune.collectors.spec import TraceSpec
from regimetune.collectors.windows import WindowAggregator, window_frame
from regimetune.collectors.writers import write_events

__all__ = [
    "ORACLE_DTYPE",
    "GeneratorConfig",
    "TraceReader",
    "TraceSpec",
    "WindowAggregator",
    "bucket_view",
    "detect_format",
    "generate",
    "read_trace",
    "read_windows",
    "regime_of",
    "window_frame",
    "write_events",
    "write_windows",
]
