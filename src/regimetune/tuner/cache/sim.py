"""Exact trace-driven simulation of an LRU cache tier under any capacity schedule.

``CacheTrace`` computes the stack distances once; ``simulate`` then scores a policy with
vectorised counts. Why this is exact:

* An LRU cache always holds a *prefix* of the recency stack (the most recently used keys).
  While the capacity only shrinks (Mantle: unlimited until H keys, then n; a regime limit
  that goes down), the cache is full up to its capacity, so it holds the
  ``min(capacity, distinct keys so far)`` most recent keys and a request hits iff its stack
  distance is ``< capacity`` in force.
* When the capacity grows again from n to m, the cache still holds only its n keys and
  fills up with new keys as misses arrive: it holds the prefix of length ``fill``, where
  ``fill`` grows by one per miss until it reaches ``min(m, distinct keys)``. Using
  "distance < m" right after the growth would over-count hits until the cache has refilled
  (a key evicted before the growth is not back just because the limit went up). During such
  a refill span a small compiled kernel steps request by request (hit iff distance <
  fill); once the cache has caught up, the vectorised rule applies again.

Counts per window come from a sorted array of ``(window, op, distance)`` keys, so a window
under one capacity costs one binary search; only windows cut by a switch or a refill span
are counted by slicing.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable
from dataclasses import dataclass

import numba
import numpy as np
import numpy.typing as npt

from regimetune.models import EventBatch, Op
from regimetune.models.errors import InputError
from regimetune.tuner.cache.cost import CostModel
from regimetune.tuner.cache.schedule import CachePolicyLike, CapacitySchedule, as_schedule
from regimetune.tuner.cache.stack import COLD, stack_distances
from regimetune.tuner.cache.store import StoreModel

DEFAULT_VALUE_SIZE = 4096
"""Bytes per cached value: the paper's 10-key cache held 40 KB."""


