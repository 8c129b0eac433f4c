"""The POUNDERS-like core solver, driven directly through ask/tell."""

from __future__ import annotations

import math

import numpy as np
import pytest

from regimetune.models.errors import ConfigError, InputError
from regimetune.tuner.optim.pounders import PoundersSolver

T = np.linspace(0.0, 4.0, 20)
Y = 2.5 * np.exp(-1.3 * T) + 0.5


def rosen(x: np.ndarray) -> np.ndarray:
    return np.array([10.0 * (x[1] - x[0] ** 2), 1.0 - x[0]])


def expfit(x: np.ndarray) -> np.ndarray:
    return x[0] * np.exp(-x[1] * T) + x[2] - Y


def run(solver: PoundersSolver, fun, budget: int) -> list[float]:
    """Evaluate ``budget`` points sequentially; returns the loss history (inf for failures)."""
    history = []
    for _ in range(budget):
        x = solver.ask()
        try:
            r = fun(x)
        except ArithmeticError:
            r = None
        solver.tell(x, r)
        history.append(math.inf if r is None or not np.all(np.isfinite(r)) else float(np.sum(np.square(r))))
    return history


def evals_to(history: list[float], target: float) -> int | None:
    hits = [i for i, f in enumerate(history) if f <= target]
    return hits[0] + 1 if hits else None


def test_rosenbrock_residuals_reach_1e6_in_general_bounds() -> None:
    solver = PoundersSolver(np.array([-1.2, 1.0]), np.full(2, -2.0), np.full(2, 2.0))
    history = run(solver, rosen, 80)
    assert evals_to(history, 1e-6) is not None
    assert solver.best_value <= 1e-10
    np.testing.assert_allclose(solver.best_x, [1.0, 1.0], atol=1e-4)


def test_exponential_fit_recovers_the_parameters() -> None:
    lo, hi = np.array([0.0, 0.0, -2.0]), np.array([5.0, 5.0, 2.0])
    solver = PoundersSolver(np.array([1.0, 1.0, 0.0]), lo, hi, rhobeg=0.5)
    history = run(solver, expfit, 40)
    n = evals_to(history, 1e-6)
    assert n is not None and n <= 30
    np.testing.assert_allclose(solver.best_x, [2.5, 1.3, 0.5], atol=1e-3)


def test_scalar_mode_models_the_loss_itself_even_when_negative() -> None:
    def fun(x: np.ndarray) -> float:
        return float((x[0] - 0.3) ** 2 + 3 * (x[1] + 0.2) ** 2 + x[0] * x[1] - 1.0)

    solver = PoundersSolver(np.array([0.9, 0.9]), np.full(2, -1.0), np.full(2, 1.0))
    for _ in range(40):
        x = solver.ask()
        solver.tell(x, fun(x))
    # exact minimiser of the quadratic
    h = np.array([[2.0, 1.0], [1.0, 6.0]])
    xs = np.linalg.solve(h, [0.6, -1.2])
    assert solver.best_value <= fun(xs) + 1e-8
    np.testing.assert_allclose(solver.best_x, xs, atol=1e-4)


def test_solution_on_the_bound_when_the_minimum_lies_outside() -> None:
    solver = PoundersSolver(np.array([0.0, 0.0]), np.full(2, -1.0), np.full(2, 1.0))
    run(solver, lambda x: np.array([x[0] - 3.0, x[1] + 0.25]), 40)
    np.testing.assert_allclose(solver.best_x, [1.0, -0.25], atol=1e-6)
    asked = np.array(solver._xs)
    assert np.all(asked >= -1.0) and np.all(asked <= 1.0)


def test_failed_evaluations_are_skipped_and_the_run_goes_on() -> None:
    def fun(x: np.ndarray) -> np.ndarray | None:
        if x[0] > 1.3:  # a region where the simulator crashes
            raise ZeroDivisionError("boom")
        if x[1] > 1.6:
            return np.array([np.nan, 0.0])
        return rosen(x)

    solver = PoundersSolver(np.array([-1.2, 1.0]), np.full(2, -2.0), np.full(2, 2.0), rhobeg=0.5)
    history = run(solver, fun, 120)
    assert any(math.isinf(f) for f in history), "the test should hit the failing region"
    assert solver.best_value <= 1e-6


def test_failed_start_point_falls_back_to_other_points() -> None:
    def fun(x: np.ndarray) -> np.ndarray | None:
        return None if np.allclose(x, [0.0, 0.0]) else np.array([x[0] - 0.5, x[1] + 0.5])

    solver = PoundersSolver(np.zeros(2), np.full(2, -1.0), np.full(2, 1.0), seed=1)
    run(solver, fun, 30)
    assert solver.best_value <= 1e-12


def test_batch_points_can_be_evaluated_out_of_order() -> None:
    solver = PoundersSolver(np.array([-1.2, 1.0]), np.full(2, -2.0), np.full(2, 2.0), seed=3)
    told = 0
    while told < 150:
        batch = [solver.ask() for _ in range(3)]
        assert len({tuple(x) for x in batch}) == 3
        for x in reversed(batch):
            solver.tell(x, rosen(x))
            told += 1
    assert solver.best_value <= 1e-6


