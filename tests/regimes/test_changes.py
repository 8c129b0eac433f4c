"""The change test alone: the least-cost partition of blocks into lines, and the noise it
reads them with."""

from __future__ import annotations

import numpy as np
import pytest

from regimetune.regimes.changes import Partition, block_noise


def _partition(
    y: np.ndarray, var: float | np.ndarray, penalty: float = 20.0, lines: bool = True
) -> Partition:
    y = y.reshape(len(y), -1)
    p = Partition(d=y.shape[1], penalty=penalty, lines=lines)
    inv = 1.0 / np.broadcast_to(np.asarray(var, dtype=float), (y.shape[1],))
    for row in y:
        p.push(row, inv)
    return p


def test_a_step_is_cut_where_it_is() -> None:
    rng = np.random.default_rng(0)
    y = np.r_[np.zeros(40), np.full(40, 0.5)] + rng.normal(0, 0.05, 80)
    assert _partition(y, 0.05**2).segments() == [(0, 40), (40, 80)]


def test_noise_alone_is_one_segment() -> None:
    rng = np.random.default_rng(1)
    for seed in range(5):
        y = np.random.default_rng(seed).normal(0, 0.05, 200)
        assert _partition(y, 0.05**2).segments() == [(0, 200)]
    assert rng is not None


def test_a_line_is_one_segment_and_a_bend_is_two() -> None:
    rng = np.random.default_rng(2)
    t = np.arange(120.0)
    line = 1.0 - 0.01 * t + rng.normal(0, 0.02, 120)
    assert _partition(line, 0.02**2).segments() == [(0, 120)]
    # a decline that turns level at block 60 (no step): the cut is at the bend
    bent = np.where(t < 60, 1.0 - 0.01 * t, 0.4) + rng.normal(0, 0.02, 120)
    segs = _partition(bent, 0.02**2).segments()
    assert len(segs) == 2 and abs(segs[1][0] - 60) <= 6  # two free lines date a bend loosely
    # a level reading (no slope) cuts the same decline into a staircase
    assert len(_partition(bent, 0.02**2, lines=False).segments()) > 2


def test_the_variance_sets_what_is_a_change() -> None:
    y = np.r_[np.zeros(30), np.full(30, 0.05)] + np.tile([0.01, -0.01], 30)
    assert len(_partition(y, 0.01**2).segments()) == 2
    assert len(_partition(y, 0.1**2).segments()) == 1  # a step well inside the wander allowed


def test_freezing_keeps_the_cuts_and_forgets_the_blocks_before() -> None:
    rng = np.random.default_rng(3)
    y = np.r_[np.zeros(30), np.full(30, 1.0), np.zeros(30)] + rng.normal(0, 0.05, 90)
    p = _partition(y[:50], 0.05**2)
    assert p.segments() == [(0, 30), (30, 50)]
    p.freeze(30, np.array([1 / 0.05**2]))
    assert p.origin == 30 and p.n == 20
    for row in y[50:]:
        p.push(np.array([row]), np.array([1 / 0.05**2]))
    assert p.segments() == [(30, 60), (60, 90)]


def test_the_state_round_trips() -> None:
    rng = np.random.default_rng(4)
    y = np.r_[np.zeros(30), np.full(30, 1.0)] + rng.normal(0, 0.05, 60)
    p = _partition(y[:45], 0.05**2)
    q = Partition.from_state(1, p.penalty, True, p.to_state())
    for row in y[45:]:
        p.push(np.array([row]), np.array([400.0]))
        q.push(np.array([row]), np.array([400.0]))
    assert p.segments() == q.segments() == [(0, 30), (30, 60)]


@pytest.mark.parametrize("sd", [0.01, 0.1])
def test_block_noise_reads_the_noise_through_a_trend_and_a_few_steps(sd: float) -> None:
    rng = np.random.default_rng(5)
    t = np.arange(600.0)
    y = 0.002 * t + np.where(t > 300, 5 * sd, 0.0) + rng.normal(0, sd, 600)
    assert np.sqrt(block_noise(y[:, None]))[0] == pytest.approx(sd, rel=0.15)


def test_block_noise_keeps_a_bursty_features_bursts() -> None:
    rng = np.random.default_rng(6)
    y = rng.normal(0, 0.01, 600)
    y[rng.choice(600, 60, replace=False)] += 0.5  # a burst in one block of ten
    assert np.sqrt(block_noise(y[:, None]))[0] > 0.05  # far more than the quiet blocks' 0.01