def _readonly(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False)
class CacheTrace:
    """A request trace prepared for many cache simulations: stack distances, windows of
    ``window_s`` seconds from the first request, and per-window sorted distances.

    >>> t = CacheTrace.from_arrays(ts=[0.0, 0.5, 1.0, 1.5], keys=[1, 2, 1, 1])
    >>> t.n_requests, t.n_keys, t.n_windows, t.dist[2].item()
    (4, 2, 2, 1)
    """

    ts: np.ndarray
    dist: np.ndarray
    is_write: np.ndarray
    first_ref: np.ndarray
    window_s: float
    t0: float
    win_bounds: np.ndarray
    reads_w: np.ndarray
    writes_w: np.ndarray
    n_keys: int
    _comp: np.ndarray
    _comp_start: np.ndarray
    sizes: np.ndarray | None = None

    @classmethod
    def from_batches(cls, batches: Iterable[EventBatch], *, window_s: float = 1.0) -> CacheTrace:
        """Concatenate event batches (in time order) and prepare them."""
        batch = EventBatch.concat(list(batches))
        sizes = batch.size if len(batch) and np.any(batch.size) else None
        return cls.from_arrays(
            ts=batch.ts, keys=batch.key, is_write=batch.op == Op.WRITE, window_s=window_s, sizes=sizes
        )

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
        ts_a = np.ascontiguousarray(ts, dtype=np.float64)
        n = len(ts_a)
        if n == 0:
            raise InputError("cannot simulate a cache on an empty trace")
        if not (math.isfinite(window_s) and window_s > 0):
            raise InputError(f"window length must be a positive number of seconds, got {window_s}")
        if not np.all(np.isfinite(ts_a)) or np.any(np.diff(ts_a) < 0):
            raise InputError("request times must be finite and in time order")
        dist = stack_distances(keys)
        if len(dist) != n:
            raise InputError(f"{len(dist)} keys for {n} request times")
        wr = np.zeros(n, dtype=bool) if is_write is None else np.asarray(is_write, dtype=bool)
        if wr.shape != (n,):
            raise InputError(f"is_write must hold one flag per request, got shape {wr.shape}")
        first_ref = np.flatnonzero(dist == COLD)
        n_keys = len(first_ref)
        t0 = float(ts_a[0])
        span_windows = (float(ts_a[-1]) - t0) / window_s
        if span_windows >= max(4 * n, 10_000_000):
            raise InputError(
                f"{window_s} s windows over a {ts_a[-1] - t0:g} s trace make {span_windows:.3g} windows "
                f"for {n} requests: use longer windows (or check the trace's time unit)"
            )
        w = ((ts_a - t0) // window_s).astype(np.int64)
        n_win = int(w[-1]) + 1
        win_bounds = np.searchsorted(w, np.arange(n_win + 1), side="left").astype(np.int64)
        writes_w = np.bincount(w, weights=wr, minlength=n_win).astype(np.int64)
        reads_w = np.diff(win_bounds) - writes_w
        sz = None if sizes is None else np.ascontiguousarray(sizes, dtype=np.float64)
        if sz is not None and (sz.shape != (n,) or np.any(sz < 0) or not np.all(np.isfinite(sz))):
            raise InputError("sizes must hold one finite size >= 0 per request")
        k1 = np.int64(n_keys + 1)
        comp = np.sort((2 * w + wr) * k1 + np.minimum(dist, n_keys))
        comp_start = np.searchsorted(comp, np.arange(2 * n_win + 1, dtype=np.int64) * k1)
        return cls(
            ts=_readonly(ts_a),
            dist=_readonly(dist),
            is_write=_readonly(wr.copy()),
            first_ref=_readonly(first_ref),
            window_s=float(window_s),
            t0=t0,
            win_bounds=_readonly(win_bounds),
            reads_w=_readonly(reads_w),
            writes_w=_readonly(writes_w),
            n_keys=n_keys,
            _comp=_readonly(comp),
            _comp_start=_readonly(comp_start),
            sizes=None if sz is None else _readonly(sz),
        )

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
        """Store operations per window that no cache spares: cold read misses and writes
        (computed once per trace: every simulation sizes the store by it)."""
        cold_reads = self.first_ref[~self.is_write[self.first_ref]]
        w = np.searchsorted(self.win_bounds, cold_reads, side="right") - 1
        return np.bincount(w, minlength=self.n_windows).astype(np.int64) + self.writes_w

    def distinct_after(self, idx: npt.ArrayLike) -> np.ndarray:
        """Distinct keys referenced in requests ``0..idx`` (inclusive; 0 for ``idx < 0``)."""
        return np.searchsorted(self.first_ref, np.asarray(idx), side="right")


@dataclass(frozen=True, eq=False)
class CacheResult:
    """What a cache policy did on a trace. ``efficiency`` = trace duration / simulated
    duration (1.0: the store never stalled the run); memory in keys and bytes, peak and
    averaged over simulated time; per-window arrays for plots."""

    requests: int
    misses: int
    read_misses: int
    store_ops: int
    trace_s: float
    simulated_s: float
    peak_keys: int
    mean_keys: float
    value_size: int
    window_read_misses: np.ndarray
    window_keys: np.ndarray
    window_stall_s: np.ndarray
    window_time_s: np.ndarray | None = None
    window_s: float = 0.0

    @property
    def efficiency(self) -> float:
        return self.trace_s / self.simulated_s

    @property
    def hit_ratio(self) -> float:
        return 1.0 - self.misses / self.requests

    @property
    def peak_bytes(self) -> int:
        return self.peak_keys * self.value_size

    @property
    def mean_bytes(self) -> float:
        return self.mean_keys * self.value_size

    def summary(self) -> dict[str, float]:
        return {
            "efficiency": self.efficiency,
            "hit_ratio": self.hit_ratio,
            "misses": float(self.misses),
            "store_ops": float(self.store_ops),
            "simulated_s": self.simulated_s,
            "peak_bytes": float(self.peak_bytes),
            "mean_bytes": self.mean_bytes,
        }


@numba.njit(cache=True, nogil=True)
def _refill(
    dist, is_write, a, fill, distinct, starts, caps, p, win_bounds, rmiss, wmiss, fill_end
):  # pragma: no cover
    # Step request by request from a growth at request a until the cache has refilled.
    n = dist.shape[0]
    n_win = win_bounds.shape[0] - 1
    w = np.searchsorted(win_bounds, a, side="right") - 1
    peak = fill
    j = a
    while j < n:
        while w < n_win and win_bounds[w + 1] <= j:
            if j - 1 >= a:
                fill_end[w] = fill
            w += 1
        while p + 1 < starts.shape[0] and starts[p + 1] <= j:
            p += 1
        c = caps[p]
        if fill > c:
            fill = c
        if fill >= min(c, distinct):
            break
        d = dist[j]
        if d >= fill:
            if is_write[j]:
                wmiss[w] += 1
            else:
                rmiss[w] += 1
            fill += 1
            if d == COLD:
                distinct += 1
        if fill > peak:
            peak = fill
        j += 1
    while w < n_win and win_bounds[w + 1] <= j:
        if j - 1 >= a:
            fill_end[w] = fill
        w += 1
    return j, peak


def _refill_spans(
    trace: CacheTrace, sched: CapacitySchedule, rmiss: np.ndarray, wmiss: np.ndarray, fill_end: np.ndarray
) -> tuple[np.ndarray, np.ndarray, int]:
    """Run the refill kernel after every growth that finds the cache short of its limit."""
    starts, caps = sched.starts, sched.caps
    spans: list[tuple[int, int]] = []
    peak = 0
    covered = 0
    for p in np.flatnonzero(np.diff(caps) > 0) + 1:
        a = int(starts[p])
        if a < covered:
            continue
        distinct = int(np.searchsorted(trace.first_ref, a, side="left"))
        fill = min(int(caps[p - 1]), distinct)
        if fill >= min(int(caps[p]), distinct):
            continue
        k, pk = _refill(
            trace.dist, trace.is_write, a, fill, distinct, starts, caps, p - 1,
            trace.win_bounds, rmiss, wmiss, fill_end,
        )  # fmt: skip
        spans.append((a, int(k)))
        peak = max(peak, int(pk))
        covered = int(k)
    arr = np.array(spans, dtype=np.int64).reshape(-1, 2)
    return arr[:, 0], arr[:, 1], peak


@numba.njit(cache=True, nogil=True)
def _count_clean(comp, comp_start, clean, caps, k1, reads_w, writes_w, rmiss, wmiss):  # pragma: no cover
    # Per clean window: hits = sorted distances below the capacity, by a binary search
    # confined to the window's own (small, cache-resident) group.
    for i in range(clean.shape[0]):
        w = clean[i]
        for op in range(2):
            g = 2 * w + op
            lo = comp_start[g]
            hi = comp_start[g + 1]
            target = g * k1 + caps[i]
            while lo < hi:
                mid = (lo + hi) >> 1
                if comp[mid] < target:
                    lo = mid + 1
                else:
                    hi = mid
            hits = lo - comp_start[g]
            if op == 0:
                rmiss[w] = reads_w[w] - hits
            else:
                wmiss[w] = writes_w[w] - hits


@numba.njit(cache=True, nogil=True)
def _count_dirty(
    dist, is_write, win_bounds, dirty, starts, caps, span_a, span_k, rmiss, wmiss
):  # pragma: no cover
    # Windows cut by a switch or a refill span: step through their regular requests.
    n_sp = span_a.shape[0]
    n_p = starts.shape[0]
    for i in range(dirty.shape[0]):
        w = dirty[i]
        j = win_bounds[w]
        hi = win_bounds[w + 1]
        p = np.searchsorted(starts, j, side="right") - 1
        s = np.searchsorted(span_k, j, side="right")  # first span ending after j
        while j < hi:
            if s < n_sp and span_a[s] <= j:
                j = span_k[s]  # counted by the refill kernel
                s += 1
                continue
            while p + 1 < n_p and starts[p + 1] <= j:
                p += 1
            stop = hi
            if s < n_sp and span_a[s] < stop:
                stop = span_a[s]
            if p + 1 < n_p and starts[p + 1] < stop:
                stop = starts[p + 1]
            c = caps[p]
            for r in range(j, stop):
                if dist[r] >= c:
                    if is_write[r]:
                        wmiss[w] += 1
                    else:
                        rmiss[w] += 1
            j = stop


def _count(trace: CacheTrace, sched: CapacitySchedule) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Read misses, write misses and cached keys at the end of each window; peak keys."""
    n, n_win, k = trace.n_requests, trace.n_windows, trace.n_keys
    keep = sched.starts < n
    sched = CapacitySchedule.build(sched.starts[keep], np.minimum(sched.caps[keep], k))
    rmiss = np.zeros(n_win, dtype=np.int64)
    wmiss = np.zeros(n_win, dtype=np.int64)
    fill_end = np.zeros(n_win, dtype=np.int64)
    span_a, span_k, peak = _refill_spans(trace, sched, rmiss, wmiss, fill_end)

    def in_span(idx: np.ndarray) -> np.ndarray:
        if not len(span_a):
            return np.zeros(len(idx), dtype=bool)
        s = np.searchsorted(span_a, idx, side="right") - 1
        return (s >= 0) & (idx < span_k[np.maximum(s, 0)])

    cuts = np.unique(np.concatenate([sched.starts, span_a, span_k]))
    cuts = cuts[cuts < n]
    w_lo, w_hi = trace.win_bounds[:-1], trace.win_bounds[1:]
    # a window is clean if no cut falls strictly inside it and it does not start in a span
    cut_w = np.searchsorted(trace.win_bounds, cuts, side="right") - 1
    inner = cuts > w_lo[cut_w]
    dirty = np.zeros(n_win, dtype=bool)
    dirty[cut_w[inner]] = True
    dirty |= in_span(w_lo) & (w_hi > w_lo)
    clean = np.flatnonzero(~dirty)
    _count_clean(
        trace._comp, trace._comp_start, clean, sched.cap_at(w_lo[clean]), np.int64(k + 1),
        trace.reads_w, trace.writes_w, rmiss, wmiss,
    )  # fmt: skip
    _count_dirty(
        trace.dist, trace.is_write, trace.win_bounds, np.flatnonzero(dirty), sched.starts, sched.caps,
        span_a, span_k, rmiss, wmiss,
    )  # fmt: skip
    # cached keys at each window's last request, where it is not inside a refill span
    last = w_hi - 1
    reg = ~in_span(last)
    fill_end[reg] = np.where(
        last[reg] >= 0, np.minimum(sched.cap_at(np.maximum(last[reg], 0)), trace.distinct_after(last[reg])), 0
    )
    # peak: the cache is full at the end of every regular segment
    seg_lo = np.concatenate([[0], cuts[cuts > 0]])
    seg_hi = np.concatenate([seg_lo[1:], [n]])
    reg_seg = ~in_span(seg_lo)
    if np.any(reg_seg):
        seg_fill = np.minimum(sched.cap_at(seg_lo[reg_seg]), trace.distinct_after(seg_hi[reg_seg] - 1))
        peak = max(peak, int(seg_fill.max()))
    return rmiss, wmiss, fill_end, peak


def simulate(
    trace: CacheTrace,
    policy: CachePolicyLike,
    *,
    store: StoreModel | None = None,
    value_size: int = DEFAULT_VALUE_SIZE,
    cost: CostModel | None = None,
) -> CacheResult:
    """Score ``policy`` (a ``CachePolicy``, ``RegimePolicy`` or ``CapacitySchedule``) on
    ``trace`` in front of the store of ``cost`` (default :class:`CostModel`): exact LRU
    hits, store load, miss latency, stalls and memory. A ``store`` alone (no ``cost``) keeps
    the older throughput-only model: that store and no miss latency.

    >>> from regimetune.models import CachePolicy
    >>> t = CacheTrace.from_arrays(ts=[0.0, 0.1, 0.2, 0.3], keys=[1, 2, 1, 2])
    >>> simulate(t, CachePolicy(mode="lru", limit_keys=1)).misses
    4
    >>> simulate(t, CachePolicy()).misses
    2
    """
    if not isinstance(trace, CacheTrace):
        raise InputError(f"expected a CacheTrace, got {type(trace).__name__}")
    if isinstance(value_size, bool) or not isinstance(value_size, int | np.integer) or value_size < 1:
        raise InputError(f"value size must be a positive number of bytes, got {value_size!r}")
    if cost is None:
        cost = CostModel() if store is None else CostModel.from_store(store)
    store = cost.store_for(trace.unavoidable_w, trace.window_s)
    sched = as_schedule(policy, ts=trace.ts, first_ref=trace.first_ref)
    rmiss, wmiss, fill_end, peak = _count(trace, sched)
    lengths = np.full(trace.n_windows, trace.window_s)
    stall = store.stalls((rmiss + trace.writes_w).astype(np.float64), lengths)
    sim_len = lengths + stall + cost.latency_s(rmiss, trace.reads_w + trace.writes_w, trace.window_s)
    return CacheResult(
        requests=trace.n_requests,
        misses=int(rmiss.sum() + wmiss.sum()),
        read_misses=int(rmiss.sum()),
        store_ops=int(rmiss.sum() + trace.writes_w.sum()),
        trace_s=trace.duration_s,
        simulated_s=float(sim_len.sum()),
        peak_keys=peak,
        mean_keys=float(np.dot(fill_end, sim_len) / sim_len.sum()),
        value_size=int(value_size),
        window_read_misses=_readonly(rmiss),
        window_keys=_readonly(fill_end),
        window_stall_s=_readonly(stall),
        window_time_s=_readonly(sim_len),
        window_s=trace.window_s,
    )


def byte_hit_ratio(trace: CacheTrace, policy: CachePolicyLike) -> float | None:
    """Share of the requested bytes served from the cache (``None`` if the trace has no
    request sizes). Exact for schedules whose capacity never grows (static LRU, two-phase);
    right after a growth it counts a request as a hit once its distance is below the new
    limit, before the cache has refilled, so it slightly over-counts there.

    >>> t = CacheTrace.from_arrays(ts=[0.0, 0.1, 0.2, 0.3], keys=[1, 2, 1, 2], sizes=[1, 3, 1, 3])
    >>> from regimetune.models import CachePolicy
    >>> byte_hit_ratio(t, CachePolicy()), byte_hit_ratio(t, CachePolicy(mode="lru", limit_keys=1))
    (0.5, 0.0)
    """
    if trace.sizes is None or trace.sizes.sum() <= 0:
        return None
    sched = as_schedule(policy, ts=trace.ts, first_ref=trace.first_ref)
    hit = trace.dist < sched.cap_at(np.arange(trace.n_requests))
    return float(trace.sizes[hit].sum() / trace.sizes.sum())


__all__ = ["DEFAULT_VALUE_SIZE", "CacheResult", "CacheTrace", "byte_hit_ratio", "simulate"]
