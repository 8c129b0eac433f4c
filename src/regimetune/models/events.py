"""Request events: one record for the REST edge, a columnar batch for everything in bulk."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum

import numpy as np
import numpy.typing as npt

from regimetune.models.errors import InputError


class Op(IntEnum):
    """Request kind. Stored as ``uint8`` in batches."""

    READ = 0
    WRITE = 1


NO_BUCKET = -1
NO_LABEL = -1


@dataclass(frozen=True, slots=True)
class RequestEvent:
    """One request: time in seconds, an integer key, read or write, value size in bytes,
    the bucket that holds the key (``-1`` if unknown) and a ground-truth regime label
    (``-1`` if unknown; the generator sets it so detection can be scored)."""

    ts: float
    key: int
    op: Op = Op.READ
    size: int = 0
    bucket: int = NO_BUCKET
    label: int = NO_LABEL


_DTYPES: dict[str, type[np.generic]] = {
    "ts": np.float64,
    "key": np.uint64,
    "op": np.uint8,
    "size": np.uint32,
    "bucket": np.int32,
    "label": np.int16,
}


def _frozen(a: npt.ArrayLike, dtype: type[np.generic]) -> np.ndarray:
    """A read-only view; the batch takes ownership of the data it is given."""
    arr = np.ascontiguousarray(a, dtype=dtype)
    if arr.ndim != 1:
        raise InputError(f"event column must be one-dimensional, got shape {arr.shape}")
    view = arr.view()
    view.setflags(write=False)
    return view


@dataclass(frozen=True)
class EventBatch:
    """A chunk of events as read-only numpy columns of equal length, in time order.

    >>> b = EventBatch.from_columns(ts=[0.0, 0.5], key=[7, 7], op=[0, 1])
    >>> len(b), int(b.n_reads), b.size.tolist()
    (2, 1, [0, 0])
    """

    ts: np.ndarray
    key: np.ndarray
    op: np.ndarray
    size: np.ndarray
    bucket: np.ndarray
    label: np.ndarray

    COLUMNS = ("ts", "key", "op", "size", "bucket", "label")

    def __post_init__(self) -> None:
        n = len(self.ts)
        for name in self.COLUMNS:
            col = getattr(self, name)
            if not isinstance(col, np.ndarray) or col.dtype != _DTYPES[name]:
                raise InputError(f"column {name!r} must be a numpy {_DTYPES[name].__name__} array")
            if len(col) != n:
                raise InputError(f"column {name!r} has {len(col)} rows, expected {n}")

    @classmethod
    def from_columns(
        cls,
        *,
        ts: npt.ArrayLike,
        key: npt.ArrayLike,
        op: npt.ArrayLike | None = None,
        size: npt.ArrayLike | None = None,
        bucket: npt.ArrayLike | None = None,
        label: npt.ArrayLike | None = None,
    ) -> EventBatch:
        """Build a batch, filling optional columns with their defaults."""
        ts_a = _frozen(ts, np.float64)
        n = len(ts_a)

        def col(v: npt.ArrayLike | None, name: str, default: int) -> np.ndarray:
            if v is None:
                return _frozen(np.full(n, default, dtype=_DTYPES[name]), _DTYPES[name])
            return _frozen(v, _DTYPES[name])

        return cls(
            ts=ts_a,
            key=col(key, "key", 0),
            op=col(op, "op", int(Op.READ)),
            size=col(size, "size", 0),
            bucket=col(bucket, "bucket", NO_BUCKET),
            label=col(label, "label", NO_LABEL),
        )

    @classmethod
    def from_events(cls, events: Iterable[RequestEvent]) -> EventBatch:
        evs = list(events)
        return cls.from_columns(
            ts=[e.ts for e in evs],
            key=[e.key for e in evs],
            op=[int(e.op) for e in evs],
            size=[e.size for e in evs],
            bucket=[e.bucket for e in evs],
            label=[e.label for e in evs],
        )

    @classmethod
    def empty(cls) -> EventBatch:
        return cls.from_columns(ts=np.empty(0), key=np.empty(0, dtype=np.uint64))

    @classmethod
    def concat(cls, batches: Sequence[EventBatch]) -> EventBatch:
        if not batches:
            return cls.empty()
        return cls(
            **{c: _frozen(np.concatenate([getattr(b, c) for b in batches]), _DTYPES[c]) for c in cls.COLUMNS}
        )

    def __len__(self) -> int:
        return len(self.ts)

    def slice(self, start: int, stop: int) -> EventBatch:
        """Rows ``[start, stop)`` as a batch (views, no copy)."""
        return EventBatch(**{c: getattr(self, c)[start:stop] for c in self.COLUMNS})

    def events(self) -> Iterable[RequestEvent]:
        """Iterate as records; for tests and small batches only."""
        for i in range(len(self)):
            yield RequestEvent(
                ts=float(self.ts[i]),
                key=int(self.key[i]),
                op=Op(int(self.op[i])),
                size=int(self.size[i]),
                bucket=int(self.bucket[i]),
                label=int(self.label[i]),
            )

    @property
    def n_reads(self) -> int:
        return int(np.count_nonzero(self.op == Op.READ))

    @property
    def n_writes(self) -> int:
        return int(np.count_nonzero(self.op == Op.WRITE))


__all__ = ["EventBatch", "NO_BUCKET", "NO_LABEL", "Op", "RequestEvent"]
