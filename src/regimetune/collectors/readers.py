"""Read a trace file as a stream of :class:`EventBatch` chunks, in bounded memory.

Each format is a collector registered in :mod:`regimetune.collectors.registry`: ``csv``/``tsv``
(plain, ``.gz`` or ``.zst``), ``jsonl``, ``parquet`` and ``oracle`` (libCacheSim's
oracleGeneral binary: 24-byte little-endian records
``<uint32 time, uint64 obj_id, uint32 size, int64 next_access_vtime>``), plus the presets of
:mod:`regimetune.collectors.formats`. The format comes from the extension unless named. A bad record stops the read with a :class:`TraceFormatError`
naming the file and line (or byte offset), unless ``skip_bad`` allows dropping it.

>>> import tempfile, pathlib
>>> p = pathlib.Path(tempfile.mkdtemp()) / "t.csv"
>>> _ = p.write_text("ts,key,op\\n0.5,7,get\\n1.5,8,put\\n")
>>> r = read_trace(p)
>>> [len(b) for b in r], r.bad_records
([2], 0)
"""

from __future__ import annotations

import dataclasses
import os
import queue
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from regimetune.collectors._check import Validator, op_codes, to_batch
from regimetune.collectors._text import iter_text
from regimetune.collectors.base import BaseCollector
from regimetune.collectors.keys import hash_keys
from regimetune.collectors.registry import TRACE_FORMATS, build_collector, collector_class
from regimetune.collectors.spec import TraceSpec
from regimetune.models.errors import ConfigError, InputError, TraceFormatError
from regimetune.models.events import EventBatch

ORACLE_DTYPE = np.dtype([("time", "<u4"), ("obj_id", "<u8"), ("size", "<u4"), ("next_vtime", "<i8")])
"""One record of libCacheSim's oracleGeneral format (24 bytes, little-endian, packed)."""

_EXTENSIONS: dict[str, str] = {
    ".csv": "csv",
    ".tsv": "tsv",
    ".txt": "csv",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".bin": "oracle",
    ".oracle": "oracle",
    ".oraclegeneral": "oracle",
}


def detect_format(path: str | os.PathLike[str]) -> str:
    """The format named by the file's extension (compression suffixes ignored).

    >>> detect_format("a/b.csv.zst"), detect_format("x.oracleGeneral.bin"), detect_format("y.parquet")
    ('csv', 'oracle', 'parquet')
    """
    name = Path(path).name.lower()
    for comp in (".gz", ".zst", ".zstd"):
        name = name.removesuffix(comp)
    suffix = Path(name).suffix
    if suffix in _EXTENSIONS:
        return _EXTENSIONS[suffix]
    raise ConfigError(f"cannot tell the format of {str(path)!r} from its extension; pass --format")


class TraceFileReader(BaseCollector):
    """Base of the collectors that read one trace file: checks the arguments, keeps the
    bad-record budget, reads ahead in a thread. A format implements ``_batches``.

    ``collect()`` (or iterating) reads the file from its start each time. After a full read
    ``bad_records`` holds how many records were skipped and ``records`` how many events were
    read. With ``prefetch > 0`` a background thread reads up to that many batches ahead
    (parsing and decompression release the GIL, so reading overlaps with the consumer's work);
    memory stays bounded by ``prefetch + 2`` batches. ``preset`` is the layout a format
    implies (a published trace's columns and ops); a ``spec`` given overrides its fields."""

    preset: TraceSpec | None = None

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        spec: TraceSpec | None = None,
        skip_bad: int = 0,
        chunk_rows: int = 1 << 20,
        prefetch: int = 2,
    ) -> None:
        self.path = Path(path)
        self.spec = spec
        self.skip_bad = skip_bad
        self.chunk_rows = chunk_rows
        self.prefetch = prefetch
        self.bad_records = 0
        self.records = 0

    def layout(self) -> TraceSpec:
        """The spec this read uses: the preset with the given spec's non-default fields."""
        if self.preset is None:
            return self.spec or TraceSpec()
        return self.preset if self.spec is None else overlay(self.preset, self.spec)

    def collect(self) -> Iterator[EventBatch]:
        if self.skip_bad < 0:
            raise ConfigError(f"skip_bad must be >= 0, got {self.skip_bad}")
        if self.chunk_rows < 1:
            raise ConfigError(f"chunk_rows must be >= 1, got {self.chunk_rows}")
        if not self.path.is_file():
            raise InputError(f"no such trace file: {self.path}")
        spec = self.layout()
        val = Validator(str(self.path), skip_bad=self.skip_bad, tolerance=spec.ts_tolerance)
        self.bad_records = 0
        self.records = 0
        it = self._batches(spec, val)
        try:
            for batch in _prefetch(it, self.prefetch) if self.prefetch else it:
                self.records += len(batch)
                self.bad_records = val.bad
                yield batch
        finally:
            self.bad_records = val.bad

    __iter__ = collect

    def _batches(self, spec: TraceSpec, val: Validator) -> Iterator[EventBatch]:  # pragma: no cover
        raise NotImplementedError


