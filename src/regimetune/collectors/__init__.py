"""Telemetry in: trace readers, the workload generator, and the windowing aggregator.

The names below are imported on first use (PEP 562), so that a command which needs one reader
does not pay for pyarrow, numba and the generator at start-up.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from regimetune.collectors.frames import read_windows, write_windows
    from regimetune.collectors.generator import GeneratorConfig, bucket_view, generate, regime_of
    from regimetune.collectors.readers import ORACLE_DTYPE, TraceReader, detect_format, read_trace
    from regimetune.collectors.spec import TraceSpec
    from regimetune.collectors.windows import WindowAggregator, window_frame
    from regimetune.collectors.writers import write_events

_WHERE = {
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


def __getattr__(name: str) -> Any:
    try:
        module = _WHERE[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


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
