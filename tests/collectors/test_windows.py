"""The windowing aggregator against a brute-force Python computation, batching invariance,
per-key counts, sketches, and saving frames."""

from __future__ import annotations

import itertools
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from regimetune.collectors import WindowAggregator, read_windows, window_frame, write_windows
from regimetune.collectors._hashing import bucket_of
from regimetune.models import ConfigError, EventBatch, InputError, WindowStats


def _brute(b: EventBatch, window_s: float, top_k: int, n_buckets: int) -> list[dict[str, object]]:
    """Per-window statistics the slow, obvious way."""
    ev = list(b.events())
    origin = math.floor(ev[0].ts / window_s) * window_s
    last = math.floor((ev[-1].ts - origin) / window_s)
    seen: set[int] = set()
    out = []
    for w in range(last + 1):
        inw = [e for e in ev if math.floor((e.ts - origin) / window_s) == w]
        cnt = Counter(e.key for e in inw)
        seen |= set(cnt)
        tot = sum(cnt.values())
        ent = -sum(c / tot * math.log2(c / tot) for c in cnt.values()) if tot else 0.0
        top = sum(sorted(cnt.values(), reverse=True)[:top_k]) / tot if tot else 0.0
        labels = Counter(e.label for e in inw)
        label = min(labels, key=lambda lv: (-labels[lv], lv)) if labels else -1
        load = [0.0] * n_buckets
        size = [0.0] * n_buckets
        for e in inw if n_buckets else []:
            bk = (
                e.bucket
                if 0 <= e.bucket < n_buckets
                else int(bucket_of(np.array([e.key], np.uint64), n_buckets)[0])
            )
            load[bk] += 1
            size[bk] += e.size
        # edges: the first window starts at the first event, the last ends at the last event
        start = ev[0].ts if w == 0 else origin + w * window_s
        length = origin + (w + 1) * window_s - start
        if w == last and ev[-1].ts > start:
            length = ev[-1].ts - start
        out.append(
            {
                "index": w,
                "start": start,
                "length": length,
                "reads": sum(1 for e in inw if e.op == 0),
                "writes": sum(1 for e in inw if e.op == 1),
                "active_keys": len(cnt),
                "keyspace_size": len(seen),
                "topk_share": top,
                "entropy": ent,
                "label": label,
                "bucket_load": tuple(load) if n_buckets else (),
                "bucket_bytes": tuple(size) if n_buckets else (),
            }
        )
    return out