def overlay(base: TraceSpec, over: TraceSpec) -> TraceSpec:
    """``base`` with every field that ``over`` sets to other than its default.

    >>> overlay(TraceSpec(time_unit="ms", header="yes"), TraceSpec(header="no")).time_unit
    'ms'
    """
    default = TraceSpec()
    changed = {
        f.name: getattr(over, f.name)
        for f in dataclasses.fields(TraceSpec)
        if f.init and getattr(over, f.name) != getattr(default, f.name)
    }
    return dataclasses.replace(base, **changed)


class CsvReader(TraceFileReader):
    """Comma-separated text (or ``delimiter``), plain, ``.gz`` or ``.zst``; integer or string keys."""

    name = "csv"

    def _batches(self, spec: TraceSpec, val: Validator) -> Iterator[EventBatch]:
        return iter_text(self.path, spec, val, json_lines=False, chunk_rows=self.chunk_rows)


class TsvReader(CsvReader):
    """Tab-separated text (the delimiter comes from the ``.tsv`` extension or ``delimiter``)."""

    name = "tsv"

    def layout(self) -> TraceSpec:
        spec = super().layout()
        return spec if spec.delimiter is not None else dataclasses.replace(spec, delimiter="\t")


class JsonLinesReader(TraceFileReader):
    """One JSON object per line, fields named by ``columns`` or guessed from the first line."""

    name = "jsonl"

    def _batches(self, spec: TraceSpec, val: Validator) -> Iterator[EventBatch]:
        return iter_text(self.path, spec, val, json_lines=True, chunk_rows=self.chunk_rows)


class ParquetReader(TraceFileReader):
    """Apache Parquet, read one row group slice at a time; string key columns are hashed."""

    name = "parquet"

    def _batches(self, spec: TraceSpec, val: Validator) -> Iterator[EventBatch]:
        return _iter_parquet(self.path, spec, val, self.chunk_rows)


class OracleReader(TraceFileReader):
    """libCacheSim's oracleGeneral binary (``ORACLE_DTYPE`` records). The format has no op
    column, so every request counts as a read: a CSV of the same trace with its op column
    gives the same request counts and keys but splits them into reads and writes."""

    name = "oracle"
    notes = ("oracleGeneral has no op column: every request counts as a read",)

    def _batches(self, spec: TraceSpec, val: Validator) -> Iterator[EventBatch]:
        return _iter_oracle(self.path, spec, val, self.chunk_rows)


class TraceReader:
    """An iterable of event batches over one trace file, read by the collector registered for
    its format (from the extension unless ``fmt`` names one). Iterating again re-reads the
    file. After a full iteration ``bad_records`` holds how many records were skipped and
    ``records`` how many were read; ``notes`` says what the format cannot tell."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        fmt: str | None = None,
        spec: TraceSpec | None = None,
        skip_bad: int = 0,
        chunk_rows: int = 1 << 20,
        prefetch: int = 2,
    ) -> None:
        self.path = Path(path)
        self.prefetch = prefetch
        self.fmt = fmt
        self.spec = spec
        self.skip_bad = skip_bad
        self.chunk_rows = chunk_rows
        self.bad_records = 0
        self.records = 0

    @property
    def format(self) -> str:
        fmt = (self.fmt or detect_format(self.path)).lower()
        if fmt not in TRACE_FORMATS:
            raise ConfigError(f"unknown trace format {fmt!r}; use one of {', '.join(TRACE_FORMATS)}")
        return fmt

    @property
    def notes(self) -> tuple[str, ...]:
        notes: tuple[str, ...] = collector_class(self.format).notes
        return notes

    def reader(self) -> TraceFileReader:
        """The format's collector for this file."""
        reader: TraceFileReader = build_collector(
            self.format,
            self.path,
            spec=self.spec,
            skip_bad=self.skip_bad,
            chunk_rows=self.chunk_rows,
            prefetch=self.prefetch,
        )
        return reader

    def __iter__(self) -> Iterator[EventBatch]:
        reader = self.reader()
        self.bad_records = 0
        self.records = 0
        try:
            for batch in reader.collect():
                self.records, self.bad_records = reader.records, reader.bad_records
                yield batch
        finally:
            self.records, self.bad_records = reader.records, reader.bad_records


