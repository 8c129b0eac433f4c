"""The cache simulator against direct LRU simulations (an OrderedDict that obeys the same
capacity schedule), the store model, and bad inputs."""

from __future__ import annotations

import itertools
import multiprocessing
from collections import OrderedDict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from regimetune.models import CachePolicy, EventBatch, InputError
from regimetune.tuner.cache import (
    COLD,
    UNLIMITED,
    CacheTrace,
    CapacitySchedule,
    RegimePolicy,
    StoreModel,
    dense_ids,
    simulate,
    stack_distances,
)
from regimetune.tuner.cache.stack import _stack_distances


def brute_distances(keys: list[int]) -> list[int]:
    out = []
    for i, k in enumerate(keys):
        prev = [j for j in range(i) if keys[j] == k]
        out.append(COLD if not prev else len(set(keys[prev[-1] + 1 : i])))
    return out


def direct_lru(keys, caps):
    """Per request: miss flag and keys held after it, for capacities ``caps`` (one per
    request; the cache evicts down to the capacity before serving)."""
    cache: OrderedDict[int, None] = OrderedDict()
    miss, held = [], []
    for k, c in zip(keys, caps, strict=True):
        while len(cache) > c:
            cache.popitem(last=False)
        if k in cache:
            cache.move_to_end(k)
            miss.append(False)
        else:
            miss.append(True)
            cache[k] = None
            while len(cache) > c:
                cache.popitem(last=False)
        held.append(len(cache))
    return np.array(miss), np.array(held)


def check_against_direct(trace: CacheTrace, keys, is_write, caps_per_request, result) -> None:
    miss, held = direct_lru(keys, caps_per_request)
    wb = trace.win_bounds
    rmiss = np.add.reduceat(np.append(miss & ~is_write, 0), wb[:-1])[: trace.n_windows]
    rmiss[np.diff(wb) == 0] = 0
    assert result.window_read_misses.tolist() == rmiss.tolist()
    assert result.misses == int(miss.sum())
    held_end = np.where(wb[1:] > 0, held[np.maximum(wb[1:] - 1, 0)], 0)
    assert result.window_keys.tolist() == held_end.tolist()
    assert result.peak_keys == int(held.max())


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 8), min_size=1, max_size=60))
def test_stack_distances_match_brute_force(keys):
    assert stack_distances(np.array(keys, dtype=np.uint64)).tolist() == brute_distances(keys)


def recency_distances(keys) -> list[int]:
    """Stack distances from an explicit LRU recency stack (most recent first)."""
    stack: list[int] = []
    out = []
    for k in keys:
        k = int(k)
        if k in stack:
            d = stack.index(k)
            del stack[d]
            out.append(d)
        else:
            out.append(COLD)
        stack.insert(0, k)
    return out


HUGE = np.uint64(0x9E3779B97F4A7C15)  # odd: multiplying keeps keys distinct, makes them huge


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 6), min_size=100, max_size=400))
def test_stack_distances_survive_position_compaction(keys):
    # few keys, many requests: with at least 64 positions the kernel renumbers them often,
    # in the direct table (small keys) and in the hash table (huge keys)
    want = brute_distances(keys)
    arr = np.array(keys, dtype=np.uint64)
    assert _stack_distances(arr.astype(np.int64), min_cap=64).tolist() == want
    assert _stack_distances(arr * HUGE, min_cap=64).tolist() == want
    assert stack_distances(arr).tolist() == want


@pytest.mark.parametrize("min_cap", [64, 1000, 1 << 16])
def test_direct_and_hashed_stack_distances_match_a_recency_stack(min_cap):
    # a Zipf trace: renumbering (cap 64/1000), hash-table growth, words and tree walks
    rng = np.random.default_rng(min_cap)
    keys = (rng.zipf(1.2, 30_000) % 3000).astype(np.uint64)
    want = recency_distances(keys)
    assert _stack_distances(keys, min_cap=min_cap).tolist() == want
    assert _stack_distances(keys * HUGE, min_cap=min_cap).tolist() == want
    assert _stack_distances(keys.astype(np.int64) - 1500, min_cap=min_cap).tolist() == want  # negative