def _check(got: list[WindowStats], want: list[dict[str, object]]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        for name, val in w.items():
            if isinstance(val, float):
                assert getattr(g, name) == pytest.approx(val, abs=1e-9), name
            elif isinstance(val, tuple):
                assert getattr(g, name) == pytest.approx(val), name
            else:
                assert getattr(g, name) == val, (name, g.index)
        assert g.exact


@st.composite
def traces(draw: st.DrawFn) -> EventBatch:
    n = draw(st.integers(1, 120))
    gaps = draw(st.lists(st.sampled_from([0.0, 0.01, 0.3, 1.0, 2.7]), min_size=n, max_size=n))
    t0 = draw(st.floats(-5, 5))
    ts = t0 + np.cumsum(gaps)
    return EventBatch.from_columns(
        ts=ts,
        key=draw(st.lists(st.integers(0, 12), min_size=n, max_size=n)),
        op=draw(st.lists(st.integers(0, 1), min_size=n, max_size=n)),
        size=draw(st.lists(st.integers(0, 100), min_size=n, max_size=n)),
        bucket=draw(st.lists(st.integers(-1, 3), min_size=n, max_size=n)),
        label=draw(st.lists(st.integers(-1, 3), min_size=n, max_size=n)),
    )


@settings(max_examples=60, deadline=None)
@given(
    b=traces(),
    window_s=st.sampled_from([0.5, 1.0, 3.0]),
    top_k=st.integers(1, 4),
    n_buckets=st.sampled_from([0, 3]),
)
def test_windows_match_brute_force(b: EventBatch, window_s: float, top_k: int, n_buckets: int) -> None:
    agg = WindowAggregator(window_s, top_k=top_k, n_buckets=n_buckets)
    got = agg.push(b) + agg.flush()
    _check(got, _brute(b, window_s, top_k, n_buckets))


@settings(max_examples=40, deadline=None)
@given(b=traces(), cuts=st.lists(st.integers(0, 120), max_size=6))
def test_batch_at_a_time_equals_all_at_once(b: EventBatch, cuts: list[int]) -> None:
    whole = WindowAggregator(1.0, n_buckets=2)
    want = whole.push(b) + whole.flush()
    agg = WindowAggregator(1.0, n_buckets=2)
    got: list[WindowStats] = []
    edges = sorted({0, len(b), *(c for c in cuts if c < len(b))})
    for s, e in itertools.pairwise(edges):
        got += agg.push(b.slice(s, e))
    got += agg.flush()
    assert got == want


@settings(max_examples=40, deadline=None)
@given(b=traces(), cut=st.integers(0, 120), limit=st.sampled_from([0, 3, 1_000_000]))
def test_a_restored_snapshot_continues_exactly(b: EventBatch, cut: int, limit: int) -> None:
    cut = min(cut, len(b))
    whole = WindowAggregator(1.0, n_buckets=2, exact_key_limit=limit)
    want = whole.push(b.slice(0, cut)) + whole.push(b.slice(cut, len(b))) + whole.flush()
    agg = WindowAggregator(1.0, n_buckets=2, exact_key_limit=limit)
    got = agg.push(b.slice(0, cut))
    meta, arrays = agg.to_state()
    # as the store hands them back: read-only views of one byte string
    arrays = {k: np.frombuffer(v.tobytes(), dtype=v.dtype) for k, v in arrays.items()}
    again = WindowAggregator.from_state(meta, arrays)
    got += again.push(b.slice(cut, len(b))) + again.flush()
    assert got == want
    assert again.keyspace_size == whole.keyspace_size and again.exact == whole.exact
    assert sorted(again.hot_keys(1000)) == sorted(whole.hot_keys(1000))  # ties may come in any order


def test_big_batches_split_anywhere_give_identical_frames() -> None:
    rng = np.random.default_rng(5)
    n = 200_000
    b = EventBatch.from_columns(
        ts=np.sort(rng.random(n) * 300), key=rng.integers(0, 50_000, n), op=rng.integers(0, 2, n)
    )
    one = window_frame([b])
    pieces = [b.slice(i, min(i + 7_777, n)) for i in range(0, n, 7_777)]
    many = window_frame(pieces)
    for col in one.columns:
        np.testing.assert_array_equal(one[col], many[col], err_msg=col)


def test_empty_windows_between_events_are_emitted() -> None:
    b = EventBatch.from_columns(ts=[0.2, 5.5], key=[1, 2])
    f = window_frame([b])
    assert f["index"].tolist() == [0, 1, 2, 3, 4, 5]
    assert f["reads"].tolist() == [1, 0, 0, 0, 0, 1]
    assert f["keyspace_size"].tolist() == [1, 1, 1, 1, 1, 2]
    assert f["label"].tolist() == [-1] * 6


def test_late_events_count_in_the_open_window() -> None:
    agg = WindowAggregator(1.0)
    closed = agg.push(EventBatch.from_columns(ts=[0.1, 1.5], key=[1, 2]))
    assert [w.reads for w in closed] == [1]
    agg.push(EventBatch.from_columns(ts=[0.9, 1.7], key=[3, 4]))  # 0.9 is late
    (w1,) = agg.flush()
    assert w1.index == 1 and w1.reads == 3 and w1.active_keys == 3


def test_push_counts_equals_pushing_the_events() -> None:
    ev = EventBatch.from_columns(ts=[0.1, 0.2, 0.3, 2.1, 2.2], key=[5, 5, 6, 7, 5], op=[0, 0, 1, 0, 1])
    a = WindowAggregator(1.0, n_buckets=4)
    want = a.push(ev) + a.flush()
    c = WindowAggregator(1.0, n_buckets=4)
    got = c.push_counts(0.0, [5, 6], reads=[2, 0], writes=[0, 1])
    got += c.push_counts(2.0, [7, 5], reads=[1, 0], writes=[0, 1])
    got += c.flush()
    assert [(w.reads, w.writes, w.active_keys, w.keyspace_size, w.entropy, w.bucket_load) for w in got] == [
        (w.reads, w.writes, w.active_keys, w.keyspace_size, w.entropy, w.bucket_load) for w in want
    ]
    with pytest.raises(InputError, match="already closed"):
        c.push_counts(0.0, [1], reads=[1])
    with pytest.raises(InputError, match="equal lengths"):
        c.push_counts(9.0, [1, 2], reads=[1])
    with pytest.raises(InputError, match=">= 0"):
        c.push_counts(9.0, [1], reads=[-1])
    with pytest.raises(InputError, match="bucket_load"):
        c.push_counts(9.0, [1], reads=[1], bucket_load=[1.0])


def test_bad_parameters_are_config_errors() -> None:
    b = EventBatch.from_columns(ts=[0.0], key=[1])
    for kw in ({"window_s": 0}, {"window_s": float("nan")}, {"top_k": 0}, {"n_buckets": -1}):
        with pytest.raises(ConfigError):
            WindowAggregator(**kw).push(b)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="no events"):
        window_frame([])