def read_trace(
    path: str | os.PathLike[str],
    *,
    fmt: str | None = None,
    spec: TraceSpec | None = None,
    skip_bad: int = 0,
    chunk_rows: int = 1 << 20,
) -> TraceReader:
    """Open a trace for chunked reading; nothing is read until it is iterated."""
    return TraceReader(path, fmt=fmt, spec=spec, skip_bad=skip_bad, chunk_rows=chunk_rows)


def _prefetch(it: Iterator[EventBatch], depth: int) -> Iterator[EventBatch]:
    """Run ``it`` in a thread, ``depth`` items ahead; its exceptions re-raise here."""
    q: queue.Queue[tuple[str, object]] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def work() -> None:
        try:
            for item in it:
                while not stop.is_set():
                    try:
                        q.put(("item", item), timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            q.put(("end", None))
        except BaseException as exc:  # handed to the consumer
            q.put(("error", exc))

    t = threading.Thread(target=work, name="regimetune-reader", daemon=True)
    t.start()
    try:
        while True:
            kind, val = q.get()
            if kind == "end":
                return
            if kind == "error":
                assert isinstance(val, BaseException)
                raise val
            yield val  # type: ignore[misc]
    finally:
        stop.set()
        while t.is_alive():
            try:
                q.get_nowait()
            except queue.Empty:
                t.join(timeout=0.05)


# -- parquet -----------------------------------------------------------------------------------

Reason = str | Callable[[int], str]
"""Why a flagged Parquet row is bad: one text for every row, or the text of row ``j``."""


def _iter_parquet(path: Path, spec: TraceSpec, val: Validator, chunk_rows: int) -> Iterator[EventBatch]:
    source = str(path)
    try:
        pf = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        raise TraceFormatError(f"not a readable Parquet file: {exc}", source=source) from exc
    names = pf.schema_arrow.names
    roles = spec.resolve(names, len(names), source=source)
    cols_needed = [names[i] for i in roles.values()]
    row0 = 0
    try:
        batches = pf.iter_batches(batch_size=chunk_rows, columns=cols_needed, use_threads=False)
        for rb in batches:
            cols: dict[str, np.ndarray] = {}
            flags: list[tuple[np.ndarray, Reason]] = []
            drop = np.zeros(rb.num_rows, dtype=bool)  # skipped ops: dropped, not bad
            for role, i in roles.items():
                col = rb.column(names[i])
                if role == "op":
                    codes, unknown, skipped = op_codes(col, spec.read_ops, spec.write_ops, spec.skip_ops)
                    if unknown.any():
                        flags.append((unknown, _op_reason(spec, col)))
                    drop |= skipped
                    cols["op"] = codes
                    continue
                if role == "key" and _is_text(col.type) and spec.key_type != "int":
                    if col.null_count:
                        flags.append(
                            (np.asarray(col.is_null().to_numpy(zero_copy_only=False), bool), "missing key")
                        )
                    cols["key"] = hash_keys(col)
                    continue
                if col.null_count:
                    isnull = np.asarray(col.is_null().to_numpy(zero_copy_only=False), dtype=bool)
                    flags.append((isnull, f"missing {role}"))
                    col = col.fill_null(0)
                cols[role] = _cast(role, np.asarray(col.to_numpy(zero_copy_only=False)), flags)
            raw_ts, cols["ts"] = cols["ts"], spec.to_seconds(cols["ts"])
            flags.append((spec.bad_times(cols["ts"]), _time_reason(spec, raw_ts, cols["ts"])))
            bad = np.zeros(rb.num_rows, dtype=bool)
            for m, _ in flags:
                bad |= m
            reasons = []
            for j in np.flatnonzero(bad).tolist():
                why = next(r for m, r in flags if m[j])
                reasons.append(f"record {row0 + j + 1}: {why if isinstance(why, str) else why(j)}")
            where = np.arange(row0 + 1, row0 + rb.num_rows + 1)
            if drop.any():
                keep = ~drop
                reasons = [r for j, r in zip(np.flatnonzero(bad).tolist(), reasons, strict=True) if keep[j]]
                cols, bad, where = {k: v[keep] for k, v in cols.items()}, bad[keep], where[keep]
            out = val.screen(cols, bad, reasons, where, kind="line")
            row0 += rb.num_rows
            if len(out["ts"]):
                yield to_batch(out)
    except (pa.ArrowException, OSError) as exc:
        raise TraceFormatError(
            f"cannot read Parquet data near record {row0 + 1}: {exc}", source=source
        ) from exc


def _op_reason(spec: TraceSpec, col: pa.Array) -> Callable[[int], str]:
    return lambda j: spec.unknown_op(col[j].as_py())


def _time_reason(spec: TraceSpec, raw: np.ndarray, seconds: np.ndarray) -> Callable[[int], str]:
    return lambda j: str(spec.time_problem(float(seconds[j]), raw[j].item()))


def _is_text(t: pa.DataType) -> bool:
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t))


