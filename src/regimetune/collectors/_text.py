"""Text traces (CSV/TSV, JSON lines), plain or compressed, read in byte blocks cut at line ends.

Each block is parsed vectorised (pyarrow); only when a block holds a bad record is it parsed
again line by line in Python, to name the line and, within the ``skip_bad`` budget, drop it.
Line numbers stay exact because every block starts at a known line (newlines are counted).
"""

from __future__ import annotations

import gzip
import io
import json
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.json as pajson

from regimetune.collectors._check import SKIP, Validator, op_codes, to_batch
from regimetune.collectors.keys import hash_key, hash_keys, is_int_key
from regimetune.collectors.spec import TraceSpec
from regimetune.models.errors import TraceFormatError
from regimetune.models.events import EventBatch, Op

_TYPES: dict[str, pa.DataType] = {
    "ts": pa.float64(),
    "key": pa.uint64(),
    "size": pa.uint32(),
    "bucket": pa.int32(),
    "label": pa.int16(),
    "count": pa.uint32(),
}
_NP: dict[str, type[np.generic]] = {
    "ts": np.float64,
    "key": np.uint64,
    "op": np.uint8,
    "size": np.uint32,
    "bucket": np.int32,
    "label": np.int16,
    "count": np.uint32,
}
_LIMITS: dict[str, tuple[int, int]] = {
    "key": (0, 2**64 - 1),
    "size": (0, 2**32 - 1),
    "bucket": (-(2**31), 2**31 - 1),
    "label": (-(2**15), 2**15 - 1),
    "count": (1, 2**32 - 1),
}


def open_bytes(path: Path) -> IO[bytes]:
    """The decompressed byte stream of ``path`` (``.gz``/``.zst`` by extension)."""
    name = path.name.lower()
    if name.endswith(".gz"):
        return gzip.open(path, "rb")  # type: ignore[return-value]
    if name.endswith((".zst", ".zstd")):
        return _ZstdReader(path)  # type: ignore[return-value]
    return path.open("rb")


class _ZstdReader:
    """Decompress a (multi-frame) zstd file; unlike zstandard's stream reader it notices a
    file that ends inside a frame."""

    def __init__(self, path: Path) -> None:
        import zstandard

        self._raw = path.open("rb")
        self._dctx = zstandard.ZstdDecompressor()
        self._obj = self._dctx.decompressobj()
        self._buf = bytearray()
        self._fresh = True  # no byte of the current frame seen yet
        self._done = False

    def read(self, n: int) -> bytes:
        while len(self._buf) < n and not self._done:
            raw = self._raw.read(1 << 20)
            if not raw:
                if not self._obj.eof and not self._fresh:
                    raise EOFError("zstd stream ended inside a frame")
                self._done = True
                break
            while raw:
                if self._obj.eof:
                    self._obj = self._dctx.decompressobj()
                self._fresh = False
                self._buf += self._obj.decompress(raw)
                raw = self._obj.unused_data if self._obj.eof else b""
        out = bytes(self._buf[:n])
        del self._buf[:n]
        return out

    def __enter__(self) -> _ZstdReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self._raw.close()


def _read(f: IO[bytes], n: int, source: str) -> bytes:
    try:
        return f.read(n)
    except (EOFError, OSError, zlib.error) as exc:
        raise TraceFormatError(
            f"cannot decompress: {exc} (truncated or corrupt file?)", source=source
        ) from exc
    except Exception as exc:  # zstandard.ZstdError is not an OSError
        if type(exc).__module__.startswith("zstandard") or "zstd" in type(exc).__name__.lower():
            raise TraceFormatError(
                f"cannot decompress: {exc} (truncated or corrupt file?)", source=source
            ) from exc
        raise


def _blocks(path: Path, block_bytes: int, source: str) -> Iterator[tuple[bytes, int]]:
    """``(block, first_line)`` pairs; each block holds whole lines."""
    line = 1
    carry = b""
    with open_bytes(path) as f:
        while True:
            data = _read(f, block_bytes, source)
            if not data:
                if carry:
                    yield carry, line
                return
            buf = carry + data
            cut = buf.rfind(b"\n")
            if cut < 0:
                carry = buf
                continue
            block, carry = buf[: cut + 1], buf[cut + 1 :]
            yield block, line
            line += block.count(b"\n")


