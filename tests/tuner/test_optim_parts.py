"""The solver's parts: the bounded trust-region subproblem and the interpolation models."""

from __future__ import annotations

import numpy as np
import scipy.optimize
from hypothesis import given, settings
from hypothesis import strategies as st

from regimetune.tuner.optim._interp import fit_mfn_models, select_affine
from regimetune.tuner.optim._trsub import model_decrease, solve_box_qp


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 5), st.integers(0, 10_000))
def test_convex_box_qp_matches_bounded_linear_least_squares(n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(n + 2, n))
    b = rng.normal(size=n + 2) * 3
    lo, hi = -rng.uniform(0.0, 1.0, n), rng.uniform(0.0, 1.0, n)
    g, h = a.T @ b, a.T @ a  # g.s + s.H.s/2 = |As + b|^2/2 - |b|^2/2
    s = solve_box_qp(g, h, lo, hi)
    assert np.all(s >= lo) and np.all(s <= hi)
    ref = scipy.optimize.lsq_linear(a, -b, bounds=(lo, hi), tol=1e-12).x
    assert model_decrease(g, h, s) >= model_decrease(g, h, ref) - 1e-9 * max(
        1.0, abs(model_decrease(g, h, ref))
    )


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 5), st.integers(0, 10_000))
def test_nonconvex_box_qp_beats_every_vertex_and_the_centre(n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    h = rng.normal(size=(n, n))
    h = h + h.T
    g = rng.normal(size=n)
    lo, hi = -np.ones(n), np.ones(n)
    s = solve_box_qp(g, h, lo, hi)
    assert np.all(s >= lo) and np.all(s <= hi)
    best = max(
        model_decrease(g, h, np.array(v)) for v in np.array(np.meshgrid(*[[-1.0, 1.0]] * n)).reshape(n, -1).T
    )
    # a local method on a nonconvex QP: at least positive decrease, and near the best vertex
    assert model_decrease(g, h, s) > 0
    assert model_decrease(g, h, s) >= 0.5 * best


def test_quadratic_model_is_exact_for_a_quadratic_with_enough_points() -> None:
    rng = np.random.default_rng(0)
    n = 3
    hq = np.array([[2.0, 0.5, 0.0], [0.5, 1.0, -0.3], [0.0, -0.3, 4.0]])
    gq = np.array([1.0, -2.0, 0.5])
    d = np.vstack([np.zeros(n), rng.uniform(-1, 1, size=((n + 1) * (n + 2) // 2 - 1, n))])
    values = (d @ gq + 0.5 * np.einsum("pi,ij,pj->p", d, hq, d))[:, None]
    grad, hess = fit_mfn_models(d, values, np.zeros((1, n, n)))
    np.testing.assert_allclose(grad[0], gq, atol=1e-8)
    np.testing.assert_allclose(hess[0], hq, atol=1e-8)


def test_linear_model_from_n_plus_one_points_keeps_the_old_hessian() -> None:
    d = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    old = np.array([[[1.0, 0.2], [0.2, 3.0]]])
    values = np.array([[0.0], [2.0 + 0.5], [-1.0 + 1.5]])  # g = (2, -1) plus the old curvature
    grad, hess = fit_mfn_models(d, values, old)
    np.testing.assert_allclose(grad[0], [2.0, -1.0], atol=1e-12)
    np.testing.assert_allclose(hess, old, atol=1e-12)


def test_affine_selection_skips_dependent_and_far_points() -> None:
    disp = np.array([[0.5, 0.0], [1.0, 0.0], [3.0, 3.0], [0.2, 0.7]])
    chosen = select_affine(disp, np.arange(4), radius=1.5, pivot=1e-3)
    assert chosen == [0, 3]
