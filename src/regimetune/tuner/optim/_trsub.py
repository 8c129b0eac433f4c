"""The trust-region subproblem with bounds: minimise a quadratic model over a box.

The infinity-norm trust region intersected with the variable bounds is itself a box, so the
subproblem is a box-constrained quadratic program, possibly nonconvex. It is solved by a
small active-set projected search from a few starting points (the centre, the projected
steepest-descent step and the projected Newton step), keeping the lowest model value. The
problems have a handful of variables, so dense eigendecompositions are cheap.
"""

from __future__ import annotations

import numpy as np


def model_decrease(g: np.ndarray, h: np.ndarray, s: np.ndarray) -> float:
    """``m(0) - m(s)`` for the model ``g.s + s.H.s / 2``."""
    return float(-(g @ s + 0.5 * s @ h @ s))


def solve_box_qp(g: np.ndarray, h: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Approximately minimise ``g.s + s.H.s / 2`` subject to ``lo <= s <= hi`` (``lo <= 0 <= hi``).

    >>> s = solve_box_qp(np.array([1.0, -2.0]), np.eye(2), np.full(2, -0.5), np.full(2, 0.5))
    >>> [round(float(v), 6) for v in s]
    [-0.5, 0.5]
    """
    width = float(np.max(hi - lo))
    if width <= 0.0:
        return np.zeros_like(g)
    starts = [np.zeros_like(g), np.clip(-g / (np.max(np.abs(g)) or 1.0) * width, lo, hi)]
    newton = np.linalg.lstsq(h, -g, rcond=1e-12)[0]
    if np.all(np.isfinite(newton)):
        starts.append(np.clip(newton, lo, hi))
    best, best_val = np.zeros_like(g), 0.0
    for s0 in starts:
        s = _projected_newton(g, h, lo, hi, s0, width)
        val = -model_decrease(g, h, s)
        if val < best_val:
            best, best_val = s, val
    return best


def _projected_newton(
    g: np.ndarray, h: np.ndarray, lo: np.ndarray, hi: np.ndarray, s: np.ndarray, width: float
) -> np.ndarray:
    """Active-set projected search: Newton steps on the free variables when their Hessian is
    positive definite, else a descent direction of negative curvature or steepest descent;
    a backtracking (Armijo) search along the projected path."""
    n = g.size
    tol = 1e-12 * (float(np.linalg.norm(g)) + float(np.linalg.norm(h)) * width + 1e-300)
    q = -model_decrease(g, h, s)
    for _ in range(20 * n + 20):
        grad = g + h @ s
        free = ~(((s <= lo) & (grad > 0)) | ((s >= hi) & (grad < 0)))
        gf = grad[free]
        if not free.any() or float(np.linalg.norm(gf)) <= tol:
            break
        hf = h[np.ix_(free, free)]
        d = np.zeros(n)
        t = 1.0
        evals, vecs = np.linalg.eigh(hf)
        if evals[0] > 1e-12 * max(1.0, abs(evals[-1])):
            d[free] = -(vecs @ ((vecs.T @ gf) / evals))
        elif evals[0] < 0:
            v = vecs[:, 0]
            d[free] = -v if v @ gf > 0 else v
            d[free] -= gf / (float(np.linalg.norm(gf)) + 1e-300) * 1e-3
            t = width / float(np.max(np.abs(d)))
        else:
            d[free] = -gf
            t = width / float(np.max(np.abs(d)))
        improved = False
        for _ in range(60):
            trial = np.clip(s + t * d, lo, hi)
            q_trial = -model_decrease(g, h, trial)
            if q_trial <= q + 1e-4 * float(grad @ (trial - s)) and q_trial < q:
                s, q, improved = trial, q_trial, True
                break
            t *= 0.5
        if not improved:
            break
    return s