def test_warm_start_points_shorten_the_run() -> None:
    cold = PoundersSolver(np.array([-1.2, 1.0]), np.full(2, -2.0), np.full(2, 2.0))
    n_cold = evals_to(run(cold, rosen, 80), 1e-6)
    warm = PoundersSolver(np.array([-1.2, 1.0]), np.full(2, -2.0), np.full(2, 2.0))
    for x in np.array(cold._xs)[:20]:  # an earlier session's first points
        warm.tell(x, rosen(x))
    n_warm = evals_to(run(warm, rosen, 80), 1e-6)
    assert n_cold is not None and n_warm is not None
    assert n_warm < n_cold - 10


def test_converges_then_restarts_and_finally_stops() -> None:
    solver = PoundersSolver(np.array([0.5]), np.array([0.0]), np.array([1.0]), max_restarts=1)
    for _ in range(200):
        if solver.done:
            break
        x = solver.ask()
        solver.tell(x, np.array([x[0] - 0.25]))
    assert solver.done
    assert solver.n_evaluations < 200
    assert abs(solver.best_x[0] - 0.25) < 1e-8
    extra = solver.ask()  # asks after the end still give points in the box
    assert 0.0 <= extra[0] <= 1.0


@pytest.mark.parametrize(
    ("x0", "lo", "hi", "kw", "match"),
    [
        ([2.0], [0.0], [1.0], {}, "outside"),
        ([0.5], [1.0], [0.0], {}, "lower < upper"),
        ([0.5], [0.0], [np.inf], {}, "finite"),
        ([0.5], [0.0], [1.0], {"rhobeg": 0.9}, "rhobeg"),
        ([0.5, 0.5], [0.0], [1.0], {}, "same"),
    ],
)
def test_bad_configuration_is_refused(x0, lo, hi, kw, match) -> None:
    solver = PoundersSolver(np.array(x0), np.array(lo), np.array(hi), **kw)
    with pytest.raises(ConfigError, match=match):
        solver.ask()


def test_inconsistent_tells_are_refused() -> None:
    solver = PoundersSolver(np.zeros(2), np.full(2, -1.0), np.full(2, 1.0), least_squares=True)
    x = solver.ask()
    with pytest.raises(InputError, match="shape"):
        solver.tell(np.zeros(3), np.zeros(2))
    with pytest.raises(InputError, match="residual vectors"):
        solver.tell(x, 1.0)
    solver.tell(x, np.ones(2))
    with pytest.raises(InputError, match="expected 2 residuals"):
        solver.tell(x, np.ones(3))


def test_geometry_point_at_a_corner_uses_a_feasible_coordinate_step() -> None:
    solver = PoundersSolver(np.zeros(2), np.zeros(2), np.ones(2), rhobeg=0.1)
    fun = lambda x: x + 1.0  # noqa: E731 - best point is the corner (0, 0)
    for x in (np.zeros(2), np.array([0.1, 0.1])):
        solver.tell(x, fun(x))
    # the missing direction (1, -1) is blocked both ways at the corner
    x = solver.ask()
    assert np.all(x >= 0.0) and np.all(x <= 1.0)
    assert np.max(np.abs(x)) == pytest.approx(0.1)
    assert not np.allclose(x, [0.1, 0.1])


@pytest.mark.parametrize("delta0", [0.1, 1.0])
def test_expfit_evaluations_close_to_ibcdfo_pounders(delta0: float) -> None:
    pounders = pytest.importorskip("ibcdfo.pounders.pounders").pounders
    lo, hi, x0 = np.full(3, -5.0), np.full(3, 5.0), np.array([1.0, 1.0, 0.0])
    ref: list[float] = []

    def recorded(x: np.ndarray) -> np.ndarray:
        r = expfit(x)
        ref.append(float(r @ r))
        return r

    pounders(recorded, x0.copy(), 3, 60, 1e-13, delta0, 20, lo, hi, Options={"spsolver": 1})
    n_ref = evals_to(ref, 1e-6)
    ours = evals_to(run(PoundersSolver(x0, lo, hi, rhobeg=delta0), expfit, 60), 1e-6)
    assert n_ref is not None and ours is not None
    assert ours <= 1.3 * n_ref


def test_failing_geometry_side_is_mirrored() -> None:
    # everything above x1 = 0.5 fails; the start sits on that edge, the solution below it
    def fun(x: np.ndarray) -> np.ndarray | None:
        return None if x[1] > 0.5 else np.array([x[0] - 0.2, x[1] - 0.1])

    solver = PoundersSolver(np.array([0.5, 0.5]), np.zeros(2), np.ones(2), rhobeg=0.2)
    history = run(solver, fun, 40)
    assert math.isinf(history[2]), "the first geometry step along x1 should fail"
    assert math.isfinite(history[3]), "its mirror image should be tried next"
    np.testing.assert_allclose(solver.best_x, [0.2, 0.1], atol=1e-8)
