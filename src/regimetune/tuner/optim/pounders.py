"""A POUNDERS-like model-based trust-region solver for bound-constrained least squares, ask/tell.

Minimises ``f(x) = sum_i r_i(x)**2`` over a box without derivatives (Wild, "POUNDERS in TAO",
2017). Each iteration keeps the best point seen as the centre ``x_k`` and

1. picks interpolation points near ``x_k``: ``n`` affinely independent ones within
   ``c1 * delta`` (the model is then *valid*, fully linear), filled from ``c2 * delta`` if
   needed, plus further points (up to ``max_points``) for curvature;
2. fits one quadratic model per residual whose Hessian changes least (Frobenius norm) from
   the previous one, i.e. a minimum-Frobenius-norm model when fewer than ``(n+1)(n+2)/2``
   points are known;
3. forms the master model of ``f``: gradient ``2 J^T r``, Hessian ``2 (J^T J + sum r_i H_i)``;
4. minimises it over the box ``|s|_inf <= delta`` within the bounds, evaluates the step and
   grows or shrinks ``delta`` from the ratio of actual to predicted decrease; a poor step
   with an invalid model triggers a model-improving (geometry) point instead of a shrink;
5. stops on a small radius or projected gradient, optionally restarting from the best point
   with the initial radius while budget remains (which helps to leave poor local minima).

With scalar values only (``least_squares=False``), one quadratic model of ``f`` itself is
used: modelling ``sqrt(f)`` instead would put a cone at every zero minimum and is undefined
for negative losses.

Evaluations that fail (``tell(x, None)`` or non-finite values) are kept out of the models and
shrink the radius. The algorithm is written as a generator that yields batches of points:
the initial design and geometry batches can be evaluated in parallel, and when a caller asks
for more points than the algorithm is waiting for, it gets random points in the trust region,
whose values still feed later models.

>>> import numpy as np
>>> solver = PoundersSolver(np.array([0.2, 0.9]), np.zeros(2), np.ones(2))
>>> for _ in range(60):
...     x = solver.ask()
...     solver.tell(x, np.array([10 * (x[1] - x[0] ** 2), 0.5 - x[0]]))
>>> bool(solver.best_value < 1e-10)
True
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Generator, Sequence

import numpy as np

from regimetune.models.errors import ConfigError, InputError
from regimetune.tuner.optim._interp import (
    add_quadratic_points,
    complement_directions,
    fit_mfn_models,
    select_affine,
)
from regimetune.tuner.optim._trsub import model_decrease, solve_box_qp

_Batch = list[np.ndarray]


class PoundersSolver:
    """Ask/tell POUNDERS-like solver over the box ``[lower, upper]``.

    ``ask()`` returns the next point to evaluate; ``tell(x, value)`` takes a residual vector
    (least squares), a float (scalar mode) or ``None`` for a failed evaluation, for points
    asked or not (warm start). ``least_squares=None`` takes the mode from the first value told.
    ``done`` turns true once converged with no restarts left; further asks give random points
    near the best one.
    """

    def __init__(
        self,
        x0: np.ndarray,
        lower: np.ndarray,
        upper: np.ndarray,
        *,
        rhobeg: float = 0.1,
        rhoend: float = 1e-8,
        max_points: int | None = None,
        max_restarts: int = 3,
        least_squares: bool | None = None,
        seed: int | None = None,
    ) -> None:
        self.x0 = x0
        self.lower = lower
        self.upper = upper
        self.rhobeg = rhobeg
        self.rhoend = rhoend
        self.max_points = max_points
        self.max_restarts = max_restarts
        self.least_squares = least_squares
        self.seed = seed
        self._started = False

    # ------------------------------------------------------------------ public API
    def ask(self) -> np.ndarray:
        """The next point to evaluate (a fresh array)."""
        self._start()
        if not self._queue and not self._awaiting and not self.done:
            self._advance()
        if self._queue:
            x = self._queue.popleft()
            self._awaiting.append(x)
            return x.copy()
        return self._extra_point()

    def tell(self, x: np.ndarray, value: np.ndarray | float | Sequence[float] | None) -> None:
        """Record the result at ``x``: residuals, a scalar, or ``None`` when it failed."""
        self._start()
        x = np.asarray(x, dtype=float)
        if x.shape != (self._n,):
            raise InputError(f"point has shape {x.shape}, expected ({self._n},)")
        residuals = self._as_residuals(value)
        self._record(x, residuals)
        for i, pending in enumerate(self._awaiting):
            if np.array_equal(pending, x):
                del self._awaiting[i]
                if not self._queue and not self._awaiting and not self.done:
                    self._advance()
                break

    @property
    def done(self) -> bool:
        return self._started and self._finished

    @property
    def n_queued(self) -> int:
        """Points the algorithm has ready to hand out before it needs more results (beyond
        them, :meth:`ask` returns random points in the trust region)."""
        return len(self._queue) if self._started else 0

    @property
    def n_evaluations(self) -> int:
        return len(self._xs) if self._started else 0

    @property
    def radius(self) -> float:
        return self._delta if self._started else self.rhobeg

    @property
    def best_index(self) -> int | None:
        if not self._started or not np.isfinite(self._fs).any():
            return None
        return int(np.argmin(self._fs))

    @property
    def best_x(self) -> np.ndarray | None:
        k = self.best_index
        return None if k is None else self._xs[k].copy()

    @property
    def best_value(self) -> float:
        k = self.best_index
        return math.inf if k is None else float(self._fs[k])

    # ------------------------------------------------------------------ state
    def _start(self) -> None:
        if self._started:
            return
        lower = np.asarray(self.lower, dtype=float)
        upper = np.asarray(self.upper, dtype=float)
        x0 = np.asarray(self.x0, dtype=float)
        if lower.ndim != 1 or lower.shape != upper.shape or x0.shape != lower.shape or lower.size == 0:
            raise ConfigError("x0, lower and upper must be 1-D arrays of the same non-zero length")
        if not (np.all(np.isfinite(lower)) and np.all(np.isfinite(upper)) and np.all(lower < upper)):
            raise ConfigError("bounds must be finite with lower < upper")
        if not np.all((lower <= x0) & (x0 <= upper)):
            raise ConfigError("x0 lies outside the bounds")
        width = float(np.min(upper - lower))
        if not 0 < self.rhoend < self.rhobeg <= 0.5 * width:
            raise ConfigError(f"need 0 < rhoend < rhobeg <= half the narrowest bound width ({width / 2})")
        n = lower.size
        self._n, self._lo, self._hi, self._x0 = n, lower, upper, x0
        self._mode = self.least_squares
        self._np_max = self.max_points or 2 * n + 1
        if not n + 1 <= self._np_max <= (n + 1) * (n + 2) // 2 and self.max_points is not None:
            raise ConfigError(f"max_points must lie in [{n + 1}, {(n + 1) * (n + 2) // 2}]")
        self._rng = np.random.default_rng(self.seed)
        self._xs: list[np.ndarray] = []
        self._rs: list[np.ndarray | None] = []
        self._fs = np.empty(0)
        self._queue: deque[np.ndarray] = deque()
        self._awaiting: list[np.ndarray] = []
        self._delta = float(self.rhobeg)
        self._hess: np.ndarray | None = None
        self._finished = False
        self._usable_from = 0
        self._gen: Generator[_Batch, None, None] = self._run()
        self._started = True

    def _advance(self) -> None:
        try:
            while not self._queue:
                self._queue.extend(next(self._gen))
        except StopIteration:
            self._finished = True

    def _as_residuals(self, value: np.ndarray | float | Sequence[float] | None) -> np.ndarray | None:
        if value is None:
            return None
        scalar = np.ndim(value) == 0
        if self._mode is None:
            self._mode = not scalar
        if scalar and self._mode:
            raise InputError("this solver works on residual vectors: tell a vector, not a scalar")
        arr = np.atleast_1d(np.asarray(value, dtype=float)).ravel()
        if not scalar and not self._mode:
            raise InputError("this solver works on scalar values: tell a float, not a vector")
        if self._hess is not None and arr.size != self._hess.shape[0]:
            raise InputError(f"expected {self._hess.shape[0]} residuals, got {arr.size}")
        if arr.size == 0:
            raise InputError("empty residual vector")
        if not np.all(np.isfinite(arr)):
            return None
        if self._hess is None:
            self._hess = np.zeros((arr.size, self._n, self._n))
        return arr

    def _record(self, x: np.ndarray, residuals: np.ndarray | None) -> None:
        self._xs.append(x.copy())
        self._rs.append(residuals)
        if residuals is None:
            f = math.inf
        elif self._mode:
            f = float(residuals @ residuals)
        else:
            f = float(residuals[0])
        self._fs = np.append(self._fs, f)

    def _extra_point(self) -> np.ndarray:
        k = self.best_index
        if k is None:
            return self._rng.uniform(self._lo, self._hi)
        xk = self._xs[k]
        lo = np.maximum(self._lo, xk - self._delta)
        hi = np.minimum(self._hi, xk + self._delta)
        return self._rng.uniform(lo, hi)

    # ------------------------------------------------------------------ the algorithm
    def _run(self) -> Generator[_Batch, None, None]:
        if self.best_index is None:
            yield [self._x0.copy()]
        while self.best_index is None:  # x0 (and any warm start) failed: sample until one works
            yield [self._rng.uniform(self._lo, self._hi)]
        restarts = 0
        while True:
            yield from self._iterations()
            if restarts >= self.max_restarts:
                return
            restarts += 1
            # a wider radius at each restart, to step over the basin of a poor local minimum
            self._delta = min(self.rhobeg * 2.0**restarts, 0.5 * float(np.min(self._hi - self._lo)))
            self._usable_from = len(self._xs)  # fresh models from points sampled at the new radius
            if self._hess is not None:
                self._hess[:] = 0.0

    def _iterations(self) -> Generator[_Batch, None, None]:
        """Trust-region iterations until the radius or the projected gradient vanishes."""
        n = self._n
        c1, c2, pivot = math.sqrt(n), max(10.0, math.sqrt(n)), 1e-3
        gamma_dec, gamma_inc, eta1, delta_max = 0.5, 2.0, 0.05, 0.5 * float(np.min(self._hi - self._lo))
        improve = False  # the last step was poor with an invalid model: add a geometry point first
        while self._delta >= self.rhoend:
            delta = self._delta
            k = self.best_index
            assert k is not None
            xk, fk = self._xs[k], float(self._fs[k])
            disp = (np.asarray(self._xs) - xk) / delta
            ok = np.isfinite(self._fs)
            ok[k] = False
            ok[: self._usable_from] = False
            order = np.flatnonzero(ok)[::-1]  # most recent first
            near = select_affine(disp, order, radius=c1, pivot=pivot)
            valid = len(near) == n
            chosen = near if valid else select_affine(disp, order, radius=c2, pivot=pivot, start=near)
            if improve and not valid:
                improve = False
                yield from self._improve(xk, disp, near, 1)
                continue
            improve = False
            if len(chosen) < n:
                yield from self._improve(xk, disp, near, n - len(near))
                continue
            g, h = self._master_model(k, disp, chosen, order, c2)
            pg = np.clip(xk - g, self._lo, self._hi) - xk
            if np.linalg.norm(pg) <= 1e-12 * max(1.0, abs(fk)):
                if valid:
                    return
                yield from self._improve(xk, disp, near, 1)
                continue
            lo_s = np.maximum(self._lo - xk, -delta)
            hi_s = np.minimum(self._hi - xk, delta)
            s = solve_box_qp(g, h, lo_s, hi_s)
            pred = model_decrease(g, h, s)
            step = float(np.linalg.norm(s, np.inf))
            if pred <= 1e-15 * max(1.0, abs(fk)) or step < 1e-3 * delta:
                if valid:
                    self._delta *= gamma_dec
                else:
                    yield from self._improve(xk, disp, near, 1)
                continue
            x_new = np.clip(xk + s, self._lo, self._hi)
            yield [x_new]
            f_new = self._told_value(x_new)
            rho = (fk - f_new) / pred if math.isfinite(f_new) else -math.inf
            if rho >= eta1 and step >= 0.75 * delta:
                self._delta = min(gamma_inc * delta, delta_max)
            elif rho < eta1:
                if valid or not math.isfinite(f_new):
                    self._delta = gamma_dec * delta
                else:
                    improve = True

    def _master_model(
        self, k: int, disp: np.ndarray, chosen: list[int], order: np.ndarray, c2: float
    ) -> tuple[np.ndarray, np.ndarray]:
        """Gradient and Hessian of the model of ``f`` at the centre ``k`` (unscaled)."""
        assert self._hess is not None
        delta = self._delta
        pts = add_quadratic_points(disp, chosen, order, radius=c2, max_points=self._np_max)
        d = np.vstack([np.zeros(self._n), disp[pts]])
        rk = self._rs[k]
        assert rk is not None
        values = np.vstack([np.zeros_like(rk), np.array([self._rs[j] for j in pts]) - rk])
        grad, hess = fit_mfn_models(d, values, self._hess * delta**2)
        grad, self._hess = grad / delta, hess / delta**2
        if self._mode:
            g = 2.0 * grad.T @ rk
            h = 2.0 * (grad.T @ grad + np.einsum("m,mij->ij", rk, self._hess))
        else:
            g, h = grad[0], self._hess[0].copy()
        return g, 0.5 * (h + h.T)

    def _improve(
        self, xk: np.ndarray, disp: np.ndarray, near: list[int], count: int
    ) -> Generator[_Batch, None, None]:
        """Evaluate ``count`` geometry points, mirror the failed ones through the centre, and
        shrink the radius if still none worked, so that the next attempt differs."""
        batch = self._geometry(xk, disp, near, count)
        if batch:
            yield batch
        failed = [x for x in batch if not self._told_ok(x)]
        mirrored = [np.clip(2 * xk - x, self._lo, self._hi) for x in failed]
        mirrored = [x for x in mirrored if not np.array_equal(x, xk)]
        if mirrored:
            yield mirrored
        if not any(self._told_ok(x) for x in batch + mirrored):
            self._delta *= 0.5

    def _geometry(self, xk: np.ndarray, disp: np.ndarray, near: list[int], count: int) -> _Batch:
        """``count`` model-improving points at distance ``delta`` along directions orthogonal to
        the valid interpolation points, on whichever side the bounds leave more room; where the
        bounds block such a direction (a corner), the coordinate step that adds the most new
        direction is used instead."""
        delta = self._delta
        rows = disp[near]
        points = []
        for _ in range(count):
            comp = complement_directions(rows, list(range(len(rows))))
            if comp.shape[0] == 0:
                break
            q = comp[0]
            t, sign = max((self._room(xk, sign * q, delta), sign) for sign in (1.0, -1.0))
            step = t * sign * q
            if np.max(np.abs(step)) < 0.1 * delta:
                proj = comp.T @ comp  # projector onto the directions still missing
                best = (0.0, step)
                for i in range(self._n):
                    for sgn in (1.0, -1.0):
                        e = np.zeros(self._n)
                        e[i] = sgn
                        length = self._room(xk, e, delta)
                        score = length * float(np.linalg.norm(proj @ e))
                        if score > best[0]:
                            best = (score, length * e)
                step = best[1]
            points.append(np.clip(xk + step, self._lo, self._hi))
            rows = np.vstack([rows, step / delta])
        return points

    def _room(self, xk: np.ndarray, step: np.ndarray, delta: float) -> float:
        """How far along ``step`` one may go from ``xk``: up to ``delta`` in the infinity norm,
        within the bounds."""
        with np.errstate(divide="ignore", invalid="ignore"):
            t_hi = np.where(step > 0, (self._hi - xk) / step, np.inf)
            t_lo = np.where(step < 0, (self._lo - xk) / step, np.inf)
        return min(delta / float(np.max(np.abs(step))), float(np.min(t_hi)), float(np.min(t_lo)))

    def _index_of(self, x: np.ndarray) -> int | None:
        for i in range(len(self._xs) - 1, -1, -1):
            if np.array_equal(self._xs[i], x):
                return i
        return None

    def _told_ok(self, x: np.ndarray) -> bool:
        i = self._index_of(x)
        return i is not None and bool(np.isfinite(self._fs[i]))

    def _told_value(self, x: np.ndarray) -> float:
        i = self._index_of(x)
        return math.inf if i is None else float(self._fs[i])
