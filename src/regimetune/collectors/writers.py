"""Write event batches as CSV (optionally ``.gz``/``.zst``), JSON lines, Parquet or oracleGeneral.

CSV/JSONL/Parquet stream batch by batch. oracleGeneral needs each request's next access time,
which looks into the future, so that writer holds the whole trace (about 30 bytes per event).

>>> import tempfile, pathlib
>>> from regimetune.collectors.readers import read_trace
>>> p = pathlib.Path(tempfile.mkdtemp()) / "t.parquet"
>>> b = EventBatch.from_columns(ts=[0.0, 1.0], key=[3, 3], op=[0, 1], label=[0, 0])
>>> write_events([b], p)
2
>>> [e.op.name for e in next(iter(read_trace(p))).events()]
['READ', 'WRITE']
"""

from __future__ import annotations

import gzip
import io
import os
from collections.abc import Iterable
from pathlib import Path
from typing import IO

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from regimetune.collectors.readers import ORACLE_DTYPE, detect_format
from regimetune.models.errors import ConfigError, InputError
from regimetune.models.events import EventBatch

_OPS = pa.array(["get", "put"])


def _table(b: EventBatch, *, op_text: bool) -> pa.Table:
    op = pa.array(b.op)
    return pa.table(
        {
            "ts": pa.array(b.ts),
            "key": pa.array(b.key),
            "op": _OPS.take(op) if op_text else op,
            "size": pa.array(b.size),
            "bucket": pa.array(b.bucket),
            "label": pa.array(b.label),
        }
    )


def _open_out(path: Path) -> IO[bytes]:
    name = path.name.lower()
    if name.endswith(".gz"):
        return gzip.open(path, "wb", compresslevel=5)  # type: ignore[return-value]
    if name.endswith((".zst", ".zstd")):
        import zstandard

        return zstandard.ZstdCompressor(level=3).stream_writer(path.open("wb"), closefd=True)
    return path.open("wb")


def next_access(keys: np.ndarray) -> np.ndarray:
    """For each request, the index of the next request to the same key (``-1`` if none).

    >>> next_access(np.array([5, 6, 5, 5], dtype=np.uint64)).tolist()
    [2, -1, 3, -1]
    """
    n = len(keys)
    order = np.argsort(keys, kind="stable")
    nxt = np.full(n, -1, dtype=np.int64)
    same = keys[order[1:]] == keys[order[:-1]]
    nxt[order[:-1][same]] = order[1:][same]
    return nxt


def write_events(batches: Iterable[EventBatch], path: str | os.PathLike[str], fmt: str | None = None) -> int:
    """Write every batch to ``path``; returns the number of events written."""
    p = Path(path)
    fmt = (fmt or detect_format(p)).lower()
    if not p.parent.is_dir():
        raise InputError(f"cannot write {p}: directory {p.parent} does not exist")
    if fmt in ("csv", "tsv"):
        return _write_csv(batches, p, "\t" if fmt == "tsv" else ",")
    if fmt == "jsonl":
        return _write_jsonl(batches, p)
    if fmt == "parquet":
        return _write_parquet(batches, p)
    if fmt == "oracle":
        return _write_oracle(batches, p)
    raise ConfigError(f"cannot write format {fmt!r}; use csv, tsv, jsonl, parquet or oracle")


def _write_csv(batches: Iterable[EventBatch], p: Path, delim: str) -> int:
    n = 0
    with _open_out(p) as f:
        writer: pacsv.CSVWriter | None = None
        for b in batches:
            t = _table(b, op_text=True)
            if writer is None:
                writer = pacsv.CSVWriter(
                    f, t.schema, write_options=pacsv.WriteOptions(delimiter=delim, quoting_style="none")
                )
            writer.write_table(t)
            n += len(b)
        if writer is None:
            f.write(delim.join(EventBatch.COLUMNS).encode() + b"\n")
        else:
            writer.close()
    return n


def _write_jsonl(batches: Iterable[EventBatch], p: Path) -> int:
    n = 0
    with _open_out(p) as f:
        for b in batches:
            if not len(b):
                continue
            ts = np.char.mod("%.17g", b.ts)
            ops = np.where(b.op == 0, '"get"', '"put"')
            rows = np.char.add(np.char.add('{"ts":', ts), ',"key":')
            rows = np.char.add(rows, b.key.astype(str))
            for name, col in (("op", ops), ("size", b.size.astype(str)), ("bucket", b.bucket.astype(str))):
                rows = np.char.add(np.char.add(rows, f',"{name}":'), col)
            rows = np.char.add(np.char.add(rows, ',"label":'), b.label.astype(str))
            buf = io.StringIO()
            buf.write("}\n".join(rows.tolist()))
            buf.write("}\n")
            f.write(buf.getvalue().encode())
            n += len(b)
    return n


_ROW_GROUP = 1 << 20


def _write_parquet(batches: Iterable[EventBatch], p: Path) -> int:
    """Row groups of about a million events (small groups read slowly); dictionary encoding
    only for the low-cardinality columns."""
    n = 0
    writer: pq.ParquetWriter | None = None
    pending: list[pa.Table] = []
    rows = 0

    def flush() -> None:
        nonlocal writer, pending, rows
        t = pa.concat_tables(pending)
        if writer is None:
            writer = pq.ParquetWriter(
                p, t.schema, compression="zstd", use_dictionary=["op", "size", "bucket", "label"]
            )
        writer.write_table(t, row_group_size=max(len(t), 1))
        pending, rows = [], 0

    try:
        for b in batches:
            pending.append(_table(b, op_text=False))
            rows += len(b)
            n += len(b)
            if rows >= _ROW_GROUP:
                flush()
        if pending:
            flush()
        if writer is None:
            pq.write_table(_table(EventBatch.empty(), op_text=False), p)
    finally:
        if writer is not None:
            writer.close()
    return n


def _write_oracle(batches: Iterable[EventBatch], p: Path) -> int:
    b = EventBatch.concat(list(batches))
    if len(b) and (b.ts.min() < 0 or b.ts.max() >= 2**32):
        raise InputError("oracleGeneral stores whole seconds in uint32: timestamps must be in [0, 2^32)")
    rec = np.empty(len(b), dtype=ORACLE_DTYPE)
    rec["time"] = np.floor(b.ts).astype(np.uint32)
    rec["obj_id"] = b.key
    rec["size"] = b.size
    rec["next_vtime"] = next_access(b.key)
    rec.tofile(p)
    return len(b)


__all__ = ["next_access", "write_events"]
