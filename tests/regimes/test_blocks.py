"""The detector's clock: windows pooled into blocks, the same at every window length."""

from __future__ import annotations

import numpy as np
import pytest

from regimetune.regimes.blocks import BlockPooler, median3


def _pool() -> BlockPooler:
    return BlockPooler(log1p=(True, False), units=(1.0, 1.0), block_s=60.0)


def _windows(
    window_s: float, seconds: float, rng: np.random.Generator
) -> list[tuple[float, float, np.ndarray]]:
    """Windows over ``seconds`` of a trace whose reads/s change every second."""
    rate = rng.uniform(100, 200, int(seconds))
    share = rng.uniform(0, 1, int(seconds))
    out = []
    for s in np.arange(0.0, seconds, window_s):
        sl = slice(int(s), int(s + window_s))
        out.append((s, window_s, np.array([np.log1p(rate[sl].mean()), share[sl].mean()])))
    return out


def test_a_rate_pools_to_the_same_block_at_every_window_length() -> None:
    rng = np.random.default_rng(0)
    per_w = {}
    for w in (1.0, 10.0, 30.0, 60.0):
        pool = _pool()
        blocks = []
        for i, (s, n, x) in enumerate(_windows(w, 600.0, np.random.default_rng(0))):
            blocks += pool.add(i, s, n, x, 0.0)
        per_w[w] = np.array([b.values for b in blocks])
    for w in (10.0, 30.0, 60.0):
        np.testing.assert_allclose(per_w[w], per_w[1.0], rtol=1e-12)
    assert per_w[60.0].shape == (10, 2)
    assert rng is not None


def test_a_block_completes_at_its_end_or_when_a_later_one_begins() -> None:
    pool = _pool()
    x = np.array([np.log1p(10.0), 0.5])
    assert pool.add(0, 0.0, 30.0, x, 0.0) == []
    assert [b.clock for b in pool.add(1, 30.0, 30.0, x, 0.0)] == [0]  # reached the block's end
    assert pool.add(2, 60.0, 20.0, x, 0.0) == []
    done = pool.add(3, 130.0, 10.0, x, 0.0)  # a gap: block 1 ends when block 2's window arrives
    assert [b.clock for b in done] == [1] and done[0].first_window == 2
    assert [b.clock for b in pool.flush()] == [2] and pool.clock == 2  # flushed, not closed


def test_a_missing_value_is_left_out_of_its_block() -> None:
    pool = _pool()
    pool.add(0, 0.0, 30.0, np.array([np.nan, 0.2]), 0.0)
    (b,) = pool.add(1, 30.0, 30.0, np.array([np.log1p(20.0), 0.4]), 0.0)
    assert np.expm1(b.values[0]) == pytest.approx(20.0) and b.values[1] == pytest.approx(0.3)


def test_a_frame_pools_like_its_windows_one_by_one() -> None:
    wins = _windows(7.0, 900.0, np.random.default_rng(1))  # windows that straddle blocks
    one = _pool()
    by_one = [(i, b) for i, (s, n, x) in enumerate(wins) for b in one.add(i, s, n, x, 10.0 * i)]
    frame = _pool()
    arr = np.array([x for _, _, x in wins])
    by_frame = frame.add_frame(
        np.arange(len(wins)),
        np.array([s for s, _, _ in wins]),
        np.array([n for _, n, _ in wins]),
        arr,
        10.0 * np.arange(len(wins)),
    )
    assert [(i, b.clock) for i, b in by_one] == [(i, b.clock) for i, b in by_frame]
    for (_, a), (_, b) in zip(by_one, by_frame, strict=True):
        np.testing.assert_allclose(a.values, b.values, rtol=1e-12)
    a, b = one.to_state(), frame.to_state()
    assert (a["clock"], a["first_window"]) == (b["clock"], b["first_window"])
    np.testing.assert_allclose(a["sums"], b["sums"], rtol=1e-12)


def test_the_keyspace_growth_is_keys_added_between_block_ends() -> None:
    pool = BlockPooler(log1p=(True,), units=(2.0,), block_s=60.0, growth=0)
    x = np.array([np.nan])  # the window's own growth is not read: the keyspace is
    (first,) = pool.add(0, 0.0, 60.0, x, 100.0)
    assert np.isnan(first.values[0])  # nothing before the first block to count from
    pool.add(1, 60.0, 30.0, x, 130.0)
    (b,) = pool.add(2, 90.0, 30.0, x, 160.0)
    assert np.expm1(2.0 * b.values[0]) == pytest.approx(1.0)  # 60 keys in 60 s


def test_the_running_median_takes_out_one_block_not_a_step() -> None:
    a, spike, b = np.array([1.0]), np.array([9.0]), np.array([1.1])
    assert median3(a, spike, b)[0] == 1.1
    assert median3(a, np.array([5.0]), np.array([5.0]))[0] == 5.0  # a step's first block stays
    assert median3(None, spike, b)[0] == 9.0  # no neighbour: as it is