def _is_number(s: str) -> bool:
    try:
        float(s)
    except ValueError:
        return False
    return True


def _check_value(role: str, text: Any, spec: TraceSpec, *, string_keys: bool) -> tuple[Any, str | None]:
    """Parse one field the slow way; ``(value, None)`` or ``(None, reason)``; an op in
    ``skip_ops`` gives ``(SKIP, None)``."""
    if role == "op":
        s = str(text).strip().lower() if text is not None else ""
        if s in spec.read_ops:
            return int(Op.READ), None
        if s in spec.write_ops:
            return int(Op.WRITE), None
        if s in spec.skip_ops:
            return SKIP, None
        return None, spec.unknown_op(text)
    if role == "key" and string_keys:
        if text is None or text in ("", b""):
            return None, "missing key"
        return hash_key(text if isinstance(text, str | bytes) else str(text)), None
    if text is None or (isinstance(text, str) and not text.strip()):
        return None, f"missing {role}"
    if role == "ts":
        try:
            v = float(text)
        except (TypeError, ValueError):
            return None, f"timestamp {text!r} is not a number"
        problem = spec.time_problem(v * spec.time_scale, text)
        return (v, None) if problem is None else (None, problem)
    try:
        if isinstance(text, float):
            raise ValueError
        v = int(str(text).strip())
    except ValueError:
        hint = " (keys are read as integers: the first record's key was one)" if role == "key" else ""
        return None, f"{role} {text!r} is not an integer{hint}"
    lo, hi = _LIMITS[role]
    if not lo <= v <= hi:
        return None, f"{role} {v} is out of range [{lo}, {hi}]"
    return v, None


