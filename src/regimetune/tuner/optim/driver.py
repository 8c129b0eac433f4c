"""``minimize``: run any registered optimizer over a :class:`Space`, evaluations in any executor.

The objective takes a ``dict`` of parameter values and returns residuals (an array, the loss
being their sum of squares) or, with ``residuals=False``, a float. Up to ``num_workers``
candidates are in flight at once through a ``concurrent.futures`` executor (thread or process
pool, or ``distributed.Client.get_executor()``); without one they run inline. An objective
that raises or returns non-finite values is recorded as a failed :class:`Evaluation` and the
session goes on.

>>> import numpy as np
>>> space = Space([Param("a", -2, 2), Param("b", -2, 2)])
>>> res = minimize(lambda p: np.array([p["a"] - 1, 2 * (p["b"] + 0.5)]), space, budget=20, seed=0)
>>> round(res.best_params["a"], 6), round(res.best_params["b"], 6), res.optimizer
(1.0, -0.5, 'Pounders')
"""

from __future__ import annotations

import concurrent.futures as cf
import difflib
import math
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import nevergrad as ng
import numpy as np
from nevergrad.common import errors as ng_errors

from regimetune.models.errors import ConfigError, InputError, TuningError
from regimetune.models.tuning import Evaluation
from regimetune.tuner.optim.ngopt import FAILED_LOSS, Pounders
from regimetune.tuner.optim.space import Param, Space

Objective = Callable[[dict[str, float]], Any]
Progress = Callable[[int, int, float], None]
_COMMON = ("Pounders", "NGOpt", "Cobyla", "CMA", "BOBYQA", "DE", "PSO", "TwoPointsDE", "RandomSearch")


@dataclass(frozen=True, slots=True)
class OptimizationResult:
    """What a :func:`minimize` session found. ``evaluations`` are this session's, in order of
    completion (warm-start points are not re-counted); the best may come from the warm start."""

    best_params: dict[str, float]
    best_value: float
    best_residuals: tuple[float, ...] | None
    evaluations: tuple[Evaluation, ...]
    n_failed: int
    optimizer: str

    @property
    def n_evaluations(self) -> int:
        return len(self.evaluations)


def available_optimizers() -> list[str]:
    """Names accepted by :func:`minimize` (nevergrad's registry, which includes ``"Pounders"``)."""
    return sorted(ng.optimizers.registry)


def minimize(
    objective: Objective,
    space: Space | Sequence[Param],
    *,
    budget: int,
    optimizer: str = "Pounders",
    residuals: bool = True,
    executor: cf.Executor | None = None,
    num_workers: int | None = None,
    warm_start: Iterable[tuple[Mapping[str, float], Any]] = (),
    seed: int | None = None,
    progress: Progress | None = None,
    options: Mapping[str, Any] | None = None,
) -> OptimizationResult:
    """Minimise ``objective`` over ``space`` with at most ``budget`` new evaluations.

    ``warm_start`` holds already evaluated ``(params, residuals or value)`` pairs. ``progress``
    is called as ``progress(done, budget, best_value)`` after each evaluation. ``num_workers``
    defaults to the executor's worker count (1 inline; pass it for a Dask executor).
    ``options`` are extra keyword arguments of the optimizer class (for ``"Pounders"``:
    ``rhobeg``, ``rhoend``, ``max_restarts``, ``max_points``, radii in the unit box). Raises ``ConfigError``/``InputError``
    on bad arguments before any evaluation, ``TuningError`` when every evaluation failed or the
    executor broke.
    """
    space = space if isinstance(space, Space) else Space(space)
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise ConfigError(f"budget must be a positive integer, got {budget!r}")
    cls = _optimizer_class(optimizer)
    warm = [_warm_point(space, params, value, residuals=residuals) for params, value in warm_start]
    workers = _workers(executor, num_workers)
    if getattr(cls, "no_parallelization", False):
        workers = 1
    parametrization = space.to_parametrization()
    if seed is not None:
        parametrization.random_state = np.random.RandomState(seed)
    try:
        opt = cls(parametrization=parametrization, budget=budget, num_workers=workers, **dict(options or {}))
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"cannot build optimizer {optimizer!r}: {exc}") from exc
    session = _Session(opt, space, name=optimizer, residuals=residuals)
    for params, value in warm:
        session.tell_warm(params, value)
    return session.run(objective, budget=budget, executor=executor, workers=workers, progress=progress)


