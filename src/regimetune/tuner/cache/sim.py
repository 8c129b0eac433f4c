"""Exact trace-driven simulation of an LRU cache tier under any capacity schedule.

``CacheTrace`` holds the stack distances, computed once; ``simulate`` then scores a policy with
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

Counts per window come from each window's sorted distances (reads, then writes), so a window
under one capacity costs one binary search per group; only windows cut by a switch or a
refill span are counted request by request. The trace's per-request data is read from its
spool a chunk at a time (see :mod:`regimetune.tuner.cache.trace`), so a simulation holds at
most ``CHUNK_ROWS`` requests in memory.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from regimetune.models.errors import InputError
from regimetune.tuner.cache.cost import CostModel
from regimetune.tuner.cache.schedule import CachePolicyLike, CapacitySchedule, as_schedule
from regimetune.tuner.cache.store import StoreModel
from regimetune.tuner.cache.trace import DIST_COLD, CacheTrace, _readonly

DEFAULT_VALUE_SIZE = 4096
"""Bytes per cached value: the paper's 10-key cache held 40 KB."""


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
def _refill(codes, off, st, starts, caps, win_bounds, rmiss, wmiss, fill_end):  # pragma: no cover
    # Step request by request from a growth at request a until the cache has refilled, over
    # the chunk ``codes`` of requests from ``off`` on; the state carries over to the next
    # chunk: st = (j, fill, distinct, p, w, peak, a, done).
    j, fill, distinct, p, w, peak, a = st[0], st[1], st[2], st[3], st[4], st[5], st[6]
    n = win_bounds[-1]
    n_win = win_bounds.shape[0] - 1
    end = off + codes.shape[0]
    done = False
    while j < end:
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
            done = True
            break
        code = codes[j - off]
        d = np.int64(code >> 1)
        if d >= fill:
            if code & 1:
                wmiss[w] += 1
            else:
                rmiss[w] += 1
            fill += 1
            if d == DIST_COLD:
                distinct += 1
        if fill > peak:
            peak = fill
        j += 1
    if done or j >= n:
        done = True
        while w < n_win and win_bounds[w + 1] <= j:
            if j - 1 >= a:
                fill_end[w] = fill
            w += 1
    st[0], st[1], st[2], st[3], st[4], st[5], st[7] = j, fill, distinct, p, w, peak, done


def _refill_spans(
    trace: CacheTrace, sched: CapacitySchedule, rmiss: np.ndarray, wmiss: np.ndarray, fill_end: np.ndarray
) -> tuple[np.ndarray, np.ndarray, int]:
    """Run the refill kernel after every growth that finds the cache short of its limit,
    reading the requests from the growth on until the cache has caught up."""
    starts, caps = sched.starts, sched.caps
    n = trace.n_requests
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
        w = int(np.searchsorted(trace.win_bounds, a, side="right")) - 1
        st = np.array([a, fill, distinct, p - 1, w, fill, a, 0], dtype=np.int64)
        for lo, codes in trace.codes(a, n, first_rows=1 << 16):
            _refill(codes, lo, st, starts, caps, trace.win_bounds, rmiss, wmiss, fill_end)
            if st[7]:
                break
        spans.append((a, int(st[0])))
        peak = max(peak, int(st[5]))
        covered = int(st[0])
    arr = np.array(spans, dtype=np.int64).reshape(-1, 2)
    return arr[:, 0], arr[:, 1], peak


@numba.njit(cache=True, nogil=True)
def _count_clean(srt, off, clean, caps, win_bounds, reads_w, rmiss, wmiss):  # pragma: no cover
    # Per clean window: hits = sorted distances below the capacity, by a binary search in
    # each of the window's two groups (reads, then writes) of the chunk ``srt`` (from ``off``).
    for i in range(clean.shape[0]):
        w = clean[i]
        c = caps[i]
        mid_w = win_bounds[w] + reads_w[w]
        for op in range(2):
            g0 = (win_bounds[w] if op == 0 else mid_w) - off
            lo = g0
            hi = (mid_w if op == 0 else win_bounds[w + 1]) - off
            size = hi - lo
            while lo < hi:
                mid = (lo + hi) >> 1
                if np.int64(srt[mid]) < c:
                    lo = mid + 1
                else:
                    hi = mid
            if op == 0:
                rmiss[w] = size - (lo - g0)
            else:
                wmiss[w] = size - (lo - g0)


@numba.njit(cache=True, nogil=True)
def _count_dirty(
    codes, off, win_bounds, dirty, starts, caps, span_a, span_k, rmiss, wmiss
):  # pragma: no cover
    # Windows cut by a switch or a refill span: step through their regular requests (of the
    # chunk ``codes``, from request ``off``).
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
                code = codes[r - off]
                if np.int64(code >> 1) >= c:
                    if code & 1:
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
    wb = trace.win_bounds
    w_lo, w_hi = wb[:-1], wb[1:]
    # a window is clean if no cut falls strictly inside it and it does not start in a span
    cut_w = np.searchsorted(wb, cuts, side="right") - 1
    inner = cuts > w_lo[cut_w]
    dirty = np.zeros(n_win, dtype=bool)
    dirty[cut_w[inner]] = True
    dirty |= in_span(w_lo) & (w_hi > w_lo)
    clean = np.flatnonzero(~dirty)
    clean_caps = sched.cap_at(w_lo[clean])
    dirty_w = np.flatnonzero(dirty)
    for w0, w1 in trace.window_batches(np.flatnonzero(w_hi > w_lo)):
        c0, c1 = np.searchsorted(clean, [w0, w1])
        if c1 > c0:
            srt = trace.spool.read("sorted", wb[w0], wb[w1])
            _count_clean(srt, wb[w0], clean[c0:c1], clean_caps[c0:c1], wb, trace.reads_w, rmiss, wmiss)
        d0, d1 = np.searchsorted(dirty_w, [w0, w1])
        if d1 > d0:
            lo = wb[dirty_w[d0]]
            codes = trace.spool.read("code", lo, wb[dirty_w[d1 - 1] + 1])
            _count_dirty(
                codes, lo, wb, dirty_w[d0:d1], sched.starts, sched.caps, span_a, span_k, rmiss, wmiss
            )
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
    if not trace.has_sizes:
        return None
    sched = as_schedule(policy, ts=trace.ts, first_ref=trace.first_ref)
    starts, caps = sched.starts, np.minimum(sched.caps, trace.n_keys)  # a first reference never hits
    hit = 0.0
    for lo, codes in trace.codes(0, trace.n_requests):
        hi = lo + len(codes)
        p0 = int(np.searchsorted(starts, lo, side="right")) - 1  # the pieces over [lo, hi)
        p1 = int(np.searchsorted(starts, hi, side="left"))
        cap = np.repeat(caps[p0:p1], np.diff(np.concatenate([[lo], starts[p0 + 1 : p1], [hi]])))
        hit += float(trace.sizes(lo, hi)[(codes >> np.uint32(1)) < cap].sum())
    return hit / trace.size_total


__all__ = ["DEFAULT_VALUE_SIZE", "CacheResult", "CacheTrace", "byte_hit_ratio", "simulate"]