def test_stack_distances_of_any_integer_dtype():
    rng = np.random.default_rng(3)
    keys = rng.integers(0, 100, 3000)
    want = recency_distances(keys)
    for dtype in (np.uint8, np.int16, np.int32, np.uint32, np.int64, np.uint64):
        got = stack_distances(keys.astype(dtype))
        assert got.dtype == np.int64 and got.tolist() == want
    assert stack_distances(np.array([], dtype=np.int64)).tolist() == []
    with pytest.raises(InputError, match="one-dimensional"):
        stack_distances(np.zeros((2, 2), dtype=np.int64))


def test_dense_ids_hash_and_direct_paths_agree():
    rng = np.random.default_rng(5)
    small = rng.integers(0, 1000, 5000)
    big = small.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)  # same pattern, huge keys
    assert dense_ids(small)[0].tolist() == dense_ids(big)[0].tolist()
    assert dense_ids(small)[1] == len(np.unique(small))


@settings(max_examples=80, deadline=None)
@given(
    keys=st.lists(st.integers(0, 12), min_size=1, max_size=120),
    pieces=st.lists(st.tuples(st.integers(0, 119), st.integers(0, 14)), min_size=0, max_size=6),
    cap0=st.integers(0, 14),
    data=st.data(),
)
def test_any_schedule_matches_direct_simulation(keys, pieces, cap0, data):
    """Shrinking and growing-again schedules, switches inside and at window edges."""
    n = len(keys)
    is_write = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    ts = np.sort(np.array(data.draw(st.lists(st.floats(0, 10), min_size=n, max_size=n))))
    trace = CacheTrace.from_arrays(ts=ts, keys=keys, is_write=is_write, window_s=1.5)
    pieces = sorted((min(s, n - 1), c) for s, c in pieces)
    sched = CapacitySchedule.build([0] + [s for s, _ in pieces], [cap0] + [c for _, c in pieces])
    caps = sched.cap_at(np.arange(n))
    check_against_direct(trace, keys, is_write, caps, simulate(trace, sched))


def test_growth_after_eviction_does_not_restore_evicted_keys():
    # cap 3 holds {2,3,4}; shrink to 1 keeps {4}; growing to 3 again must miss on 3 and 2
    keys = [1, 2, 3, 4, 3, 2]
    trace = CacheTrace.from_arrays(ts=np.arange(6.0), keys=keys, window_s=100)
    sched = CapacitySchedule.build([0, 3, 4], [3, 1, 3])
    naive_hits = int(np.count_nonzero(trace.distances(0, 6) < sched.cap_at(np.arange(6))))
    res = simulate(trace, sched)
    miss, _ = direct_lru(keys, [3, 3, 3, 1, 3, 3])
    assert res.misses == int(miss.sum()) == 6
    assert naive_hits > 0  # "distance < capacity" alone would have counted hits here


def zipf_trace(n=20_000, seed=1, duration=600.0):
    rng = np.random.default_rng(seed)
    keys = rng.zipf(1.3, n) % 3000
    ts = np.sort(rng.uniform(0, duration, n))
    return ts, keys, rng.random(n) < 0.2


@pytest.mark.parametrize("hwm", [1, 50, 400, 10**6])
@pytest.mark.parametrize("limit", [1, 10, 200])
def test_two_phase_matches_switching_lru(hwm, limit):
    ts, keys, wr = zipf_trace()
    trace = CacheTrace.from_arrays(ts=ts, keys=keys, is_write=wr, window_s=7.0)
    policy = CachePolicy(mode="two_phase", limit_keys=limit, high_watermark_keys=hwm)
    # direct: unlimited until the cache holds hwm keys, then the n-key limit
    cache: OrderedDict[int, None] = OrderedDict()
    switched, caps = False, []
    for k in keys:
        caps.append(limit if switched else 10**9)
        cache[k] = None
        if len(cache) >= hwm:
            switched = True
    check_against_direct(trace, keys, wr, np.array(caps), simulate(trace, policy))


def test_two_phase_switch_at_time():
    ts, keys, wr = zipf_trace(n=5000)
    trace = CacheTrace.from_arrays(ts=ts, keys=keys, is_write=wr, window_s=10.0)
    res = simulate(trace, CachePolicy(mode="two_phase", limit_keys=20, switch_time_s=300.0))
    caps = np.where(ts >= 300.0, 20, 10**9)
    check_against_direct(trace, keys, wr, caps, res)


