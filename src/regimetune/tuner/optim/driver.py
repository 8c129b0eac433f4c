"""``minimize``: run any registered optimizer over a :class:`Space`, evaluations in any executor.

The objective takes a ``dict`` of parameter values and returns residuals (an array, the loss
being their sum of squares) or, with ``residuals=False``, a float. The session runs in
rounds: it asks ``batch_size`` candidates (``"Pounders"``: up to that many of the points its
algorithm has ready, so its initial design and geometry batches run in parallel and its
model steps one at a time), evaluates them at once in a ``concurrent.futures``
executor (thread or process pool, or ``distributed.Client.get_executor()``; without one,
inline) and tells the results in the order it asked. The round size is fixed whatever the
executor's worker count, so a seed gives the same result on 0, 1 or N workers. An objective
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
from regimetune.tuner.optim.executors import share
from regimetune.tuner.optim.ngopt import FAILED_LOSS, Pounders
from regimetune.tuner.optim.space import Param, Space

Objective = Callable[[dict[str, float]], Any]
Progress = Callable[[int, int, float], None]
DEFAULT_BATCH_SIZE = 4
"""Candidates asked per round: enough to keep a small pool or cluster busy, and fixed (not
the worker count) so that results do not depend on where evaluations run."""
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
    batch_size: int = DEFAULT_BATCH_SIZE,
    initial: Iterable[Mapping[str, float]] = (),
    warm_start: Iterable[tuple[Mapping[str, float], Any]] = (),
    seed: int | None = None,
    progress: Progress | None = None,
    on_evaluation: Callable[[Evaluation], None] | None = None,
    options: Mapping[str, Any] | None = None,
) -> OptimizationResult:
    """Minimise ``objective`` over ``space`` with at most ``budget`` new evaluations.

    ``initial`` points are evaluated first, in one round, and count against the budget (hand-set
    policies the search should start from); ``warm_start`` holds already evaluated
    ``(params, residuals or value)`` pairs (from an earlier run), which do not. ``batch_size``
    candidates are asked per round (1 for optimizers that cannot run in parallel). ``progress``
    is called as ``progress(done, budget, best_value)`` after each evaluation, ``on_evaluation``
    with each :class:`Evaluation` in order (a job checkpoints them so). ``options`` are
    extra keyword arguments of the optimizer class (for ``"Pounders"``: ``rhobeg``, ``rhoend``,
    ``max_restarts``, ``max_points``, radii in the unit box). Raises ``ConfigError``/``InputError``
    on bad arguments before any evaluation, ``TuningError`` when every evaluation failed or the
    executor broke.
    """
    space = space if isinstance(space, Space) else Space(space)
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise ConfigError(f"budget must be a positive integer, got {budget!r}")
    cls = _optimizer_class(optimizer)
    warm = [_warm_point(space, params, value, residuals=residuals) for params, value in warm_start]
    first = [space.check(p) for p in initial]
    if len(first) > budget:
        raise ConfigError(f"{len(first)} initial points do not fit a budget of {budget}")
    batch = 1 if getattr(cls, "no_parallelization", False) else _batch_size(batch_size)
    parametrization = space.to_parametrization()
    if seed is not None:
        parametrization.random_state = np.random.RandomState(seed)
    try:
        opt = cls(parametrization=parametrization, budget=budget, num_workers=batch, **dict(options or {}))
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"cannot build optimizer {optimizer!r}: {exc}") from exc
    session = _Session(opt, space, name=optimizer, residuals=residuals, on_evaluation=on_evaluation)
    for params, value in warm:
        session.tell_warm(params, value)
    return session.run(
        objective, budget=budget, executor=executor, batch=batch, initial=first, progress=progress
    )


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


def _batch_size(batch_size: int) -> int:
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ConfigError(f"batch_size must be a positive integer, got {batch_size!r}")
    return batch_size


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

    def __init__(
        self,
        opt: Any,
        space: Space,
        *,
        name: str,
        residuals: bool,
        on_evaluation: Callable[[Evaluation], None] | None = None,
    ) -> None:
        self.opt = opt
        self.on_evaluation = on_evaluation
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
        batch: int,
        initial: Sequence[dict[str, float]],
        progress: Progress | None,
    ) -> OptimizationResult:
        """Rounds of ask ``batch`` / evaluate together / tell in the order asked: the
        optimizer sees the same sequence whatever the executor and its worker count."""
        task = objective if executor is None else share(executor, objective)
        outcomes = _evaluate(task, list(initial), executor)
        for params, outcome in zip(initial, outcomes, strict=True):
            self._finish_initial(params, outcome)
            self._report(progress, budget)
        asked = len(initial)
        while asked < budget and not self._converged():
            round_ = []
            for k in range(min(batch, budget - asked)):
                if k and not self._has_ready():
                    break
                with warnings.catch_warnings():
                    # nevergrad's Cobyla passes scipy a RHOEND it then corrects with a warning
                    warnings.filterwarnings("ignore", message=r".*Invalid RHO(BEG|END)", category=UserWarning)
                    candidate = self.opt.ask()
                round_.append((candidate, self.space.cast(candidate.value)))
            asked += len(round_)
            outcomes = _evaluate(task, [p for _, p in round_], executor)
            for (candidate, params), outcome in zip(round_, outcomes, strict=True):
                self._finish(candidate, params, outcome)
                self._report(progress, budget)
        return self._result()

    def _finish_initial(self, params: dict[str, float], outcome: tuple[Any, str | None]) -> None:
        """An initial point: told as a warm start when it evaluated, recorded either way."""
        raw, error = outcome
        value = _check_value(raw, residuals=self.residuals) if error is None else error
        if isinstance(value, np.ndarray) and self.n_residuals not in (None, value.size):
            value = f"objective returned {value.size} residuals, earlier {self.n_residuals}"
        if isinstance(value, str):
            self.evaluations.append(Evaluation(params=params, error=value))
            return
        self.tell_warm(params, value)
        if isinstance(value, np.ndarray):
            rs = tuple(float(v) for v in value)
            self.evaluations.append(Evaluation(params=params, residuals=rs, value=float(value @ value)))
        else:
            self.evaluations.append(Evaluation(params=params, value=value))

    def _has_ready(self) -> bool:
        """Whether to ask another candidate in this round: Pounders only for the points its
        algorithm has ready (so a round never depends on the worker count and never adds
        random filler points); any other optimizer always."""
        return not isinstance(self.opt, Pounders) or self.opt.n_ready > 0

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
        if self.on_evaluation is not None:
            self.on_evaluation(self.evaluations[-1])
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


def _evaluate(
    task: Any, points: list[dict[str, float]], executor: cf.Executor | None
) -> list[tuple[Any, str | None]]:
    """Every point's outcome, in the order given; on an executor they run at once."""
    if executor is None:
        return [_inline(task, p) for p in points]
    try:
        futures = [executor.submit(_call, task, p) for p in points]
    except RuntimeError as exc:  # shut down or broken executor
        raise TuningError(f"the executor cannot take evaluations: {exc}") from exc
    try:
        return [_outcome(f) for f in futures]
    except TuningError:
        for f in futures:
            f.cancel()
        raise


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