class _TextFormat:
    """What differs between CSV and JSON lines: the fast parser and the slow line splitter."""

    def __init__(self, path: Path, spec: TraceSpec, source: str, *, json_lines: bool) -> None:
        self.path, self.spec, self.source, self.json_lines = path, spec, source, json_lines
        self.header = False
        self.roles: dict[str, int | str] = {}
        self.n_cols = 0
        self.string_keys = spec.key_type == "string"
        delim = spec.delimiter
        if delim is None:
            stem = path.name.lower().removesuffix(".gz").removesuffix(".zst").removesuffix(".zstd")
            delim = "\t" if stem.endswith(".tsv") else ","
        self.delim = delim

    # -- layout, from the first line ---------------------------------------------------------
    def sniff(self, first: str) -> None:
        if self.json_lines:
            try:
                obj = json.loads(first)
            except ValueError as exc:
                raise TraceFormatError(f"not a JSON object: {exc}", source=self.source, line=1) from exc
            if not isinstance(obj, dict):
                raise TraceFormatError("not a JSON object", source=self.source, line=1)
            names = list(obj)
            pos = self.spec.resolve(names, len(names), source=self.source)
            self.roles = {r: names[i] for r, i in pos.items()}
            return
        fields = [f.strip().strip('"') for f in first.rstrip("\r\n").split(self.delim)]
        self.n_cols = len(fields)
        if self.spec.header == "auto":
            # data rows have a number in the ts column; a header has a name there
            ts_at = self.spec.positions().get("ts", 0)
            self.header = bool(self.spec.names()) or not _is_number(fields[min(ts_at, len(fields) - 1)])
        else:
            self.header = self.spec.header == "yes"
        self.roles = dict(self.spec.resolve(fields if self.header else None, self.n_cols, source=self.source))

    def decide_keys(self, first_record: str) -> None:
        """Under ``key_type="auto"``, string keys unless the first record's key is an integer
        (decided once, so that a key means the same number in every chunk)."""
        if self.spec.key_type != "auto":
            return
        key: Any = None
        if self.json_lines:
            try:
                key = json.loads(first_record).get(str(self.roles["key"]))
            except (ValueError, AttributeError):
                return  # the record is bad; it will be reported as such
            self.string_keys = isinstance(key, str)
            return
        fields = first_record.rstrip("\r\n").split(self.delim)
        at = int(self.roles["key"])
        if at < len(fields) and fields[at].strip():
            self.string_keys = not is_int_key(fields[at])

    # -- fast path ------------------------------------------------------------------------------
    def parse(self, block: bytes) -> dict[str, np.ndarray] | None:
        """Vectorised parse; ``None`` when the block holds something the slow path must see."""
        try:
            table = self._table(block)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            return None
        cols: dict[str, np.ndarray] = {}
        skipped: np.ndarray | None = None
        for role in self.roles:
            col = table.column(role)
            if col.null_count:
                return None
            if role == "op":
                codes, unknown, skipped = op_codes(
                    col, self.spec.read_ops, self.spec.write_ops, self.spec.skip_ops
                )
                if unknown.any():
                    return None
                cols["op"] = codes
            elif role == "key" and self.string_keys:
                if len(col) and pc.min(pc.binary_length(col)).as_py() == 0:
                    return None
                cols["key"] = hash_keys(col)
            else:
                cols[role] = np.asarray(col.to_numpy(), dtype=_NP[role])
        if not np.isfinite(cols["ts"]).all():
            return None
        if "count" in cols and not cols["count"].all():
            return None
        if skipped is not None and skipped.any():
            cols = {r: c[~skipped] for r, c in cols.items()}
        return cols

    def _table(self, block: bytes) -> pa.Table:
        if self.json_lines:
            fields = [pa.field(r, self._type(r)) for r in self.roles if r != "op"]
            names = {r: n for r, n in self.roles.items()}
            schema = pa.schema([pa.field(str(names[f.name]), f.type) for f in fields])
            t = pajson.read_json(
                io.BytesIO(block),
                read_options=pajson.ReadOptions(use_threads=False, block_size=max(len(block) + 1, 1 << 16)),
                parse_options=pajson.ParseOptions(explicit_schema=schema, unexpected_field_behavior="infer"),
            )
            got = {r: t.column(str(n)) if str(n) in t.column_names else None for r, n in names.items()}
            if any(v is None for v in got.values()) or t.num_rows != block.count(b"\n") + (
                0 if block.endswith(b"\n") else 1
            ):
                raise pa.ArrowInvalid("missing field or blank line")
            return pa.table({r: v for r, v in got.items()})
        col_names = [f"c{i}" for i in range(self.n_cols)]
        by_idx = {int(i): r for r, i in self.roles.items()}
        types = {
            f"c{i}": (pa.dictionary(pa.int32(), pa.string()) if r == "op" else self._type(r))
            for i, r in by_idx.items()
        }
        t = pacsv.read_csv(
            io.BytesIO(block),
            read_options=pacsv.ReadOptions(
                column_names=col_names, use_threads=False, block_size=max(len(block) + 1, 1 << 16)
            ),
            parse_options=pacsv.ParseOptions(delimiter=self.delim, quote_char=False),
            convert_options=pacsv.ConvertOptions(
                column_types=types, include_columns=list(types), strings_can_be_null=False
            ),
        )
        return pa.table({by_idx[int(n[1:])]: t.column(n) for n in types})

    def _type(self, role: str) -> pa.DataType:
        if role == "key" and self.string_keys:
            return pa.string() if self.json_lines else pa.binary()
        return _TYPES[role]

    # -- slow path ------------------------------------------------------------------------------
    def slow(
        self, block: bytes, first_line: int
    ) -> tuple[dict[str, np.ndarray], list[tuple[int, str]], np.ndarray]:
        """Parse line by line: good columns, ``(line, reason)`` of bad lines, good lines' numbers."""
        values: dict[str, list[Any]] = {r: [] for r in self.roles}
        bad: list[tuple[int, str]] = []
        lines: list[int] = []
        for i, raw in enumerate(block.split(b"\n")):
            text = raw.decode("utf-8", errors="replace").rstrip("\r")
            if not text.strip():
                continue
            lineno = first_line + i
            row, reason = self._slow_row(text, raw)
            if reason is not None:
                bad.append((lineno, reason))
                continue
            if row is None:  # a skipped op
                continue
            for r, v in row.items():
                values[r].append(v)
            lines.append(lineno)
        cols = {r: np.array(v, dtype=_NP[r]) for r, v in values.items()}
        return cols, bad, np.array(lines, dtype=np.int64)

    def _slow_row(self, text: str, raw_line: bytes) -> tuple[dict[str, Any] | None, str | None]:
        if self.json_lines:
            try:
                obj = json.loads(text)
            except ValueError:
                return None, "not valid JSON"
            if not isinstance(obj, dict):
                return None, "not a JSON object"
            raw = {r: obj.get(str(n)) for r, n in self.roles.items()}
        else:
            fields = text.split(self.delim)
            if len(fields) != self.n_cols:
                return None, f"expected {self.n_cols} columns, got {len(fields)}"
            raw = {r: fields[int(i)] for r, i in self.roles.items()}
            if self.string_keys:  # hash the key's bytes as the fast path does, not its decoded text
                raw["key"] = raw_line.rstrip(b"\r").split(self.delim.encode())[int(self.roles["key"])]
        row: dict[str, Any] = {}
        skip = False
        for role, v in raw.items():
            val, reason = _check_value(role, v, self.spec, string_keys=self.string_keys)
            if reason is not None:
                return None, reason
            skip |= role == "op" and val == SKIP
            row[role] = val
        return (None, None) if skip else (row, None)