def test_regime_policy_matches_direct_simulation():
    ts, keys, wr = zipf_trace(n=8000)
    trace = CacheTrace.from_arrays(ts=ts, keys=keys, is_write=wr, window_s=5.0)
    starts = np.arange(0, 600, 30.0)
    labels = np.array([0, 0, 1, 1, 2, 0, 2, 2, 1, 3] * 2)
    limits = {0: 500, 1: 5, 2: 60}
    pol = RegimePolicy(
        policies={r: CachePolicy(mode="lru", limit_keys=n) for r, n in limits.items()},
        window_starts_s=starts,
        labels=labels,
        default=CachePolicy(mode="lru", limit_keys=100),
    )
    lab = labels[np.searchsorted(starts, ts, side="right") - 1]
    caps = np.array([limits.get(int(r), 100) for r in lab])
    res = simulate(trace, pol)
    check_against_direct(trace, keys, wr, caps, res)
    assert CapacitySchedule.build([0], [1]).grows is False
    assert pol.schedule(ts=trace.ts, first_ref=trace.first_ref).grows


def test_unlimited_and_static_lru_counts():
    ts, keys, wr = zipf_trace(n=4000)
    trace = CacheTrace.from_arrays(ts=ts, keys=keys, is_write=wr)
    unl = simulate(trace, CachePolicy())
    assert unl.misses == len(np.unique(keys))
    assert unl.peak_keys == trace.n_keys
    small, big = (simulate(trace, CachePolicy(mode="lru", limit_keys=n)) for n in (5, 500))
    assert small.misses > big.misses > unl.misses
    assert small.peak_keys == 5 and small.mean_keys <= 5
    assert big.mean_bytes == pytest.approx(big.mean_keys * 4096)


def test_from_batches_counts_writes():
    b1 = EventBatch.from_columns(ts=[0.0, 1.0], key=[1, 2], op=[0, 1])
    b2 = EventBatch.from_columns(ts=[2.0, 3.0], key=[1, 2], op=[0, 0])
    trace = CacheTrace.from_batches([b1, b2], window_s=2.0)
    assert trace.n_windows == 2 and trace.writes_w.tolist() == [1, 0]
    res = simulate(trace, CachePolicy(mode="lru", limit_keys=1))
    assert res.read_misses == 3 and res.store_ops == 4


# --- the trace streamed in chunks and spooled to disk ---------------------------------


@settings(max_examples=60, deadline=None)
@given(
    keys=st.lists(st.integers(0, 12), min_size=1, max_size=150),
    pieces=st.lists(st.tuples(st.integers(0, 149), st.integers(0, 14)), min_size=0, max_size=6),
    cap0=st.integers(0, 14),
    cuts=st.lists(st.integers(1, 149), max_size=8),
    chunk_rows=st.integers(1, 20),
    data=st.data(),
)
def test_a_trace_pushed_in_batches_and_read_in_small_chunks_matches_direct_simulation(
    keys, pieces, cap0, cuts, chunk_rows, data
):
    """Batch edges inside windows and refill spans; the simulator's reads of the spool cross
    chunk edges (``CHUNK_ROWS`` as small as one request): still the direct LRU's counts."""
    import regimetune.tuner.cache.trace as trace_mod

    n = len(keys)
    is_write = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    ts = np.sort(np.array(data.draw(st.lists(st.floats(0, 10), min_size=n, max_size=n))))
    edges = [0, *sorted({c for c in cuts if c < n}), n]
    batches = [
        EventBatch.from_columns(ts=ts[a:b], key=keys[a:b], op=is_write[a:b].astype(np.uint8))
        for a, b in itertools.pairwise(edges)
    ]
    trace = CacheTrace.from_batches(batches, window_s=1.5)
    pieces = sorted((min(s, n - 1), c) for s, c in pieces)
    sched = CapacitySchedule.build([0] + [s for s, _ in pieces], [cap0] + [c for _, c in pieces])
    old, trace_mod.CHUNK_ROWS = trace_mod.CHUNK_ROWS, chunk_rows  # not a fixture: hypothesis
    try:
        res = simulate(trace, sched)
    finally:
        trace_mod.CHUNK_ROWS = old
    check_against_direct(trace, keys, is_write, sched.cap_at(np.arange(n)), res)
    assert trace.distances(0, n).tolist() == brute_distances(keys)


