"""The cost model of slot moves: the busiest node's time, and the fit to timed batches."""

from __future__ import annotations

import numpy as np
import pytest

from regimetune.backend.redis_cluster.costs import (
    DEFAULT_COSTS,
    MIN_BATCHES,
    BatchTiming,
    MoveCosts,
    PairWork,
    pair_work,
)

TRUE = MoveCosts(per_batch_s=0.02, per_slot_s=1e-3, per_key_s=3e-5, per_byte_s=2e-9)


def test_a_node_in_two_pairs_adds_them_pairs_apart_overlap() -> None:
    one = PairWork(slots=40, keys=500, bytes=4e6)
    t = TRUE.pair_seconds(one, 32)
    assert t == pytest.approx(2 * 0.02 + 40e-3 + 500 * 3e-5 + 4e6 * 2e-9)
    # a -> b and c -> d share no node: the move takes one pair's time
    assert TRUE.predict({("a", "b"): one, ("c", "d"): one}, 32) == pytest.approx(t)
    # a -> b and a -> c: a takes part in both
    assert TRUE.predict({("a", "b"): one, ("a", "c"): one}, 32) == pytest.approx(2 * t)
    assert TRUE.predict({}, 32) == 0.0


def test_pair_work_counts_only_slots_that_change_owner() -> None:
    keys = np.zeros(16384, np.int64)
    keys[[1, 2, 3]] = [10, 20, 30]
    sizes = keys * 100.0
    work = pair_work({1: "b", 2: "b", 3: "a"}, {1: "a", 2: "c", 3: "a"}, keys, sizes)
    assert work == {("a", "b"): PairWork(1, 10, 1000.0), ("c", "b"): PairWork(1, 20, 2000.0)}


def test_the_fit_recovers_the_costs_of_timed_batches() -> None:
    rng = np.random.default_rng(0)
    timings = []
    for _ in range(40):
        slots = int(rng.integers(1, 33))
        keys = int(rng.integers(0, 400))
        size = float(rng.uniform(0, 5e6))
        t = TRUE.pair_seconds(PairWork(slots, keys, size), 64) * float(rng.normal(1, 0.02))
        timings.append(BatchTiming(slots, keys, size, t))
    fit = MoveCosts.fit(timings, DEFAULT_COSTS)
    assert fit.batches_fitted == 40
    for name in ("per_batch_s", "per_slot_s", "per_key_s", "per_byte_s"):
        assert getattr(fit, name) == pytest.approx(getattr(TRUE, name), rel=0.25), name


def test_too_few_batches_or_a_column_that_never_varies_keep_the_fallback() -> None:
    few = [BatchTiming(1, 0, 0.0, 0.01)] * (MIN_BATCHES - 1)
    assert MoveCosts.fit(few, DEFAULT_COSTS) == DEFAULT_COSTS
    # every batch one slot: the per-slot cost cannot be told from the per-batch one
    one_slot = [BatchTiming(1, k, 1000.0 * k, 0.01 + 1e-4 * k) for k in range(10)]
    fit = MoveCosts.fit(one_slot, DEFAULT_COSTS)
    assert fit.per_slot_s == DEFAULT_COSTS.per_slot_s
    assert fit.per_batch_s >= 0 and fit.per_key_s >= 0 and fit.per_byte_s >= 0
