"""``minimize``: the driver other packages call."""

from __future__ import annotations

import concurrent.futures as cf
import math
import operator

import numpy as np
import pytest

from regimetune.models.errors import ConfigError, InputError, TuningError
from regimetune.models.tuning import Evaluation
from regimetune.tuner.optim import Param, Space, available_optimizers, minimize

T = np.linspace(0.0, 4.0, 20)
Y = 2.5 * np.exp(-1.3 * T) + 0.5


def rosen(p: dict[str, float]) -> np.ndarray:
    return np.array([10.0 * (p["x2"] - p["x1"] ** 2), 1.0 - p["x1"]])


ROSEN = Space([Param("x1", -5, 5, init=-1.2), Param("x2", -5, 5, init=1.0)])


def first_hit(evals: tuple[Evaluation, ...], target: float) -> int | None:
    for i, e in enumerate(evals):
        if e.value is not None and e.value <= target:
            return i + 1
    return None


def test_rosenbrock_residuals_to_1e6() -> None:
    res = minimize(rosen, ROSEN, budget=80)
    assert res.best_value <= 1e-6
    assert res.optimizer == "Pounders"
    assert 0 < res.n_evaluations <= 80 and res.n_failed == 0
    assert res.best_residuals is not None
    assert sum(r * r for r in res.best_residuals) == pytest.approx(res.best_value)
    e = res.evaluations[0]
    assert e.params == {"x1": -1.2, "x2": 1.0} and e.residuals is not None
    assert e.value == pytest.approx(float(np.sum(np.square(e.residuals))))


def test_exponential_fit_to_1e6() -> None:
    space = Space([Param("a", 0, 5, init=1.0), Param("b", 0, 5, init=1.0), Param("c", -2, 2, init=0.0)])
    res = minimize(lambda p: p["a"] * np.exp(-p["b"] * T) + p["c"] - Y, space, budget=40)
    assert res.best_value <= 1e-6
    assert res.best_params["a"] == pytest.approx(2.5, abs=1e-3)
    assert res.best_params["b"] == pytest.approx(1.3, abs=1e-3)


def test_integer_and_log_parameters_are_respected() -> None:
    space = Space([Param("ttl", 1, 600, integer=True), Param("alpha", 1e-4, 1.0, log=True)])

    def objective(p: dict[str, float]) -> np.ndarray:
        return np.array([(p["ttl"] - 37) / 50.0, math.log10(p["alpha"] / 0.01)])

    res = minimize(objective, space, budget=60)
    assert all(isinstance(e.params["ttl"], float) and e.params["ttl"].is_integer() for e in res.evaluations)
    assert all(1 <= e.params["ttl"] <= 600 and 1e-4 <= e.params["alpha"] <= 1.0 for e in res.evaluations)
    assert res.best_params["ttl"] == 37
    assert res.best_params["alpha"] == pytest.approx(0.01, rel=1e-3)
    # the log scale: the first point is the geometric middle of the range
    assert res.evaluations[0].params["alpha"] == pytest.approx(1e-2)


def test_warm_start_reduces_evaluations() -> None:
    cold = minimize(rosen, ROSEN, budget=80)
    n_cold = first_hit(cold.evaluations, 1e-6)
    earlier = [(e.params, e.residuals) for e in cold.evaluations[:25]]
    warm = minimize(rosen, ROSEN, budget=80, warm_start=earlier)
    n_warm = first_hit(warm.evaluations, 1e-6)
    assert n_cold is not None and n_warm is not None
    assert n_warm <= n_cold - 15


def test_thread_pool_runs_several_in_flight() -> None:
    with cf.ThreadPoolExecutor(max_workers=3) as pool:
        res = minimize(rosen, ROSEN, budget=90, executor=pool)
    assert res.best_value <= 1e-6
    assert res.n_evaluations <= 90


def test_process_pool_gives_results() -> None:
    # operator.itemgetter pickles by value: residuals (a, b), minimum at the origin
    space = Space([Param("a", -1, 1, init=0.7), Param("b", -1, 1, init=-0.4)])
    with cf.ProcessPoolExecutor(max_workers=2) as pool:
        res = minimize(operator.itemgetter("a", "b"), space, budget=12, executor=pool)
    assert res.best_value <= 1e-12
    assert res.n_evaluations <= 12


def test_failing_and_nan_objectives_are_recorded() -> None:
    def objective(p: dict[str, float]) -> np.ndarray:
        if p["x1"] > 1.3:
            raise RuntimeError("simulator crashed")
        if p["x2"] > 1.6:
            return np.array([np.nan, 1.0])
        return rosen(p)

    res = minimize(
        objective, Space([Param("x1", -2, 2, init=-1.2), Param("x2", -2, 2, init=1.0)]), budget=100
    )
    errors = [e.error for e in res.evaluations if e.failed]
    assert res.n_failed == len(errors) > 0
    assert any("RuntimeError: simulator crashed" in err for err in errors)
    assert res.best_value <= 1e-6