def test_stack_distances_pushed_in_chunks_match_one_pass():
    from regimetune.tuner.cache.stack import StackDistances

    rng = np.random.default_rng(11)
    keys = (rng.zipf(1.2, 20_000) % 4000).astype(np.uint64) * HUGE  # hash-table growth too
    s = StackDistances(min_cap=64)  # renumbering inside and across chunks
    got = np.concatenate([s.push(c) for c in np.array_split(keys, [1, 7, 5000, 5001, 12_345])])
    assert got.tolist() == recency_distances(keys)
    assert s.n_keys == len(np.unique(keys))


def test_request_times_place_times_as_searchsorted_does(monkeypatch):
    import regimetune.tuner.cache.trace as trace_mod

    monkeypatch.setattr(trace_mod, "TIME_STRIDE", 16)  # many strides, ties across their edges
    rng = np.random.default_rng(2)
    ts = np.sort(np.round(rng.uniform(0, 50, 3000), 1))
    b = trace_mod.TraceBuilder(window_s=5.0)
    for part in np.array_split(np.arange(len(ts)), 7):
        b.push_arrays(ts=ts[part], keys=part)
    times = b.finish().ts
    q = np.concatenate([[-1.0, 0.0, 50.0, 60.0], ts[::37], rng.uniform(-1, 51, 200)])
    for side in ("left", "right"):
        assert times.searchsorted(q, side=side).tolist() == np.searchsorted(ts, q, side=side).tolist()
        assert int(np.searchsorted(times, ts[100], side=side)) == int(np.searchsorted(ts, ts[100], side=side))
    assert len(times) == len(ts) and times.read(10, 20).tolist() == ts[10:20].tolist()


def _finalize(spool) -> None:
    spool._owner()


def test_a_spooled_trace_sent_to_another_process_reads_the_same_files_and_leaves_them():
    import gc
    import pickle

    ts, keys, wr = zipf_trace(n=3000)
    trace = CacheTrace.from_arrays(ts=ts, keys=keys, is_write=wr, window_s=10.0)
    copy = pickle.loads(pickle.dumps(trace))
    pol = CachePolicy(mode="lru", limit_keys=40)
    assert simulate(copy, pol).window_read_misses.tolist() == simulate(trace, pol).window_read_misses.tolist()
    where = trace.spool.dir
    del copy
    gc.collect()
    assert where.exists()  # a copy never deletes its owner's files
    child = multiprocessing.get_context("fork").Process(target=_finalize, args=(trace.spool,))
    child.start()
    child.join()
    assert child.exitcode == 0 and where.exists()  # nor does a forked worker finalizing it
    del trace
    gc.collect()
    assert not where.exists()


def test_byte_hit_ratio_of_a_spooled_trace_counts_sizes_by_capacity(monkeypatch):
    import regimetune.tuner.cache.trace as trace_mod
    from regimetune.tuner.cache.sim import byte_hit_ratio
    from regimetune.tuner.cache.trace import TraceBuilder

    ts, keys, wr = zipf_trace(n=5000)
    sizes = (np.asarray(keys) % 7 + 1).astype(np.float64)
    trace = CacheTrace.from_arrays(ts=ts, keys=keys, is_write=wr, window_s=10.0, sizes=sizes)
    miss, _ = direct_lru(keys, [30] * len(keys))
    want = sizes[~miss].sum() / sizes.sum()
    assert byte_hit_ratio(trace, CachePolicy(mode="lru", limit_keys=30)) == pytest.approx(want, rel=1e-12)
    assert byte_hit_ratio(CacheTrace.from_arrays(ts=ts, keys=keys), CachePolicy()) is None
    # sizes that appear only in a later batch: the earlier requests count as size 0
    late = np.where(np.arange(len(keys)) < 2000, 0.0, sizes)
    b = TraceBuilder(window_s=10.0)
    for part in np.array_split(np.arange(len(keys)), 5):
        b.push_arrays(ts=ts[part], keys=np.asarray(keys)[part], is_write=wr[part], sizes=late[part])
    want = late[~miss].sum() / late.sum()
    assert byte_hit_ratio(b.finish(), CachePolicy(mode="lru", limit_keys=30)) == pytest.approx(
        want, rel=1e-12
    )
    # a schedule of several pieces, read in chunks that cut them: distance below the limit
    monkeypatch.setattr(trace_mod, "CHUNK_ROWS", 333)
    sched = CapacitySchedule.build([0, 700, 1500, 3000], [30, 5, 200, UNLIMITED])
    hit = stack_distances(keys) < sched.cap_at(np.arange(len(keys)))
    assert byte_hit_ratio(trace, sched) == pytest.approx(sizes[hit].sum() / sizes.sum(), rel=1e-12)


