"""Record validation shared by every reader: ops, finite times, time order, the bad-record budget.

Readers turn a chunk into numpy columns, then ask a :class:`Validator` which rows are bad; bad
rows stop the run (naming the file and the line, or the byte offset of a binary record) or,
within the ``skip_bad`` budget, are dropped and counted.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from regimetune.models.errors import TraceFormatError
from regimetune.models.events import NO_BUCKET, NO_LABEL, EventBatch, Op


class Validator:
    """Running state of one read: the latest accepted time and how many records were bad."""

    def __init__(self, source: str, *, skip_bad: int, tolerance: float) -> None:
        self.source = source
        self.skip_bad = skip_bad
        self.tolerance = tolerance
        self.bad = 0
        self.tmax = -np.inf

    def fail(self, reason: str, *, line: int | None = None, offset: int | None = None) -> None:
        """Count one bad record; raise when the budget is spent."""
        self.bad += 1
        if self.bad > self.skip_bad:
            if self.skip_bad:
                reason = f"{reason} (more than --skip-bad {self.skip_bad} bad records)"
            raise TraceFormatError(reason, source=self.source, line=line, offset=offset)

    def backwards(self, ts: np.ndarray) -> np.ndarray:
        """Mask of times that go back more than the tolerance behind the latest earlier time.
        Dropping such rows leaves the running maximum unchanged, so one pass is exact."""
        if len(ts) == 0:
            return np.zeros(0, dtype=bool)
        prev = np.empty_like(ts)
        prev[0] = self.tmax
        np.maximum.accumulate(ts[:-1], out=prev[1:])
        np.maximum(prev[1:], self.tmax, out=prev[1:])
        return ts < prev - self.tolerance

    def accept(self, ts: np.ndarray) -> None:
        if len(ts):
            self.tmax = max(self.tmax, float(ts.max()))

    def screen(
        self,
        cols: dict[str, np.ndarray],
        bad: np.ndarray,
        reasons: list[str],
        where: np.ndarray,
        *,
        kind: str,
    ) -> dict[str, np.ndarray]:
        """Drop rows flagged in ``bad`` (with ``reasons`` per flagged row, in row order) plus
        rows going back in time; ``where`` holds each row's line number (``kind="line"``) or
        byte offset (``kind="offset"``) for messages."""
        ts = cols["ts"]
        back = self.backwards(np.where(bad, -np.inf, ts))
        back &= ~bad
        allbad = bad | back
        if allbad.any():
            idx = np.flatnonzero(allbad)
            rmap = dict(zip(np.flatnonzero(bad).tolist(), reasons, strict=True))
            for i in idx.tolist():
                reason = rmap.get(i) or f"timestamp {float(ts[i])!r} goes back more than {self.tolerance} s"
                if kind == "line":
                    self.fail(reason, line=int(where[i]))
                else:
                    self.fail(reason, offset=int(where[i]))
            keep = ~allbad
            cols = {k: v[keep] for k, v in cols.items()}
        self.accept(cols["ts"])
        return cols


SKIP = -2
"""The code of an op whose records are dropped quietly (``TraceSpec.skip_ops``)."""


def _code_of(
    value: object, read_ops: frozenset[str], write_ops: frozenset[str], skip_ops: frozenset[str] = frozenset()
) -> int:
    """``Op`` code of one op value, ``SKIP`` for a skipped op, or -1 when it is none of them."""
    if value is None:
        return -1
    v = str(value).strip().lower()
    if v in read_ops:
        return int(Op.READ)
    if v in write_ops:
        return int(Op.WRITE)
    return SKIP if v in skip_ops else -1


def op_codes(
    col: pa.Array | pa.ChunkedArray,
    read_ops: frozenset[str],
    write_ops: frozenset[str],
    skip_ops: frozenset[str] = frozenset(),
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Map an op column (strings, dictionary-encoded strings or integers) to ``Op`` codes;
    returns ``(codes, unknown, skipped)``. Only the distinct values are looked at in Python."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    if pa.types.is_integer(col.type) and not col.null_count:
        arr = col.to_numpy()
        lo, hi = (int(arr.min()), int(arr.max())) if len(arr) else (0, 0)
        if hi - lo < 1 << 16:
            present = np.flatnonzero(np.bincount((arr - lo).astype(np.int64), minlength=hi - lo + 1))
            lut = np.full(hi - lo + 1, -1, dtype=np.int8)
            for v in present.tolist():
                lut[v] = _code_of(v + lo, read_ops, write_ops, skip_ops)
            c = lut[(arr - lo).astype(np.int64)]
        else:
            uniq, inv = np.unique(arr, return_inverse=True)
            lut = np.array(
                [_code_of(int(u), read_ops, write_ops, skip_ops) for u in uniq.tolist()], dtype=np.int8
            )
            c = lut[inv]
    else:
        if not pa.types.is_dictionary(col.type):
            col = pc.dictionary_encode(pc.cast(col, pa.string()) if not pa.types.is_string(col.type) else col)
        words = col.dictionary.to_pylist()
        lut = np.array([_code_of(w, read_ops, write_ops, skip_ops) for w in words] + [-1], dtype=np.int8)
        idx = col.indices.fill_null(len(words)).to_numpy(zero_copy_only=False)
        c = lut[np.asarray(idx, dtype=np.int64)]
    unknown = c == -1
    skipped = c == SKIP
    return np.where(c < 0, 0, c).astype(np.uint8), unknown, skipped


def to_batch(cols: dict[str, np.ndarray]) -> EventBatch:
    """An event batch of the reader's columns; a ``count`` column (requests per record)
    repeats each record that many times."""
    if "count" in cols:
        reps = cols["count"].astype(np.int64)
        cols = {k: np.repeat(v, reps) for k, v in cols.items() if k != "count"}
    n = len(cols["ts"])
    return EventBatch.from_columns(
        ts=cols["ts"],
        key=cols["key"],
        op=cols.get("op"),
        size=cols.get("size"),
        bucket=cols["bucket"] if "bucket" in cols else np.full(n, NO_BUCKET, dtype=np.int32),
        label=cols["label"] if "label" in cols else np.full(n, NO_LABEL, dtype=np.int16),
    )


__all__ = ["SKIP", "Validator", "op_codes", "to_batch"]