def _optimizer_class(name: str) -> Any:
    registry = ng.optimizers.registry
    if not isinstance(name, str) or name not in registry:
        close = difflib.get_close_matches(str(name), list(registry), n=5)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise ConfigError(
            f"unknown optimizer {name!r}{hint}; choose one of {', '.join(_COMMON)}, "
            f"or any of the {len(registry)} names in nevergrad's registry"
        )
    return registry[name]


def _workers(executor: cf.Executor | None, num_workers: int | None) -> int:
    if num_workers is not None:
        if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 1:
            raise ConfigError(f"num_workers must be a positive integer, got {num_workers!r}")
        return num_workers
    if executor is None:
        return 1
    return max(1, int(getattr(executor, "_max_workers", 1) or 1))


def _warm_point(
    space: Space, params: Mapping[str, float], value: Any, *, residuals: bool
) -> tuple[dict[str, float], np.ndarray | float]:
    point = space.check(params)
    checked = _check_value(value, residuals=residuals)
    if isinstance(checked, str):
        raise InputError(f"warm-start point {point}: {checked}")
    return point, checked


def _check_value(value: Any, *, residuals: bool) -> np.ndarray | float | str:
    """The objective's output as residuals or a float, or the reason it is unusable."""
    try:
        if residuals:
            r = np.asarray(value, dtype=float).ravel()
            if r.size == 0:
                return "objective returned no residuals"
            if not np.all(np.isfinite(r)):
                return "objective returned non-finite residuals"
            return r
        if np.ndim(value) != 0:
            return f"objective returned an array of shape {np.shape(value)}, expected a float"
        v = float(value)
    except (TypeError, ValueError) as exc:
        return f"objective returned an unusable value: {exc}"
    return v if math.isfinite(v) else f"objective returned {v}"


def _call(objective: Objective, params: dict[str, float]) -> Any:
    return objective(params)


