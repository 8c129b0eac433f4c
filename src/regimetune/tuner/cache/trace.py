"""A request trace prepared for many cache simulations, built in one streaming pass.

:class:`TraceBuilder` takes the trace chunk by chunk (as the readers yield it) and computes
each request's LRU stack distance as it goes (:class:`StackDistances`). What every request
needs is written to a :class:`Spool` on disk, not kept in memory:

* ``code``: the stack distance (``COLD`` as ``DIST_COLD``) shifted left by one, the write flag
  in the low bit, in time order (``uint32``);
* ``sorted``: the distances of each window's reads, then of its writes, each group sorted, so a
  window under one capacity is counted by one binary search per group;
* ``ts``: the request times (float64), for the few times a policy is placed on the clock;
* ``size``: the request sizes, when the trace has any.

What stays in memory grows with the windows and the distinct keys only: per-window counts,
the index of each key's first reference, and every ``TIME_STRIDE``-th request time.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt

from regimetune.models import EventBatch, Op
from regimetune.models.errors import InputError
from regimetune.tuner.cache.spool import Spool
from regimetune.tuner.cache.stack import COLD, StackDistances

DIST_COLD = (1 << 31) - 1
"""A first reference's distance as stored (``uint32`` with the write flag): larger than any
capacity the simulator uses (capacities are capped at the distinct keys, at most 2^30)."""
CHUNK_ROWS = 1 << 22
"""Rows read from the spool at a time (the tests make it small to cross chunk edges)."""
TIME_STRIDE = 4096
"""Every this-many-th request time stays in memory to place times without reading them all."""


def _readonly(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


class RequestTimes:
    """The request times of a spooled trace, as far as placing a time needs them:
    ``np.searchsorted(times, t, side)`` (which calls :meth:`searchsorted`) and ``len``.
    A query reads one stride of times from disk; answers are remembered per query array."""

    def __init__(self, spool: Spool, sample: np.ndarray, n: int, stride: int) -> None:
        self._spool, self._sample, self._n, self._stride = spool, sample, n, stride
        self._memo: dict[tuple[bytes, str], np.ndarray] = {}

    def __len__(self) -> int:
        return self._n

    def __getstate__(self) -> dict[str, object]:
        return {**self.__dict__, "_memo": {}}

    def searchsorted(
        self, v: npt.ArrayLike, side: Literal["left", "right"] = "left", sorter: None = None
    ) -> np.ndarray:
        q = np.asarray(v, dtype=np.float64)
        key = (q.tobytes() + str(q.shape).encode(), side)
        if key not in self._memo:
            if len(self._memo) >= 16:
                self._memo.clear()
            self._memo[key] = _readonly(self._place(q.ravel(), side).reshape(q.shape))
        out = self._memo[key].copy()
        return out if out.ndim else out[()]

    def _place(self, q: np.ndarray, side: Literal["left", "right"]) -> np.ndarray:
        # stride b holds requests [b * S, (b + 1) * S); its first time is sample[b]
        blk = np.searchsorted(self._sample, q, side=side)
        out = np.zeros(len(q), dtype=np.int64)
        for b in np.unique(blk[blk > 0]):
            lo = (int(b) - 1) * self._stride
            ts = self._spool.read("ts", lo, min(lo + self._stride, self._n))
            sel = blk == b
            out[sel] = lo + np.searchsorted(ts, q[sel], side=side)
        return out

    def read(self, lo: int, hi: int) -> np.ndarray:
        """Times of requests ``[lo, hi)``."""
        return self._spool.read("ts", lo, hi)


@dataclass(frozen=True, eq=False)
class CacheTrace:
    """A request trace prepared for many cache simulations: stack distances (spooled to
    disk), windows of ``window_s`` seconds from the first request and their counts.

    >>> t = CacheTrace.from_arrays(ts=[0.0, 0.5, 1.0, 1.5], keys=[1, 2, 1, 1])
    >>> t.n_requests, t.n_keys, t.n_windows, t.distances(0, 4)[2].item()
    (4, 2, 2, 1)
    """

    spool: Spool = field(repr=False)
    ts: RequestTimes = field(repr=False)
    first_ref: np.ndarray
    window_s: float
    t0: float
    win_bounds: np.ndarray
    reads_w: np.ndarray
    writes_w: np.ndarray
    cold_reads_w: np.ndarray
    n_keys: int
    has_sizes: bool = False
    size_total: float = 0.0

    @classmethod
    def from_batches(cls, batches: Iterable[EventBatch], *, window_s: float = 1.0) -> CacheTrace:
        """Prepare event batches (in time order), one at a time."""
        b = TraceBuilder(window_s=window_s)
        for batch in batches:
            b.push(batch)
        return b.finish()

    @classmethod
    def from_arrays(
        cls,
        *,
        ts: npt.ArrayLike,
        keys: npt.ArrayLike,
        is_write: npt.ArrayLike | None = None,
        window_s: float = 1.0,
        sizes: npt.ArrayLike | None = None,
    ) -> CacheTrace:
        b = TraceBuilder(window_s=window_s)
        b.push_arrays(ts=ts, keys=keys, is_write=is_write, sizes=sizes)
        return b.finish()

    @property
    def n_requests(self) -> int:
        return len(self.ts)

    @property
    def n_windows(self) -> int:
        return len(self.win_bounds) - 1

    @property
    def duration_s(self) -> float:
        return self.n_windows * self.window_s

    @property
    def window_starts_s(self) -> np.ndarray:
        return self.t0 + self.window_s * np.arange(self.n_windows)

    @functools.cached_property
    def unavoidable_w(self) -> np.ndarray:
        """Store operations per window that no cache spares: cold read misses and writes."""
        return _readonly(self.cold_reads_w + self.writes_w)

    def distinct_after(self, idx: npt.ArrayLike) -> np.ndarray:
        """Distinct keys referenced in requests ``0..idx`` (inclusive; 0 for ``idx < 0``)."""
        return np.searchsorted(self.first_ref, np.asarray(idx), side="right")

    def codes(self, lo: int, hi: int, *, first_rows: int | None = None) -> Iterator[tuple[int, np.ndarray]]:
        """Requests ``[lo, hi)`` as ``(first request, codes)`` chunks of ``CHUNK_ROWS``
        (distance << 1 | write); with ``first_rows``, chunks start that small and double, for
        a reader that may stop early."""
        rows = min(first_rows or CHUNK_ROWS, CHUNK_ROWS)
        while lo < hi:
            yield lo, self.spool.read("code", lo, min(lo + rows, hi))
            lo += rows
            rows = min(2 * rows, CHUNK_ROWS)

    def distances(self, lo: int, hi: int) -> np.ndarray:
        """Stack distances of requests ``[lo, hi)`` (``COLD`` for a first reference)."""
        d = (self.spool.read("code", lo, hi) >> np.uint32(1)).astype(np.int64)
        d[d == DIST_COLD] = COLD
        return d

    def window_batches(self, windows: np.ndarray) -> Iterator[tuple[int, int]]:
        """Runs ``[w0, w1)`` of windows that cover ``windows`` (sorted indices), each of at
        most ``CHUNK_ROWS`` requests (or a single window, however large)."""
        wb, ws = self.win_bounds, np.asarray(windows, dtype=np.int64)
        i = 0
        while i < len(ws):
            w0 = int(ws[i])
            end = int(np.searchsorted(wb, wb[w0] + CHUNK_ROWS, side="right")) - 1  # windows < end fit
            k = max(int(np.searchsorted(ws, end, side="left")), i + 1)
            yield w0, int(ws[k - 1]) + 1
            i = k

    def sizes(self, lo: int, hi: int) -> np.ndarray:
        """Sizes of requests ``[lo, hi)`` (float64; the trace must have sizes)."""
        return self.spool.read("size", lo, hi).astype(np.float64)


class TraceBuilder:
    """Builds a :class:`CacheTrace` from request chunks in time order: :meth:`push` each
    batch (or :meth:`push_arrays`), then :meth:`finish`. Memory: the open window's requests,
    per-window counts and per-key state."""

    def __init__(self, *, window_s: float = 1.0) -> None:
        if not (isinstance(window_s, int | float) and math.isfinite(window_s) and window_s > 0):
            raise InputError(f"window length must be a positive number of seconds, got {window_s}")
        self.window_s = float(window_s)
        self.spool = Spool({"code": np.uint32, "sorted": np.uint32, "ts": np.float64, "size": np.float64})
        self._stack = StackDistances()
        self.n = 0
        self._t0: float | None = None
        self._last_ts = -math.inf
        self._counts = np.zeros((3, 1024), dtype=np.int64)  # reads, writes, cold reads per window
        self._n_win = 0
        self._open: list[tuple[np.ndarray, np.ndarray]] = []  # (window, code) not yet sorted out
        self._first: list[np.ndarray] = []
        self._sample: list[np.ndarray] = []
        self._stride = TIME_STRIDE
        self._any_size = False
        self._size_total = 0.0

    def push(self, batch: EventBatch) -> None:
        sizes = batch.size if np.any(batch.size) else None
        self.push_arrays(ts=batch.ts, keys=batch.key, is_write=batch.op == Op.WRITE, sizes=sizes)

    def push_arrays(
        self,
        *,
        ts: npt.ArrayLike,
        keys: npt.ArrayLike,
        is_write: npt.ArrayLike | None = None,
        sizes: npt.ArrayLike | None = None,
    ) -> None:
        ts_a = np.ascontiguousarray(ts, dtype=np.float64)
        n = len(ts_a)
        keys_a = np.asarray(keys)
        if len(keys_a) != n:
            raise InputError(f"{len(keys_a)} keys for {n} request times")
        if n == 0:
            return
        if not np.all(np.isfinite(ts_a)) or np.any(np.diff(ts_a) < 0) or ts_a[0] < self._last_ts:
            raise InputError("request times must be finite and in time order")
        wr = np.zeros(n, dtype=bool) if is_write is None else np.asarray(is_write, dtype=bool)
        if wr.shape != (n,):
            raise InputError(f"is_write must hold one flag per request, got shape {wr.shape}")
        sz = np.zeros(n) if sizes is None else np.ascontiguousarray(sizes, dtype=np.float64)
        if sz.shape != (n,) or np.any(sz < 0) or not np.all(np.isfinite(sz)):
            raise InputError("sizes must hold one finite size >= 0 per request")
        if self._t0 is None:
            self._t0 = float(ts_a[0])
        dist = self._stack.push(keys_a)
        w = ((ts_a - self._t0) // self.window_s).astype(np.int64)
        self._check_span(int(w[-1]), float(ts_a[-1]))
        code = (np.minimum(dist, DIST_COLD).astype(np.uint32) << np.uint32(1)) | wr.astype(np.uint32)
        cold = dist == COLD
        self._count(w, wr, cold)
        self._first.append(self.n + np.flatnonzero(cold))
        every = ts_a[(-self.n) % self._stride :: self._stride]
        self._sample.append(every.copy())  # a view would keep the whole chunk
        self.spool.append("code", code)
        self.spool.append("ts", ts_a)
        self._spool_sizes(sz, n)
        self._open.append((w, code))
        self._sort_closed(int(w[-1]))
        self.n += n
        self._last_ts = float(ts_a[-1])

    def _spool_sizes(self, sz: np.ndarray, n: int) -> None:
        """Sizes are spooled from the first non-zero one on (zeros for the requests before)."""
        if not self._any_size and np.any(sz):
            for a in range(0, self.n, CHUNK_ROWS):
                self.spool.append("size", np.zeros(min(CHUNK_ROWS, self.n - a)))
            self._any_size = True
        if self._any_size:
            self.spool.append("size", sz)
            self._size_total += float(sz.sum())

    def _check_span(self, w_last: int, t_last: float) -> None:
        if w_last >= max(4 * (self.n + 1), 10_000_000):
            raise InputError(
                f"{self.window_s} s windows over a {t_last - (self._t0 or 0.0):g} s trace make "
                f"{w_last + 1:.3g} windows for {self.n + 1} requests: use longer windows (or check the "
                "trace's time unit)"
            )

    def _count(self, w: np.ndarray, wr: np.ndarray, cold: np.ndarray) -> None:
        top = int(w[-1]) + 1
        if top > self._counts.shape[1]:
            grown = np.zeros((3, max(top, 2 * self._counts.shape[1])), dtype=np.int64)
            grown[:, : self._counts.shape[1]] = self._counts
            self._counts = grown
        lo = int(w[0])
        for row, sel in enumerate((~wr, wr, cold & ~wr)):
            self._counts[row, lo:top] += np.bincount(w[sel] - lo, minlength=top - lo)
        self._n_win = top

    def _sort_closed(self, w_open: int | None) -> None:
        """Write the sorted groups of the windows before ``w_open`` (all when None)."""
        w = np.concatenate([p[0] for p in self._open])
        code = np.concatenate([p[1] for p in self._open])
        cut = len(w) if w_open is None else int(np.searchsorted(w, w_open, side="left"))
        if cut:
            # window, then reads before writes, then the distance: one sort of 64-bit keys
            win = (w[:cut] - w[0]).astype(np.uint64) << np.uint64(32)
            c = code[:cut].astype(np.uint64)
            order = win | ((c & np.uint64(1)) << np.uint64(31)) | (c >> np.uint64(1))
            order.sort()
            self.spool.append("sorted", (order & np.uint64(DIST_COLD)).astype(np.uint32))
        self._open = [(w[cut:].copy(), code[cut:].copy())] if cut < len(w) else []  # not views

    def finish(self) -> CacheTrace:
        if self.n == 0:
            raise InputError("cannot simulate a cache on an empty trace")
        if self._open:
            self._sort_closed(None)
        if not self._any_size:
            self.spool.drop("size")
        self.spool.finish()
        reads_w, writes_w, cold_w = (c[: self._n_win].copy() for c in self._counts)
        win_bounds = np.concatenate([[0], np.cumsum(reads_w + writes_w)]).astype(np.int64)
        first_ref = np.concatenate(self._first)
        sample = np.concatenate(self._sample)
        assert self._t0 is not None
        return CacheTrace(
            spool=self.spool,
            ts=RequestTimes(self.spool, _readonly(sample), self.n, self._stride),
            first_ref=_readonly(first_ref),
            window_s=self.window_s,
            t0=self._t0,
            win_bounds=_readonly(win_bounds),
            reads_w=_readonly(reads_w),
            writes_w=_readonly(writes_w),
            cold_reads_w=_readonly(cold_w),
            n_keys=self._stack.n_keys,
            has_sizes=self._any_size,
            size_total=self._size_total,
        )


__all__ = ["CHUNK_ROWS", "DIST_COLD", "CacheTrace", "RequestTimes", "TraceBuilder"]