_RANGES = {
    "key": (0, 2**64 - 1),
    "size": (0, 2**32 - 1),
    "bucket": (-(2**31), 2**31 - 1),
    "label": (-(2**15), 2**15 - 1),
    "count": (1, 2**32 - 1),
}
_DT = {"key": np.uint64, "size": np.uint32, "bucket": np.int32, "label": np.int16, "count": np.uint32}


def _cast(role: str, arr: np.ndarray, flags: list[tuple[np.ndarray, Reason]]) -> np.ndarray:
    """Cast a Parquet column to the event dtype, flagging values that do not fit."""
    if role == "ts":
        if not np.issubdtype(arr.dtype, np.number):
            raise InputError(f"ts column has type {arr.dtype}, expected numbers")
        ts = arr.astype(np.float64, copy=False)
        fin = np.isfinite(ts)
        if not fin.all():
            flags.append((~fin, "timestamp is not finite"))
            ts = np.where(fin, ts, 0.0)
        return ts
    if np.issubdtype(arr.dtype, np.floating):
        bad = ~np.isfinite(arr) | (arr != np.round(arr))
        if bad.any():
            flags.append((bad, f"{role} is not an integer"))
            arr = np.where(bad, 0, arr)
    elif not np.issubdtype(arr.dtype, np.integer):
        raise InputError(f"{role} column has type {arr.dtype}, expected integers")
    lo, hi = _RANGES[role]
    if len(arr) and (arr.min() < lo or arr.max() > hi):
        out_of = (arr < lo) | (arr > hi)
        flags.append((out_of, f"{role} out of range"))
        arr = np.where(out_of, 0, arr)
    return arr.astype(_DT[role], copy=False)


# -- oracleGeneral -------------------------------------------------------------------------------


def _iter_oracle(path: Path, spec: TraceSpec, val: Validator, chunk_rows: int) -> Iterator[EventBatch]:
    source = str(path)
    size = path.stat().st_size
    rec = ORACLE_DTYPE.itemsize
    if size % rec:
        raise TraceFormatError(
            f"file size {size} is not a multiple of {rec} bytes: truncated oracleGeneral trace?",
            source=source,
            offset=size - size % rec,
        )
    done = 0
    with path.open("rb") as f:
        while True:
            buf = f.read(rec * chunk_rows)
            if not buf:
                return
            if len(buf) % rec:
                raise TraceFormatError("file ended inside a record", source=source, offset=done * rec)
            a = np.frombuffer(buf, dtype=ORACLE_DTYPE)
            n = len(a)
            cols = {
                "ts": spec.to_seconds(a["time"].astype(np.float64)),
                "key": a["obj_id"].copy(),
                "op": np.zeros(n, dtype=np.uint8),
                "size": a["size"].copy(),
            }
            where = (np.arange(done, done + n, dtype=np.int64)) * rec
            out = val.screen(cols, np.zeros(n, dtype=bool), [], where, kind="offset")
            done += n
            if len(out["ts"]):
                yield to_batch(out)


__all__ = [
    "ORACLE_DTYPE",
    "CsvReader",
    "JsonLinesReader",
    "OracleReader",
    "ParquetReader",
    "TraceFileReader",
    "TraceReader",
    "TsvReader",
    "detect_format",
    "overlay",
    "read_trace",
]
