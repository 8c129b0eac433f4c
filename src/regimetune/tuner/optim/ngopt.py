"""``Pounders``: the POUNDERS-like solver as a nevergrad optimizer, registered by name.

Importing this module (or ``regimetune.tuner.optim``) adds ``"Pounders"`` to nevergrad's
registry, so ``ng.optimizers.registry["Pounders"](parametrization, budget)`` works with the
usual ask/tell loop. The solver works in the unit box: nevergrad's ``Normalizer`` maps each
bounded parameter linearly (``ng.p.Log``: in log space) onto ``[0, 1]``; integer-cast
parameters are relaxed to continuous values and rounded by nevergrad when read.

Least squares needs the residual vector, which nevergrad's ``tell(candidate, loss)`` cannot
carry (a vector there means multi-objective optimisation). So the optimizer adds
``tell_residuals(candidate, residuals)``: it records the vector and then calls the ordinary
``tell`` with ``sum(r**2)``, so archive, best point and callbacks stay nevergrad's. A plain
``tell(candidate, loss)`` puts the solver in scalar mode (one quadratic model of the loss);
the first tell decides the mode for the run. ``tell_failure(candidate)`` marks a failed
evaluation (a loss of ``FAILED_LOSS`` or more, or a non-finite one, counts as failed too).
Points that were not asked (``suggest`` or a ``tell`` of ``spawn_child(new_value=...)``) join
the interpolation set: that is the warm start.

>>> import nevergrad as ng
>>> import numpy as np
>>> param = ng.p.Array(shape=(2,), lower=-2.0, upper=2.0).set_integer_casting()
>>> opt = ng.optimizers.registry["Pounders"](param, budget=30)
>>> for _ in range(30):
...     cand = opt.ask()
...     opt.tell_residuals(cand, cand.value - np.array([1.0, -1.0]))
>>> opt.recommend().value.tolist()
[1, -1]
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from nevergrad import parametrization as ngp
from nevergrad.optimization import base, registry

from regimetune.tuner.optim.pounders import PoundersSolver

FAILED_LOSS = 1e20
"""The loss told to nevergrad for a failed evaluation (finite, below nevergrad's 5e20 clip)."""

_UNBOUNDED_MARGIN = 1e-3  # unbounded parameters go through arctan: stay off the infinite ends


class Pounders(base.Optimizer):
    """POUNDERS-like model-based trust-region optimizer for (least-squares) losses.

    Keyword options go to :class:`PoundersSolver` (radii in the unit box). Parallel asks get
    the solver's batch points first, then random points in its trust region.
    """

    def __init__(
        self,
        parametrization: Any,
        budget: int | None = None,
        num_workers: int = 1,
        *,
        rhobeg: float = 0.1,
        rhoend: float = 1e-8,
        max_restarts: int = 3,
        max_points: int | None = None,
    ) -> None:
        super().__init__(parametrization, budget=budget, num_workers=num_workers)
        self.rhobeg = rhobeg
        self.rhoend = rhoend
        self.max_restarts = max_restarts
        self.max_points = max_points
        self._normalizer = ngp.helpers.Normalizer(self.parametrization)
        self._unit: dict[str, np.ndarray] = {}
        self._residuals: dict[str, np.ndarray] = {}
        self._failed: set[str] = set()
        self._solver: PoundersSolver | None = None

    @property
    def solver(self) -> PoundersSolver:
        """The underlying solver, created on first use."""
        if self._solver is None:
            n = self.dimension
            margin = 0.0 if self._normalizer.fully_bounded else _UNBOUNDED_MARGIN
            lower, upper = np.full(n, margin), np.full(n, 1.0 - margin)
            x0 = self._normalizer.forward(
                self.parametrization.get_standardized_data(reference=self.parametrization)
            )
            self._solver = PoundersSolver(
                np.clip(x0, lower, upper),
                lower,
                upper,
                rhobeg=min(self.rhobeg, 0.5 * (1.0 - 2 * margin)),
                rhoend=self.rhoend,
                max_restarts=self.max_restarts,
                max_points=self.max_points,
                seed=int(self._rng.randint(2**31 - 1)),
            )
        return self._solver

    @property
    def converged(self) -> bool:
        """True once the solver has converged with no restarts left."""
        return self.solver.done

    @property
    def n_ready(self) -> int:
        """Candidates the solver can hand out now without random filler points."""
        return self.solver.n_queued

    def tell_residuals(self, candidate: ngp.Parameter, residuals: Any) -> None:
        """Tell the residual vector of ``candidate`` (non-finite entries mark it failed)."""
        r = np.asarray(residuals, dtype=float).ravel()
        if r.size and np.all(np.isfinite(r)):
            self._residuals[candidate.uid] = r
            self.tell(candidate, min(float(r @ r), FAILED_LOSS))
        else:
            self.tell_failure(candidate)

    def tell_failure(self, candidate: ngp.Parameter) -> None:
        """Record that evaluating ``candidate`` failed."""
        self._failed.add(candidate.uid)
        self.tell(candidate, FAILED_LOSS)

    # ---------------------------------------------------------------- nevergrad hooks
    def _internal_ask_candidate(self) -> ngp.Parameter:
        x = self.solver.ask()
        candidate = self.parametrization.spawn_child()
        if not np.array_equal(x, self.solver.x0):  # the start point keeps its exact initial value
            candidate.set_standardized_data(self._normalizer.backward(x))
        self._unit[candidate.uid] = x
        return candidate

    def _internal_tell_candidate(self, candidate: ngp.Parameter, loss: Any) -> None:
        solver = self.solver
        x = self._unit.pop(candidate.uid, None)
        if x is None:  # not asked: map it into the unit box
            data = candidate.get_standardized_data(reference=self.parametrization)
            x = np.clip(self._normalizer.forward(data), solver.lower, solver.upper)
        residuals = self._residuals.pop(candidate.uid, None)
        failed = candidate.uid in self._failed
        self._failed.discard(candidate.uid)
        loss = float(loss)
        if failed or not math.isfinite(loss) or loss >= FAILED_LOSS:
            solver.tell(x, None)
        elif residuals is not None:
            solver.tell(x, residuals)
        else:
            solver.tell(x, loss)

    def _internal_provide_recommendation(self) -> np.ndarray | None:
        if self._solver is None or self._solver.best_x is None:
            return None
        return np.asarray(self._normalizer.backward(self._solver.best_x), dtype=float)


if "Pounders" not in registry:
    registry.register(Pounders)
