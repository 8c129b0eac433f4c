"""Interpolation sets and minimum-Frobenius-norm quadratic models (the model half of POUNDERS).

All functions work on displacements from the trust-region centre, already divided by the
radius, so their tolerances are scale-free.
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.linalg


def select_affine(
    disp: np.ndarray,
    order: np.ndarray,
    *,
    radius: float,
    pivot: float,
    start: list[int] | None = None,
) -> list[int]:
    """Greedily pick up to ``n`` rows of ``disp`` (scaled displacements) within ``radius`` whose
    directions are well away from the span of those already picked (projection >= ``pivot``).

    ``order`` lists candidate rows, most preferred first (the centre itself is excluded by the
    caller); ``start`` rows are kept first. Returns the chosen row indices.
    """
    n = disp.shape[1]
    chosen: list[int] = list(start or [])
    basis = np.linalg.qr(disp[chosen].T)[0] if chosen else np.zeros((n, 0))
    if len(chosen) >= n:
        return chosen
    for j in order:
        d = disp[j]
        if j in chosen or not np.linalg.norm(d, np.inf) <= radius:
            continue
        proj = d - basis @ (basis.T @ d)
        norm = float(np.linalg.norm(proj))
        if norm >= pivot:
            chosen.append(int(j))
            basis = np.column_stack([basis, proj / norm])
            if len(chosen) == n:
                break
    return chosen


def complement_directions(disp: np.ndarray, chosen: list[int]) -> np.ndarray:
    """Orthonormal directions (rows) spanning the complement of the chosen displacements."""
    n = disp.shape[1]
    if not chosen:
        return np.eye(n)
    q, _ = np.linalg.qr(disp[chosen].T, mode="complete")
    return q[:, len(chosen) :].T


def add_quadratic_points(
    disp: np.ndarray, chosen: list[int], order: np.ndarray, *, radius: float, max_points: int
) -> list[int]:
    """Extend an affine set (centre + ``chosen``) with further rows within ``radius`` while the
    minimum-norm interpolation system stays well conditioned, up to ``max_points`` in all."""
    points = list(chosen)
    for j in order:
        if len(points) + 1 >= max_points:
            break
        if j in points or not np.linalg.norm(disp[j], np.inf) <= radius:
            continue
        trial = [*points, int(j)]
        kkt = _kkt_matrix(np.vstack([np.zeros(disp.shape[1]), disp[trial]]))
        if np.linalg.cond(kkt) < 1e10:
            points = trial
    return points


def _kkt_matrix(d: np.ndarray) -> np.ndarray:
    p, n = d.shape
    a = 0.5 * (d @ d.T) ** 2
    phi = np.column_stack([np.ones(p), d])
    return np.block([[a, phi], [phi.T, np.zeros((n + 1, n + 1))]])


def fit_mfn_models(d: np.ndarray, values: np.ndarray, hess: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Least-change quadratic models of ``m`` functions interpolating ``values`` at ``d``.

    ``d`` is ``(p, n)`` with the centre at row 0 (all zeros), ``values`` is ``(p, m)`` relative to
    the centre value, ``hess`` is ``(m, n, n)``, the previous Hessians. Each model keeps the
    centre value, and its Hessian changes from ``hess`` by the least Frobenius norm that makes
    it interpolate (exactly linear when ``p == n + 1``). Returns gradients ``(m, n)`` and
    Hessians ``(m, n, n)``.
    """
    p, n = d.shape
    target = values - 0.5 * np.einsum("pi,mij,pj->pm", d, hess, d)
    rhs = np.vstack([target, np.zeros((n + 1, values.shape[1]))])
    kkt = _kkt_matrix(d)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", scipy.linalg.LinAlgWarning)
            sol = scipy.linalg.solve(kkt, rhs, assume_a="sym")
    except (np.linalg.LinAlgError, scipy.linalg.LinAlgWarning):
        sol = np.linalg.lstsq(kkt, rhs, rcond=None)[0]
    lam = sol[:p]
    grad = sol[p + 1 :].T
    delta_h = np.einsum("pm,pi,pj->mij", lam, d, d)
    return grad, hess + delta_h
