"""``Pounders`` inside nevergrad: registry, ask/tell, parametrizations, warm start, failures."""

from __future__ import annotations

import math

import nevergrad as ng
import numpy as np
import pytest

from regimetune.tuner.optim import FAILED_LOSS, Pounders


def test_registered_by_name_and_solves_with_plain_scalar_tells() -> None:
    assert ng.optimizers.registry["Pounders"] is Pounders
    param = ng.p.Array(shape=(3,), lower=-3.0, upper=3.0)
    opt = ng.optimizers.registry["Pounders"](param, budget=60)
    target = np.array([1.0, -2.0, 0.5])
    for _ in range(60):
        cand = opt.ask()
        opt.tell(cand, float(np.sum((cand.value - target) ** 2)))
    np.testing.assert_allclose(opt.recommend().value, target, atol=1e-4)


def test_residual_tells_on_a_dict_with_integer_and_log_parameters() -> None:
    param = ng.p.Dict(
        ttl=ng.p.Scalar(lower=1, upper=100).set_integer_casting(),
        alpha=ng.p.Log(lower=1e-4, upper=1.0),
    )
    opt = ng.optimizers.registry["Pounders"](param, budget=60)
    seen = []
    for _ in range(60):
        cand = opt.ask()
        v = cand.value
        seen.append(v)
        opt.tell_residuals(cand, [(v["ttl"] - 37) / 10.0, math.log10(v["alpha"] / 0.01)])
    assert all(isinstance(v["ttl"], int) and 1 <= v["ttl"] <= 100 for v in seen)
    assert all(1e-4 <= v["alpha"] <= 1.0 for v in seen)
    best = opt.recommend().value
    assert best["ttl"] == 37
    assert best["alpha"] == pytest.approx(0.01, rel=1e-4)


def test_suggested_points_are_asked_first_and_join_the_model() -> None:
    param = ng.p.Array(shape=(2,), lower=-2.0, upper=2.0)
    opt = ng.optimizers.registry["Pounders"](param, budget=40)
    opt.suggest(np.array([0.9, 0.8]))
    cand = opt.ask()
    np.testing.assert_allclose(cand.value, [0.9, 0.8])
    opt.tell_residuals(cand, cand.value - 1.0)
    assert opt.solver.n_evaluations == 1
    # a point told without being asked or suggested is used too
    other = opt.parametrization.spawn_child(new_value=np.array([1.1, 1.0]))
    opt.tell_residuals(other, other.value - 1.0)
    assert opt.solver.best_value == pytest.approx(0.01)
    for _ in range(20):
        cand = opt.ask()
        opt.tell_residuals(cand, cand.value - 1.0)
    np.testing.assert_allclose(opt.recommend().value, [1.0, 1.0], atol=1e-6)


def test_failures_are_recorded_not_fatal() -> None:
    param = ng.p.Array(shape=(2,), lower=-2.0, upper=2.0)
    opt = ng.optimizers.registry["Pounders"](param, budget=60)
    failed = 0
    for _ in range(60):
        cand = opt.ask()
        x = cand.value
        if x[0] > 0.8 and x[1] < 0.0:
            opt.tell_failure(cand)
            failed += 1
        elif x[1] > 1.2:
            opt.tell_residuals(cand, [np.inf, 0.0])
            failed += 1
        else:
            opt.tell_residuals(cand, x - np.array([0.5, 0.5]))
    assert failed > 0
    np.testing.assert_allclose(opt.recommend().value, [0.5, 0.5], atol=1e-6)
    assert opt.current_bests["minimum"].mean < 1e-10
    assert opt.solver.best_value < FAILED_LOSS


def test_unbounded_array_goes_through_the_arctan_map() -> None:
    opt = ng.optimizers.registry["Pounders"](2, budget=50)
    for _ in range(50):
        cand = opt.ask()
        opt.tell_residuals(cand, cand.value - np.array([3.0, -1.0]))
    np.testing.assert_allclose(opt.recommend().value, [3.0, -1.0], atol=1e-3)


def test_parallel_asks_give_distinct_points() -> None:
    param = ng.p.Array(shape=(3,), lower=0.0, upper=1.0)
    opt = ng.optimizers.registry["Pounders"](param, budget=40, num_workers=4)
    cands = [opt.ask() for _ in range(4)]
    values = {tuple(np.round(c.value, 12)) for c in cands}
    assert len(values) == 4
    for c in cands:
        opt.tell_residuals(c, c.value - 0.3)
    for _ in range(9):
        batch = [opt.ask() for _ in range(4)]
        for c in batch:
            opt.tell_residuals(c, c.value - 0.3)
    np.testing.assert_allclose(opt.recommend().value, [0.3, 0.3, 0.3], atol=1e-6)
