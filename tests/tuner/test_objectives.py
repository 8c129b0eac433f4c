"""Cache objectives: residuals that vanish exactly when the targets are met (but for the
gentle memory pull), grow with the violation, and honour the user's weights."""

from __future__ import annotations

import numpy as np
import pytest

from regimetune.models import CachePolicy, ConfigError
from regimetune.tuner.cache import CacheTrace, StoreModel, simulate
from regimetune.tuner.objectives import RESIDUAL_NAMES, CacheObjective, memory_fraction


def test_residuals_are_zero_within_targets_and_grow_outside():
    obj = CacheObjective(efficiency_target=0.9, memory_budget=0.1)
    ok = obj.residuals(efficiency=0.95, memory_fraction=0.05)
    assert len(ok) == len(RESIDUAL_NAMES)
    assert ok[0] == 0 and ok[1] == 0 and ok[2] > 0
    worse = [obj.residuals(efficiency=e, memory_fraction=0.05)[0] for e in (0.89, 0.8, 0.5)]
    assert 0 < worse[0] < worse[1] < worse[2]
    over = [obj.residuals(efficiency=1.0, memory_fraction=m)[1] for m in (0.11, 0.2, 1.0)]
    assert 0 < over[0] < over[1] < over[2]
    # the gentle pull prefers less memory among feasible points
    assert obj.value(obj.residuals(efficiency=1, memory_fraction=0.02)) < obj.value(ok)


def test_weights_scale_their_residuals():
    base = CacheObjective().residuals(efficiency=0.5, memory_fraction=0.5)
    heavy = CacheObjective(efficiency_weight=3.0, memory_weight=0.5).residuals(
        efficiency=0.5, memory_fraction=0.5
    )
    np.testing.assert_allclose(heavy, base * [3.0, 0.5, 0.5, 3.0])
    assert CacheObjective.value(base) == pytest.approx(float(np.sum(base**2)))


def test_objective_of_simulation_results():
    rng = np.random.default_rng(3)
    keys = rng.zipf(1.2, 5000) % 400
    trace = CacheTrace.from_arrays(ts=np.linspace(0, 100, 5000), keys=keys)
    store = StoreModel(capacity_ops_s=20, buffer_s=0)
    unl = simulate(trace, CachePolicy(), store=store)
    small = simulate(trace, CachePolicy(mode="lru", limit_keys=3), store=store)
    obj = CacheObjective(efficiency_target=0.9, memory_budget=0.2)
    assert memory_fraction(unl, unl) == 1.0
    assert memory_fraction(small, unl) < 0.05
    r_unl, r_small = obj.of(unl, unl), obj.of(small, unl)
    assert r_unl[0] == 0 and r_unl[1] > 0  # efficient but far over budget
    assert r_small[1] == 0 and r_small[0] > 0  # within budget, but the store stalls
    assert obj.feasible(unl, unl) is False and obj.feasible(small, unl) is False


@pytest.mark.parametrize(
    "kw",
    [
        {"efficiency_target": 1.0},
        {"efficiency_target": 0},
        {"memory_budget": 0},
        {"memory_budget": 1.5},
        {"memory_weight": -1},
        {"steepness": float("nan")},
        {"thrift": "x"},
    ],
)
def test_bad_objectives_are_config_errors(kw):
    with pytest.raises(ConfigError):
        CacheObjective(**kw)
