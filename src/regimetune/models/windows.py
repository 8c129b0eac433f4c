"""Per-window statistics: one record per window, and a columnar frame for many windows."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, fields

import numpy as np

from regimetune.models.errors import InputError

DEFAULT_WINDOW_S = 10.0
"""The window length (s) of every command and of the service unless told otherwise."""

SERIES_STEP_S = 50.0
"""Seconds one row of a series (``detect --series``) stands for when nothing says otherwise (a
row index, or yearly, monthly or daily dates: no storage time scale), so the detector's
durations count rows: ``min_regime_s`` 900 s = 18 rows, ``regime_s`` 1800 s = 36. Chosen by
``bench/series_step.py`` on ruptures' piecewise-constant series (white, AR(1) and drifting
noise): the step with the best TCPD F1 + cover among 10-90 s. TCPD's series were not run with
it before it was fixed."""


@dataclass(frozen=True, slots=True)
class WindowStats:
    """Statistics of the requests in ``[start, start + length)``.

    ``active_keys`` counts distinct keys in the window, ``keyspace_size`` the distinct keys
    seen since the trace began; both are exact while ``exact`` is true and sketch estimates
    after. ``topk_share`` is the share of requests that went to the window's ``k`` most
    requested keys; ``entropy`` the Shannon entropy (bits) of the window's key popularity.
    ``label`` is the majority ground-truth regime label of the window's events (``-1`` when
    the trace has none). ``bucket_load``/``bucket_bytes`` hold requests and bytes per
    bucket (empty when the trace has no bucket column).
    """

    index: int
    start: float
    length: float
    reads: int
    writes: int
    active_keys: int
    keyspace_size: int
    topk_share: float
    entropy: float
    label: int = -1
    exact: bool = True
    bucket_load: tuple[float, ...] = ()
    bucket_bytes: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if not self.length > 0:
            raise InputError(f"window length must be positive, got {self.length}")
        for name in ("reads", "writes", "active_keys", "keyspace_size"):
            if getattr(self, name) < 0:
                raise InputError(f"{name} must be >= 0")
        for name in ("start", "topk_share", "entropy"):
            if not math.isfinite(getattr(self, name)):
                raise InputError(f"{name} must be finite")

    @property
    def end(self) -> float:
        return self.start + self.length

    @property
    def reads_per_s(self) -> float:
        return self.reads / self.length

    @property
    def writes_per_s(self) -> float:
        return self.writes / self.length

    @property
    def requests(self) -> int:
        return self.reads + self.writes

    @property
    def rw_ratio(self) -> float:
        """Reads per write; reads + 1 over writes + 1 so an all-read window stays finite."""
        return (self.reads + 1) / (self.writes + 1)


SCALAR_COLUMNS: tuple[str, ...] = tuple(
    f.name for f in fields(WindowStats) if f.name not in ("bucket_load", "bucket_bytes")
)


@dataclass(frozen=True)
class WindowFrame:
    """Many windows as read-only numpy columns (``SCALAR_COLUMNS``), plus per-bucket
    matrices ``bucket_load``/``bucket_bytes`` of shape ``(n_windows, n_buckets)``
    (``n_buckets`` may be 0). Windows are in time order and equally long, except the edges
    of a trace: the first and last windows may cover only part of a window length (``start``
    and ``length`` say which part), so ``reads_per_s`` rates them by the time they cover.
    """

    columns: dict[str, np.ndarray]
    bucket_load: np.ndarray
    bucket_bytes: np.ndarray

    def __post_init__(self) -> None:
        missing = set(SCALAR_COLUMNS) - set(self.columns)
        if missing:
            raise InputError(f"window frame lacks columns {sorted(missing)}")
        n = len(self.columns["index"])
        for name, col in self.columns.items():
            if len(col) != n:
                raise InputError(f"window column {name!r} has {len(col)} rows, expected {n}")
            col.setflags(write=False)
        for m in (self.bucket_load, self.bucket_bytes):
            if m.ndim != 2 or m.shape[0] != n:
                raise InputError(f"bucket matrix must have shape ({n}, B), got {m.shape}")
            m.setflags(write=False)

    def __len__(self) -> int:
        return len(self.columns["index"])

    def __getitem__(self, name: str) -> np.ndarray:
        return self.columns[name]

    @property
    def n_buckets(self) -> int:
        return int(self.bucket_load.shape[1])

    @property
    def reads_per_s(self) -> np.ndarray:
        return self.columns["reads"] / self.columns["length"]

    @property
    def writes_per_s(self) -> np.ndarray:
        return self.columns["writes"] / self.columns["length"]

    @property
    def rw_ratio(self) -> np.ndarray:
        return (self.columns["reads"] + 1.0) / (self.columns["writes"] + 1.0)

    @classmethod
    def from_records(cls, records: Iterable[WindowStats]) -> WindowFrame:
        recs = list(records)
        cols = {
            name: np.array([getattr(r, name) for r in recs], dtype=_COLUMN_DTYPES[name])
            for name in SCALAR_COLUMNS
        }
        nb = max((len(r.bucket_load) for r in recs), default=0)
        load = np.zeros((len(recs), nb))
        size = np.zeros((len(recs), nb))
        for i, r in enumerate(recs):
            load[i, : len(r.bucket_load)] = r.bucket_load
            size[i, : len(r.bucket_bytes)] = r.bucket_bytes
        return cls(columns=cols, bucket_load=load, bucket_bytes=size)

    def records(self) -> Iterator[WindowStats]:
        for i in range(len(self)):
            yield self.record(i)

    def record(self, i: int) -> WindowStats:
        kw = {name: self.columns[name][i].item() for name in SCALAR_COLUMNS}
        return WindowStats(
            **kw,
            bucket_load=tuple(self.bucket_load[i].tolist()),
            bucket_bytes=tuple(self.bucket_bytes[i].tolist()),
        )

    def slice(self, start: int, stop: int) -> WindowFrame:
        return WindowFrame(
            columns={k: v[start:stop] for k, v in self.columns.items()},
            bucket_load=self.bucket_load[start:stop],
            bucket_bytes=self.bucket_bytes[start:stop],
        )


_COLUMN_DTYPES: dict[str, type[np.generic]] = {
    "index": np.int64,
    "start": np.float64,
    "length": np.float64,
    "reads": np.int64,
    "writes": np.int64,
    "active_keys": np.int64,
    "keyspace_size": np.int64,
    "topk_share": np.float64,
    "entropy": np.float64,
    "label": np.int64,
    "exact": np.bool_,
}

COLUMN_DTYPES: dict[str, type[np.generic]] = _COLUMN_DTYPES
"""The numpy dtype of each scalar column of a :class:`WindowFrame` (for readers and writers)."""

__all__ = [
    "COLUMN_DTYPES",
    "DEFAULT_WINDOW_S",
    "SCALAR_COLUMNS",
    "SERIES_STEP_S",
    "WindowFrame",
    "WindowStats",
]