def test_every_evaluation_failing_is_a_tuning_error() -> None:
    def objective(p: dict[str, float]) -> float:
        raise ValueError("no")

    with pytest.raises(TuningError, match="all 5 evaluations failed"):
        minimize(objective, ROSEN, budget=5)


@pytest.mark.parametrize("name", ["NGOpt", "Cobyla"])
def test_nevergrad_optimizers_by_name(name: str) -> None:
    res = minimize(rosen, ROSEN, budget=25, optimizer=name, seed=0)
    assert res.optimizer == name
    assert res.n_evaluations == 25
    assert res.best_value < rosen({"x1": -1.2, "x2": 1.0}) @ rosen({"x1": -1.2, "x2": 1.0})


def test_seed_makes_a_stochastic_optimizer_reproducible() -> None:
    runs = [minimize(rosen, ROSEN, budget=10, optimizer="RandomSearch", seed=7) for _ in range(2)]
    assert [e.params for e in runs[0].evaluations] == [e.params for e in runs[1].evaluations]


def test_scalar_objective_and_progress() -> None:
    calls: list[tuple[int, int, float]] = []
    space = Space([Param("x", -1, 1), Param("y", -1, 1)])
    res = minimize(
        lambda p: (p["x"] - 0.2) ** 2 + (p["y"] + 0.3) ** 2 - 5.0,
        space,
        budget=30,
        residuals=False,
        progress=lambda done, total, best: calls.append((done, total, best)),
    )
    assert res.best_value == pytest.approx(-5.0, abs=1e-8)
    assert res.best_residuals is None
    assert [c[0] for c in calls] == list(range(1, res.n_evaluations + 1))
    assert all(c[1] == 30 for c in calls)
    bests = [c[2] for c in calls]
    assert bests == sorted(bests, reverse=True)


def never_called(p: dict[str, float]) -> float:
    raise AssertionError("the objective must not run on bad input")


@pytest.mark.parametrize("budget", [0, -3, 2.5, True, "10"])
def test_bad_budget(budget) -> None:
    with pytest.raises(ConfigError, match="budget"):
        minimize(never_called, ROSEN, budget=budget)


def test_unknown_optimizer_lists_choices() -> None:
    with pytest.raises(ConfigError, match=r"unknown optimizer 'Pounder'.*Pounders.*NGOpt"):
        minimize(never_called, ROSEN, budget=5, optimizer="Pounder")
    assert "Pounders" in available_optimizers() and "NGOpt" in available_optimizers()


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: Param("x", 1.0, 1.0), "below"),
        (lambda: Param("x", 0.0, 1.0, init=2.0), "outside"),
        (lambda: Param("x", 0.0, 1.0, log=True), "low > 0"),
        (lambda: Param("x", 0.0, math.inf), "finite"),
        (lambda: Space([Param("x", 0, 1), Param("x", 0, 2)]), "duplicate"),
        (lambda: Space([]), "no parameters"),
    ],
)
def test_bad_space(make, match) -> None:
    with pytest.raises(ConfigError, match=match):
        make()


@pytest.mark.parametrize(
    ("point", "value", "match"),
    [
        ({"x1": 9.0, "x2": 0.0}, [1.0, 1.0], "outside"),
        ({"x1": 0.0}, [1.0, 1.0], "missing"),
        ({"x1": 0.0, "x2": 0.0}, [np.nan, 1.0], "non-finite"),
    ],
)
def test_bad_warm_start(point, value, match) -> None:
    with pytest.raises(InputError, match=match):
        minimize(never_called, ROSEN, budget=5, warm_start=[(point, value)])


def test_bad_workers() -> None:
    with pytest.raises(ConfigError, match="batch_size"):
        minimize(never_called, ROSEN, budget=5, batch_size=0)


def test_changing_residual_count_is_a_failed_evaluation() -> None:
    def objective(p: dict[str, float]) -> np.ndarray:
        r = rosen(p)
        return np.append(r, 0.0) if p["x1"] > 0 else r

    res = minimize(objective, ROSEN, budget=30)
    assert res.n_failed > 0
    assert all("residuals, earlier 2" in e.error for e in res.evaluations if e.failed)
    assert all(len(e.residuals) == 2 for e in res.evaluations if not e.failed)


def test_optimizer_options_reach_pounders_and_bad_ones_are_refused() -> None:
    wide = minimize(rosen, ROSEN, budget=3, options={"rhobeg": 0.3})
    steps = [abs(e.params["x1"] + 1.2) + abs(e.params["x2"] - 1.0) for e in wide.evaluations[1:]]
    assert max(steps) == pytest.approx(3.0)  # 0.3 of the width 10
    with pytest.raises(ConfigError, match="cannot build"):
        minimize(never_called, ROSEN, budget=3, options={"no_such_option": 1})
    with pytest.raises(InputError, match="residuals"):
        minimize(never_called, ROSEN, budget=3, warm_start=[(ROSEN_X0, [1.0, 2.0]), (ROSEN_X0, [1.0])])


ROSEN_X0 = {"x1": -1.2, "x2": 1.0}
