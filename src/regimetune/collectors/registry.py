"""Collectors chosen by name: one registry for every telemetry source.

Entries are ``"module:Class"`` strings, imported only when a collector is built, so naming the
formats (the CLI's help) costs nothing and the NATS client is imported only by whoever uses it.

>>> TRACE_FORMATS
('csv', 'tsv', 'jsonl', 'parquet', 'oracle', 'twitter', 'cachelib')
>>> collector_class("twitter").name
'twitter'
>>> build_collector("carrier-pigeon")
Traceback (most recent call last):
...
regimetune.models.errors.ConfigError: unknown collector 'carrier-pigeon'; choose from cachelib, csv, jsonl, nats, oracle, parquet, prometheus-range, prometheus-scrape, redis, tsv, twitter
"""

from __future__ import annotations

import importlib
from typing import Any

from regimetune.models.errors import ConfigError

_READERS = "regimetune.collectors.readers"
_PRESETS = "regimetune.collectors.formats"

TRACE_FORMATS: tuple[str, ...] = ("csv", "tsv", "jsonl", "parquet", "oracle", "twitter", "cachelib")
"""Collectors that read one trace file (``read_trace(path, fmt=...)``, ``--format``)."""

COLLECTORS: dict[str, str] = {
    "csv": f"{_READERS}:CsvReader",
    "tsv": f"{_READERS}:TsvReader",
    "jsonl": f"{_READERS}:JsonLinesReader",
    "parquet": f"{_READERS}:ParquetReader",
    "oracle": f"{_READERS}:OracleReader",
    "twitter": f"{_PRESETS}:TwitterReader",
    "cachelib": f"{_PRESETS}:CacheLibReader",
    "prometheus-scrape": "regimetune.collectors.prometheus:PrometheusScrapeCollector",
    "prometheus-range": "regimetune.collectors.prometheus:PrometheusRangeCollector",
    "nats": "regimetune.collectors.jetstream:JetStreamCollector",
    "redis": "regimetune.collectors.redis:RedisCollector",
}


def register_collector(name: str, target: str | type[Any]) -> None:
    """Add a collector (a class or a ``"module:Class"`` path); a name is registered once."""
    if name in COLLECTORS:
        raise ConfigError(f"collector {name!r} is already registered")
    if isinstance(target, type):
        target = f"{target.__module__}:{target.__qualname__}"
    COLLECTORS[name] = target


def collector_class(name: str) -> type[Any]:
    """The class registered as ``name`` (imported now)."""
    try:
        target = COLLECTORS[name]
    except KeyError:
        raise ConfigError(
            f"unknown collector {name!r}; choose from {', '.join(sorted(COLLECTORS))}"
        ) from None
    module, _, attr = target.partition(":")
    cls: type[Any] = getattr(importlib.import_module(module), attr)
    return cls


def build_collector(name: str, *args: Any, **options: Any) -> Any:
    """``build_collector("csv", "trace.csv", skip_bad=3)``: the arguments are those of the
    collector's constructor; unknown names and options raise ``ConfigError``."""
    cls = collector_class(name)
    try:
        return cls(*args, **options)
    except TypeError as exc:
        raise ConfigError(f"collector {name!r}: {exc}") from exc


__all__ = ["COLLECTORS", "TRACE_FORMATS", "build_collector", "collector_class", "register_collector"]