def iter_text(
    path: Path, spec: TraceSpec, val: Validator, *, json_lines: bool, chunk_rows: int
) -> Iterator[EventBatch]:
    source = str(path)
    fmt = _TextFormat(path, spec, source, json_lines=json_lines)
    block_bytes = max(1 << 12, min(chunk_rows * 32, 1 << 26))
    first = True
    decided = False
    for block, line in _blocks(path, block_bytes, source):
        if first:
            first = False
            nl = block.find(b"\n")
            head = (block if nl < 0 else block[:nl]).decode("utf-8", errors="replace")
            fmt.sniff(head)
            if fmt.header:
                block, line = block[nl + 1 :] if nl >= 0 else b"", line + 1
            if not block:
                continue
        if not decided:  # the first record (after the header) decides an ``auto`` key type
            decided = True
            nl = block.find(b"\n")
            fmt.decide_keys((block if nl < 0 else block[:nl]).decode("utf-8", errors="replace"))
        cols = fmt.parse(block)
        if cols is not None:
            cols["ts"] = spec.to_seconds(cols["ts"])
            if not (spec.bad_times(cols["ts"]).any() or val.backwards(cols["ts"]).any()):
                val.accept(cols["ts"])
                yield to_batch(cols)
                continue
        cols, bad, lines = fmt.slow(block, line)
        cols["ts"] = spec.to_seconds(cols["ts"])
        # merge line-level problems and time-order problems in line order
        n = len(lines)
        allrows = np.concatenate([lines, np.array([b[0] for b in bad], dtype=np.int64)])
        order = np.argsort(allrows, kind="stable")
        merged = {r: np.zeros(n + len(bad), dtype=c.dtype) for r, c in cols.items()}
        pos = np.empty(n + len(bad), dtype=np.int64)
        pos[order] = np.arange(n + len(bad))
        for r, c in cols.items():
            merged[r][pos[:n]] = c
        mask = np.zeros(n + len(bad), dtype=bool)
        mask[pos[n:]] = True
        merged["ts"][pos[n:]] = np.nan
        reasons = [bad[j - n][1] for j in order.tolist() if j >= n]
        out = val.screen(merged, mask, reasons, allrows[order], kind="line")
        if len(out["ts"]):
            yield to_batch(out)


__all__ = ["iter_text", "open_bytes"]
