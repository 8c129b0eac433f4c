"""The collector protocol: every telemetry source is one object with one method, ``collect()``.

Like Prometheus's ``Collector`` (``prometheus_client/registry.py``), a collector yields what it
has and knows nothing of what happens next. There are two kinds of telemetry:

- :class:`~regimetune.models.events.EventBatch`: raw requests in time order (trace files);
- :class:`WindowBatch`: one window's counts, already aggregated by the daemon (a Prometheus
  scrape, a range query, a batch from NATS; the same content as ``POST /v1/ingest``).

A collector that reads the network takes its client (or URL) as an argument, so tests can point
it at a local server; ``close()`` releases it and a second ``close()`` is harmless.
:mod:`regimetune.collectors.checks` holds the conformance suite every collector passes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, TypeVar, runtime_checkable

import numpy as np

from regimetune.models.errors import ConfigError, InputError, SourceError
from regimetune.models.events import EventBatch


def _frozen(values: Any, dtype: type[np.generic]) -> np.ndarray:
    arr = np.array(values, dtype=dtype)
    arr.setflags(write=False)
    return arr


_EMPTY_U64 = _frozen([], np.uint64)
_EMPTY_U32 = _frozen([], np.uint32)
_EMPTY_I32 = _frozen([], np.int32)
_EMPTY_F64 = _frozen([], np.float64)


@dataclass(frozen=True, slots=True)
class WindowBatch:
    """One window of telemetry aggregated by its source.

    ``keys``/``reads``/``writes`` are per-key counts (all keys, or a bounded top-k of hot keys
    when ``reads_total``/``writes_total`` count more); ``events`` holds raw events instead,
    when the source sent them; ``bucket_ids``/``bucket_load``/``bucket_bytes`` are per-bucket
    requests and bytes. ``length`` is the seconds the window covers (0 when the source did not
    say). ``source_id`` is the source's idempotency key (a NATS message id), if any.
    """

    window_start: float
    length: float = 0.0
    keys: np.ndarray = field(default_factory=lambda: _EMPTY_U64)
    reads: np.ndarray = field(default_factory=lambda: _EMPTY_U32)
    writes: np.ndarray = field(default_factory=lambda: _EMPTY_U32)
    reads_total: int = 0
    writes_total: int = 0
    events: EventBatch | None = None
    bucket_ids: np.ndarray = field(default_factory=lambda: _EMPTY_I32)
    bucket_load: np.ndarray = field(default_factory=lambda: _EMPTY_F64)
    bucket_bytes: np.ndarray = field(default_factory=lambda: _EMPTY_F64)
    source_id: str | None = None

    @property
    def requests(self) -> int:
        """Every request of the window (not only the listed keys')."""
        return self.reads_total + self.writes_total

    @property
    def rates(self) -> tuple[float, float]:
        """Reads/s and writes/s over ``length`` (``nan`` when the length is unknown)."""
        if not self.length > 0:
            return math.nan, math.nan
        return self.reads_total / self.length, self.writes_total / self.length

    def ingest_columns(self) -> tuple[str, dict[str, np.ndarray]]:
        """``(kind, columns)`` as the service's engine ingests them (``"counts"`` or
        ``"events"``; per-bucket figures by bucket id, dense up to the highest id)."""
        if self.events is not None:
            e = self.events
            kind, cols = "events", {"ts": e.ts, "key": e.key, "op": e.op, "size": e.size}
        else:
            kind, cols = "counts", {"keys": self.keys, "reads": self.reads, "writes": self.writes}
        if len(self.bucket_ids):
            n = int(self.bucket_ids.max()) + 1
            load, size = np.zeros(n), np.zeros(n)
            load[self.bucket_ids] = self.bucket_load
            size[self.bucket_ids] = self.bucket_bytes
            cols |= {"bucket_load": load, "bucket_bytes": size}
        return kind, cols

    def to_ingest(self) -> dict[str, Any]:
        """The JSON body of ``POST /v1/ingest`` for this window."""
        body: dict[str, Any] = {"window_start": self.window_start}
        if self.events is not None:
            e = self.events
            body["events"] = {
                "ts": e.ts.tolist(),
                "key": e.key.tolist(),
                "op": e.op.tolist(),
                "size": e.size.tolist(),
            }
        else:
            body["counts"] = {
                "keys": self.keys.tolist(),
                "reads": self.reads.tolist(),
                "writes": self.writes.tolist(),
            }
        if len(self.bucket_ids):
            body["buckets"] = {
                "ids": self.bucket_ids.tolist(),
                "load": self.bucket_load.tolist(),
                "bytes": self.bucket_bytes.tolist(),
            }
        return body


def _array(obj: Mapping[str, Any], name: str, dtype: type[np.generic], where: str) -> np.ndarray | None:
    """A list field as a numpy array, refusing what does not fit ``dtype``."""
    values = obj.get(name)
    if values is None:
        return None
    if not isinstance(values, list):
        raise InputError(f"{where}.{name} must be a list")
    kind = np.dtype(dtype).kind
    ok = (
        (lambda v: isinstance(v, int) and not isinstance(v, bool))
        if kind in "ui"
        else (lambda v: isinstance(v, int | float) and not isinstance(v, bool))
    )
    if not all(ok(v) for v in values):
        raise InputError(
            f"{where}.{name} holds a value that is not {'an integer' if kind in 'ui' else 'a number'}"
        )
    try:
        arr = np.array(values, dtype=dtype)
    except OverflowError:
        raise InputError(f"{where}.{name} holds a value out of range for {np.dtype(dtype).name}") from None
    if kind == "f" and not np.isfinite(arr).all():
        raise InputError(f"{where}.{name} holds a value that is not finite")
    if kind in "fi" and len(arr) and arr.min() < 0:
        raise InputError(f"{where}.{name} holds a negative value")
    arr.setflags(write=False)
    return arr


def _same_length(where: str, **cols: np.ndarray | None) -> int:
    lengths = {n: len(c) for n, c in cols.items() if c is not None}
    if len(set(lengths.values())) > 1:
        raise InputError(f"{where}: {', '.join(lengths)} must have equal lengths, got {lengths}")
    return next(iter(lengths.values()), 0)


def window_from_ingest(body: Any, *, source_id: str | None = None, length: float = 0.0) -> WindowBatch:
    """Parse the JSON of ``POST /v1/ingest`` (already decoded) into a :class:`WindowBatch`;
    anything malformed raises :class:`InputError` with the reason.

    >>> w = window_from_ingest({"window_start": 10, "counts": {"keys": [1, 2], "reads": [3, 4]}})
    >>> w.window_start, w.reads_total, w.writes.tolist()
    (10.0, 7, [0, 0])
    """
    if not isinstance(body, Mapping):
        raise InputError("a telemetry batch must be a JSON object")
    unknown = set(body) - {"window_start", "counts", "events", "buckets"}
    if unknown:
        raise InputError(f"unknown field(s) {sorted(unknown)} in a telemetry batch")
    start = body.get("window_start")
    if isinstance(start, bool) or not isinstance(start, int | float) or not math.isfinite(start) or start < 0:
        raise InputError(f"window_start must be a finite number >= 0, got {start!r}")
    counts, events = body.get("counts"), body.get("events")
    if (counts is None) == (events is None):
        raise InputError("a batch holds exactly one of 'counts' and 'events'")
    fields: dict[str, Any] = {}
    if counts is not None:
        if not isinstance(counts, Mapping):
            raise InputError("counts must be an object")
        keys = _array(counts, "keys", np.uint64, "counts")
        reads = _array(counts, "reads", np.uint32, "counts")
        writes = _array(counts, "writes", np.uint32, "counts")
        if keys is None or reads is None:
            raise InputError("counts needs keys and reads")
        n = _same_length("counts", keys=keys, reads=reads, writes=writes)
        writes = writes if writes is not None else _frozen(np.zeros(n), np.uint32)
        fields |= {"keys": keys, "reads": reads, "writes": writes}
        fields |= {"reads_total": int(reads.sum()), "writes_total": int(writes.sum())}
    else:
        if not isinstance(events, Mapping):
            raise InputError("events must be an object")
        ts = _array(events, "ts", np.float64, "events")
        key = _array(events, "key", np.uint64, "events")
        op = _array(events, "op", np.uint8, "events")
        size = _array(events, "size", np.uint32, "events")
        if ts is None or key is None:
            raise InputError("events needs ts and key")
        _same_length("events", ts=ts, key=key, op=op, size=size)
        if op is not None and len(op) and op.max() > 1:
            raise InputError("events.op holds a value other than 0 (read) and 1 (write)")
        if len(ts) and ((np.diff(ts) < 0).any() or ts[0] < start):
            raise InputError("events must be in time order and not older than window_start")
        batch = EventBatch.from_columns(ts=ts, key=key, op=op, size=size)
        n_writes = int(batch.op.sum())
        fields |= {"events": batch, "reads_total": len(batch) - n_writes, "writes_total": n_writes}
    buckets = body.get("buckets")
    if buckets is not None:
        if not isinstance(buckets, Mapping):
            raise InputError("buckets must be an object")
        ids = _array(buckets, "ids", np.int32, "buckets")
        load = _array(buckets, "load", np.float64, "buckets")
        size_b = _array(buckets, "bytes", np.float64, "buckets")
        if ids is None or load is None or size_b is None:
            raise InputError("buckets needs ids, load and bytes")
        _same_length("buckets", ids=ids, load=load, bytes=size_b)
        if len(np.unique(ids)) != len(ids):
            raise InputError("buckets.ids must not repeat")
        fields |= {"bucket_ids": ids, "bucket_load": load, "bucket_bytes": size_b}
    return WindowBatch(window_start=float(start), length=length, source_id=source_id, **fields)


Telemetry = EventBatch | WindowBatch
"""What a collector yields."""


@runtime_checkable
class Collector(Protocol):
    """A source of telemetry. ``name`` is the name it is registered under."""

    name: str

    def collect(self) -> Iterator[Telemetry]:
        """Yield the source's telemetry in time order."""
        ...

    def close(self) -> None:
        """Release connections or files; harmless when repeated."""
        ...

    def __enter__(self) -> Any: ...

    def __exit__(self, *exc: object) -> None: ...


class BaseCollector:
    """Context-manager support and a no-op ``close`` for collectors to build on."""

    name: ClassVar[str] = ""
    notes: ClassVar[tuple[str, ...]] = ()
    """What a user should know about the telemetry this source can give (shown by the CLI)."""
    live: ClassVar[bool] = False
    """It yields on its own clock (a scraper): a consumer that falls behind must buffer its
    windows, not stall it (``regimetune collect`` reads such a collector in a thread)."""
    window_option: ClassVar[str | None] = None
    """The constructor option that sets the window length, if the source has one."""

    def collect(self) -> Iterator[Telemetry]:  # pragma: no cover - abstract
        raise NotImplementedError

    def close(self) -> None:
        return None

    def __enter__(self) -> BaseCollector:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Polling(Protocol):
    """What :func:`poll` needs of a live scraper: its settings, its clock and its error count."""

    interval_s: float
    max_errors: int | None
    windows: int | None
    align: bool
    clock: Callable[[], float]
    sleep: Callable[[float], None]
    errors: int
    last_error: str | None


R = TypeVar("R")


def poll(
    c: Polling, read: Callable[[], R], window: Callable[[R], WindowBatch | None]
) -> Iterator[WindowBatch]:
    """The loop of a live scraper: every ``interval_s`` (on the clock's multiples with
    ``align``) ``read()``, turn the reading into a window (``None``: not yet one), until
    ``windows`` windows. A read that raises :class:`SourceError` is counted (``errors``,
    ``last_error``) and skipped; more than ``max_errors`` in a row raise it."""
    if not c.interval_s > 0:
        raise ConfigError(f"interval_s must be > 0, got {c.interval_s}")
    if c.max_errors is not None and c.max_errors < 0:
        raise ConfigError(f"max_errors must be >= 0 or None, got {c.max_errors}")
    done = failed = 0
    if c.align:
        c.sleep(c.interval_s - c.clock() % c.interval_s)
    while c.windows is None or done < c.windows:
        began = c.clock()
        try:
            reading: R | None = read()
        except SourceError as exc:
            failed += 1
            c.errors += 1
            c.last_error = str(exc)
            if c.max_errors is not None and failed > c.max_errors:
                raise
            reading = None
        if reading is not None:
            failed = 0
            w = window(reading)
            if w is not None:
                done += 1
                yield w
                if c.windows is not None and done >= c.windows:
                    return
        now = c.clock()
        # to the next multiple of interval_s (never 0: a read that ended on a tick waits for the next)
        c.sleep(c.interval_s - now % c.interval_s if c.align else max(0.0, c.interval_s - (now - began)))


__all__ = ["BaseCollector", "Collector", "Polling", "Telemetry", "WindowBatch", "poll", "window_from_ingest"]