def test_keyspace_switches_to_a_sketch_beyond_the_limit() -> None:
    rng = np.random.default_rng(1)
    keys = rng.permutation(200_000).astype(np.uint64)
    i = np.arange(len(keys))
    b = EventBatch.from_columns(ts=i // 10_000 + (i % 10_000) / 10_001, key=keys)
    agg = WindowAggregator(1.0, exact_key_limit=55_000)
    ws = []
    for i in range(0, len(keys), 10_000):  # one second per batch
        ws += agg.push(b.slice(i, i + 10_000))
    ws += agg.flush()
    exact = [w.exact for w in ws]
    # the set switches to a sketch once a closed window takes it past the limit
    assert exact[:6] == [True] * 6 and not any(exact[6:])
    assert [w.keyspace_size for w in ws[:6]] == [10_000 * (i + 1) for i in range(6)]
    assert all(w.active_keys == 10_000 for w in ws)  # per-window counts stay exact
    assert ws[-1].keyspace_size == pytest.approx(200_000, rel=0.03)
    lo, hi = agg.keyspace_bounds(3)
    assert lo <= 200_000 <= hi


@pytest.mark.slow
def test_sketch_error_within_the_stated_bound_on_millions_of_keys() -> None:
    agg = WindowAggregator(1.0, exact_key_limit=100_000)
    n, per = 4_000_000, 500_000
    for i in range(0, n, per):
        k = np.arange(i, i + per, dtype=np.uint64) * np.uint64(2654435761)
        agg.push(EventBatch.from_columns(ts=np.linspace(i / per, i / per + 0.999, per), key=k))
    agg.flush()
    lo, hi = agg.keyspace_bounds(2)
    assert lo <= n <= hi
    assert abs(agg.keyspace_size - n) / n < 3 * 1.04 / math.sqrt(2**14)


@pytest.mark.parametrize("name", ["w.csv", "w.parquet"])
def test_frame_round_trip(tmp_path: Path, name: str) -> None:
    rng = np.random.default_rng(2)
    b = EventBatch.from_columns(
        ts=np.sort(rng.random(3000) * 30), key=rng.integers(0, 300, 3000), size=rng.integers(1, 9, 3000)
    )
    f = window_frame([b], n_buckets=3, top_k=5)
    write_windows(f, tmp_path / name)
    g = read_windows(tmp_path / name)
    for col in f.columns:
        np.testing.assert_array_equal(f[col], g[col], err_msg=col)
    np.testing.assert_array_equal(f.bucket_load, g.bucket_load)
    np.testing.assert_array_equal(f.bucket_bytes, g.bucket_bytes)
    with pytest.raises(ConfigError):
        write_windows(f, tmp_path / "w.txt")


def test_hot_keys_find_the_trace_wide_heavy_hitters() -> None:
    rng = np.random.default_rng(9)
    n = 300_000
    keys = rng.integers(0, 200_000, n)
    hot = rng.random(n) < 0.2
    keys[hot] = rng.choice([11, 22, 33], int(hot.sum()), p=[0.5, 0.3, 0.2])
    b = EventBatch.from_columns(ts=np.sort(rng.random(n) * 100), key=keys)
    agg = WindowAggregator(1.0, top_k=5)
    agg.push(b)
    agg.flush()
    got = agg.hot_keys(3)
    assert [k for k, _ in got] == [11, 22, 33]
    truth = {k: int((keys == k).sum()) for k in (11, 22, 33)}
    for k, est in got:
        assert est == truth[k]  # always in their windows' top 5, so counted exactly
    assert WindowAggregator().hot_keys() == []


def test_a_huge_jump_in_time_is_refused() -> None:
    agg = WindowAggregator(1.0)
    agg.push(EventBatch.from_columns(ts=[0.0], key=[1]))
    with pytest.raises(InputError, match="time-unit"):
        agg.push(EventBatch.from_columns(ts=[1e12], key=[1]))


def test_edge_windows_cover_only_the_time_of_the_trace() -> None:
    # a trace from t=3.7 s to t=31.2 s at 100 reads/s, 10 s windows: [3.7, 10), [10, 20), [20, 30), [30, 31.2)
    ts = np.arange(3.7, 31.2, 0.01)
    b = EventBatch.from_columns(ts=ts, key=np.zeros(len(ts), dtype=np.int64))
    f = window_frame([b], window_s=10.0, end=31.2)
    assert f["index"].tolist() == [0, 1, 2, 3]
    np.testing.assert_allclose(f["start"], [3.7, 10.0, 20.0, 30.0])
    np.testing.assert_allclose(f["length"], [6.3, 10.0, 10.0, 1.2])
    np.testing.assert_allclose(f.reads_per_s, 100.0, rtol=0.02)  # honest rates, edges included
    # without the end, the last window ends at the last event; never beyond its window
    f2 = window_frame([b], window_s=10.0)
    assert f2["length"][-1] == pytest.approx(ts[-1] - 30.0)
    agg = WindowAggregator(10.0)
    agg.push(b)
    (w,) = agg.flush(end=1e6)
    assert w.length == 10.0
    late = WindowAggregator(10.0)
    late.push(b)
    with pytest.raises(InputError, match="before"):
        late.flush(end=31.0)


def test_edge_windows_survive_a_snapshot_and_counts_cover_whole_windows() -> None:
    b = EventBatch.from_columns(ts=[3.7, 4.0, 12.5, 14.0], key=[1, 2, 3, 4])
    agg = WindowAggregator(10.0)
    agg.push(b.slice(0, 2))
    again = WindowAggregator.from_state(*agg.to_state())
    got = again.push(b.slice(2, 4)) + again.flush()
    assert [(w.start, w.length) for w in got] == [(3.7, pytest.approx(6.3)), (10.0, 4.0)]
    c = WindowAggregator(10.0)
    got = c.push_counts(0.0, [1], reads=[5]) + c.push_counts(10.0, [2], reads=[5]) + c.flush()
    assert [(w.start, w.length) for w in got] == [(0.0, 10.0), (10.0, 10.0)]


def test_a_window_of_more_distinct_keys_than_the_fold_is_folded_a_few_times(monkeypatch) -> None:
    """The open window folds its raw keys into counts at a threshold; with more distinct keys
    than that it folded again at every batch (a window of 8M keys cost a second per batch)."""
    from regimetune.collectors import windows

    monkeypatch.setattr(windows, "_COMPACT_AT", 64)
    agg = WindowAggregator(window_s=60.0)
    folds = 0
    for i in range(200):  # 2000 distinct keys, each read twice, 10 a batch
        keys = np.arange(i * 10, i * 10 + 10, dtype=np.uint64)
        agg.push_counts(0.0, np.concatenate([keys, keys]), np.ones(20, np.int64))
        folds += len(agg._open.keys) == 1 and agg._open.n > 20
    assert folds <= 12  # geometric (each fold leaves 1.5x the keys of the last), not one a batch
    (w,) = agg.push_counts(60.0, [1], [1])
    assert (w.active_keys, w.reads) == (2000, 4000)