# --- the store model -------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0, 50), min_size=1, max_size=40), st.floats(1, 30))
def test_store_stalls_exactly_when_demand_exceeds_capacity(demand, cap):
    d = np.array(demand)
    stall = StoreModel(capacity_ops_s=cap, buffer_s=0.0).stalls(d, np.ones(len(d)))
    # with no buffer each window stands alone: stall iff its demand exceeds one second of work
    assert np.array_equal(stall > 0, d > cap)
    np.testing.assert_allclose(stall, np.maximum(d - cap, 0) / cap)


def test_store_buffer_carries_backlog_across_windows():
    store = StoreModel(capacity_ops_s=10.0, buffer_s=1.0)
    # 15 ops: 5 left over, within the 10-op buffer; next window 14 + 5 = 19 -> 9 left, no
    # stall; then 16 + 9 = 25 -> 15 left, 5 beyond the buffer = 0.5 s of stall
    assert store.stalls(np.array([15.0, 14.0, 16.0, 0.0]), np.ones(4)).tolist() == [0, 0, 0.5, 0]


def test_efficiency_drops_when_a_small_cache_overloads_the_store():
    ts, keys, wr = zipf_trace(n=20_000, duration=100.0)
    trace = CacheTrace.from_arrays(ts=ts, keys=keys, is_write=wr)
    store = StoreModel(capacity_ops_s=80.0, buffer_s=0.0)
    unl = simulate(trace, CachePolicy(), store=store)
    tiny = simulate(trace, CachePolicy(mode="lru", limit_keys=2), store=store)
    assert unl.efficiency <= 1.0 and tiny.efficiency < unl.efficiency
    assert tiny.simulated_s == pytest.approx(trace.duration_s + tiny.window_stall_s.sum())


# --- bad input -------------------------------------------------------------------------


def test_bad_inputs_raise_project_errors():
    with pytest.raises(InputError, match="empty trace"):
        CacheTrace.from_arrays(ts=[], keys=[])
    with pytest.raises(InputError, match="time order"):
        CacheTrace.from_arrays(ts=[1.0, 0.0], keys=[1, 2])
    with pytest.raises(InputError, match="window length"):
        CacheTrace.from_arrays(ts=[0.0], keys=[1], window_s=0)
    with pytest.raises(InputError, match="longer windows"):
        CacheTrace.from_arrays(ts=[0.0, 1e12], keys=[1, 2], window_s=1.0)
    with pytest.raises(InputError, match="integers"):
        CacheTrace.from_arrays(ts=[0.0], keys=[1.5])
    with pytest.raises(InputError, match=">= 0 keys"):
        CapacitySchedule.build([0], [-3])
    with pytest.raises(InputError, match="begin at 0"):
        CapacitySchedule.build([2], [3])
    with pytest.raises(InputError, match="positive number of ops"):
        StoreModel(capacity_ops_s=-1)
    trace = CacheTrace.from_arrays(ts=[0.0, 1.0], keys=[1, 2])
    with pytest.raises(InputError, match="CachePolicy"):
        simulate(trace, {"mode": "lru"})  # type: ignore[arg-type]
    with pytest.raises(InputError, match="value size"):
        simulate(trace, CachePolicy(), value_size=0)
    with pytest.raises(ValueError, match="limit_keys"):
        CachePolicy(mode="lru")
    with pytest.raises(InputError, match="labels"):
        RegimePolicy(policies={}, window_starts_s=np.array([0.0, 1.0]), labels=np.array([0]))
    assert UNLIMITED > 10**15