class _Session:
    """The ask / evaluate / tell loop of one :func:`minimize` call."""

    def __init__(self, opt: Any, space: Space, *, name: str, residuals: bool) -> None:
        self.opt = opt
        self.name = name
        self.space = space
        self.residuals = residuals
        self.evaluations: list[Evaluation] = []
        self.n_residuals: int | None = None
        self.best: tuple[float, dict[str, float], tuple[float, ...] | None] | None = None

    def tell_warm(self, params: dict[str, float], value: np.ndarray | float) -> None:
        if isinstance(value, np.ndarray):
            if self.n_residuals is not None and value.size != self.n_residuals:
                raise InputError(f"warm-start points have {value.size} and {self.n_residuals} residuals")
            self.n_residuals = value.size
        candidate = self.opt.parametrization.spawn_child(new_value=params)
        try:
            self._tell(candidate, value)
        except ng_errors.TellNotAskedNotSupportedError as exc:
            raise ConfigError(f"optimizer {self.name} does not accept warm-start points") from exc
        self._keep_best(self.space.cast(candidate.value), value)

    def run(
        self,
        objective: Objective,
        *,
        budget: int,
        executor: cf.Executor | None,
        workers: int,
        progress: Progress | None,
    ) -> OptimizationResult:
        pending: dict[cf.Future[Any], tuple[Any, dict[str, float]]] = {}
        submitted = 0
        while submitted < budget or pending:
            while submitted < budget and len(pending) < workers and not self._converged():
                with warnings.catch_warnings():
                    # nevergrad's Cobyla passes scipy a RHOEND it then corrects with a warning
                    warnings.filterwarnings("ignore", message=r".*Invalid RHO(BEG|END)", category=UserWarning)
                    candidate = self.opt.ask()
                params = self.space.cast(candidate.value)
                submitted += 1
                if executor is None:
                    self._finish(candidate, params, _inline(objective, params))
                    self._report(progress, budget)
                    continue
                try:
                    pending[executor.submit(_call, objective, params)] = (candidate, params)
                except RuntimeError as exc:  # shut down or broken executor
                    raise TuningError(f"the executor cannot take evaluations: {exc}") from exc
            if not pending:
                if self._converged() or submitted >= budget:
                    break
                continue
            done, _ = cf.wait(pending, return_when=cf.FIRST_COMPLETED)
            for future in done:
                candidate, params = pending.pop(future)
                self._finish(candidate, params, _outcome(future))
                self._report(progress, budget)
        return self._result()

    def _converged(self) -> bool:
        return isinstance(self.opt, Pounders) and self.opt.converged

    def _finish(self, candidate: Any, params: dict[str, float], outcome: tuple[Any, str | None]) -> None:
        raw, error = outcome
        value = _check_value(raw, residuals=self.residuals) if error is None else error
        if isinstance(value, np.ndarray):
            if self.n_residuals is None:
                self.n_residuals = value.size
            elif value.size != self.n_residuals:
                value = f"objective returned {value.size} residuals, earlier {self.n_residuals}"
        if isinstance(value, str):
            self.evaluations.append(Evaluation(params=params, error=value))
            if isinstance(self.opt, Pounders):
                self.opt.tell_failure(candidate)
            else:
                self.opt.tell(candidate, FAILED_LOSS)
            return
        self._tell(candidate, value)
        if isinstance(value, np.ndarray):
            rs = tuple(float(v) for v in value)
            self.evaluations.append(Evaluation(params=params, residuals=rs, value=float(value @ value)))
        else:
            self.evaluations.append(Evaluation(params=params, value=value))
        self._keep_best(params, value)

    def _tell(self, candidate: Any, value: np.ndarray | float) -> None:
        if isinstance(value, np.ndarray):
            if isinstance(self.opt, Pounders):
                self.opt.tell_residuals(candidate, value)
                return
            value = float(value @ value)
        self.opt.tell(candidate, min(value, FAILED_LOSS))

    def _keep_best(self, params: dict[str, float], value: np.ndarray | float) -> None:
        if isinstance(value, np.ndarray):
            loss, rs = float(value @ value), tuple(float(v) for v in value)
        else:
            loss, rs = float(value), None
        if self.best is None or loss < self.best[0]:
            self.best = (loss, dict(params), rs)

    def _report(self, progress: Progress | None, budget: int) -> None:
        if progress is not None:
            progress(len(self.evaluations), budget, self.best[0] if self.best else math.inf)

    def _result(self) -> OptimizationResult:
        n_failed = sum(e.failed for e in self.evaluations)
        if self.best is None:
            first = next((e.error for e in self.evaluations if e.failed), "no evaluation ran")
            raise TuningError(f"all {n_failed} evaluations failed; the first: {first}")
        loss, params, rs = self.best
        return OptimizationResult(
            best_params=params,
            best_value=loss,
            best_residuals=rs,
            evaluations=tuple(self.evaluations),
            n_failed=n_failed,
            optimizer=self.name,
        )


def _inline(objective: Objective, params: dict[str, float]) -> tuple[Any, str | None]:
    try:
        return objective(params), None
    except Exception as exc:  # an objective's own failure is data, not a crash
        return None, f"{type(exc).__name__}: {exc}"


def _outcome(future: cf.Future[Any]) -> tuple[Any, str | None]:
    try:
        return future.result(), None
    except cf.BrokenExecutor as exc:
        raise TuningError(f"the executor broke while evaluating: {exc}") from exc
    except Exception as exc:
        return None, f"{type(exc).__name__}: {exc}"
