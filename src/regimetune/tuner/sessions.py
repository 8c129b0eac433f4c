"""Per-regime cache tuning: a key limit per detected regime and a two-phase switch point,
found by a derivative-free optimizer over exact trace-driven simulation.

The policy being tuned is Mantle's two-phase cache made regime-aware: the cache grows
without limit until it holds ``H`` keys, then each regime gets its own LRU limit ``n_r``
(switching when the detector's regime changes). Parameters are searched in log10 space
and rounded to integer key counts. Every candidate is scored by :func:`simulate` against
:class:`CacheObjective`'s residuals; evaluations run in a ``concurrent.futures`` executor
(a local process pool by default; the trace is handed to each worker once).

The result is a :class:`PolicyFile` (a ``Policy`` per regime id, a default, the detector's
state) and a report with the hand-set baselines beside the tuned policy.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from regimetune.models import CacheMode, CachePolicy, Evaluation, EventBatch, Policy, PolicyFile
from regimetune.models.errors import ConfigError, InputError, TuningError
from regimetune.tuner.cache import CacheResult, CacheTrace, RegimePolicy, StoreModel, simulate
from regimetune.tuner.cache.sim import DEFAULT_VALUE_SIZE
from regimetune.tuner.objectives import CacheObjective, memory_fraction

DEFAULT_OPTIMIZER = "Pounders"
PAPER_HIGH_WATERMARK = 100_000
PAPER_LIMIT = 10_000


# --- the search space --------------------------------------------------------------------


@dataclass(frozen=True)
class CacheSpace:
    """``x[0] = log10 H``, ``x[1 + i] = log10 n`` of regime ``regime_ids[i]``; all within
    ``[0, log10(n_keys)]`` (a limit beyond the keyspace is no limit)."""

    regime_ids: tuple[int, ...]
    n_keys: int

    @property
    def dim(self) -> int:
        return 1 + len(self.regime_ids)

    @property
    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        hi = max(math.log10(max(self.n_keys, 2)), 0.5)
        return np.zeros(self.dim), np.full(self.dim, hi)

    def decode(self, x: Sequence[float]) -> dict[str, int]:
        lo, hi = self.bounds
        v = np.clip(np.asarray(x, dtype=np.float64), lo, hi)
        keys = np.maximum(np.rint(10.0**v), 1).astype(np.int64)
        out = {"high_watermark_keys": int(keys[0])}
        out.update({f"limit_{r}": int(n) for r, n in zip(self.regime_ids, keys[1:], strict=True)})
        return out

    def encode(self, params: Mapping[str, float]) -> np.ndarray:
        lo, hi = self.bounds
        vals = [params["high_watermark_keys"], *(params[f"limit_{r}"] for r in self.regime_ids)]
        return np.clip(np.log10(np.maximum(np.asarray(vals, dtype=np.float64), 1.0)), lo, hi)


def regime_cache_policies(
    params: Mapping[str, float], regime_ids: Sequence[int], *, switch_time_s: float | None = None
) -> dict[int, CachePolicy]:
    """A ``CachePolicy`` per regime: two-phase with the shared switch point (``H`` keys, or
    ``switch_time_s`` when given), or a plain LRU when the switch is at the very start."""
    h = int(params["high_watermark_keys"])
    out = {}
    for r in regime_ids:
        n = int(params[f"limit_{r}"])
        if switch_time_s is not None:
            out[r] = CachePolicy(mode=CacheMode.TWO_PHASE, limit_keys=n, switch_time_s=switch_time_s)
        elif h <= 1:
            out[r] = CachePolicy(mode=CacheMode.LRU, limit_keys=n)
        else:
            out[r] = CachePolicy(mode=CacheMode.TWO_PHASE, limit_keys=n, high_watermark_keys=h)
    return out


# --- evaluation, in whatever process the executor runs it ----------------------------------


@dataclass(frozen=True, eq=False)
class _Problem:
    trace: CacheTrace
    labels: np.ndarray
    window_starts_s: np.ndarray
    space: CacheSpace
    objective: CacheObjective
    store: StoreModel
    value_size: int
    unlimited: CacheResult

    def policy(self, params: Mapping[str, float], switch_time_s: float | None = None) -> RegimePolicy:
        pols = regime_cache_policies(params, self.space.regime_ids, switch_time_s=switch_time_s)
        return RegimePolicy(
            policies=pols,
            window_starts_s=self.window_starts_s,
            labels=self.labels,
            default=_default_of(pols),
        )

    def run(self, policy: Any) -> CacheResult:
        return simulate(self.trace, policy, store=self.store, value_size=self.value_size)

    def residuals(self, x: Sequence[float]) -> tuple[np.ndarray, CacheResult]:
        res = self.run(self.policy(self.space.decode(x)))
        return self.objective.of(res, self.unlimited), res


_WORKER_PROBLEM: _Problem | None = None


def _init_worker(problem: _Problem) -> None:
    global _WORKER_PROBLEM
    _WORKER_PROBLEM = problem


def _evaluate_in_worker(x: np.ndarray) -> tuple[np.ndarray, dict[str, float]]:
    if _WORKER_PROBLEM is None:  # pragma: no cover - a pool without the initializer
        raise TuningError("worker has no tuning problem")
    r, res = _WORKER_PROBLEM.residuals(x)
    return r, _brief(res, _WORKER_PROBLEM.unlimited)


def _evaluate_with(problem: _Problem, x: np.ndarray) -> tuple[np.ndarray, dict[str, float]]:
    r, res = problem.residuals(x)
    return r, _brief(res, problem.unlimited)


def _brief(res: CacheResult, unlimited: CacheResult) -> dict[str, float]:
    return {"efficiency": res.efficiency, "memory_fraction": memory_fraction(res, unlimited)}


def _meets(objective: CacheObjective, brief: Mapping[str, float]) -> bool:
    return (
        brief["efficiency"] >= objective.efficiency_target
        and brief["memory_fraction"] <= objective.memory_budget
    )


def _default_of(pols: Mapping[int, CachePolicy]) -> CachePolicy:
    """For a regime never seen while tuning: the most generous of the tuned limits."""
    if not pols:
        return CachePolicy()
    return max(pols.values(), key=lambda p: p.limit_keys or 0)


# --- optimizers ------------------------------------------------------------------------------


class _Asker:
    """One ask/tell interface over the project's POUNDERS solver and nevergrad's optimizers."""

    def __init__(self, name: str, space: CacheSpace, x0: np.ndarray, budget: int, workers: int, seed: int):
        lo, hi = space.bounds
        self.least_squares = False
        self._ng = None
        self.name = name
        if name.lower() == "pounders":
            try:
                from regimetune.tuner.optim.pounders import PoundersSolver
            except ImportError:
                PoundersSolver = None
            if PoundersSolver is not None:
                self._solver = PoundersSolver(x0, lo, hi, seed=seed)
                self.least_squares = True
                self.name = "Pounders"
                return
            name = self.name = "TwoPointsDE"  # until the project's POUNDERS is importable
        import nevergrad as ng

        try:
            cls = ng.optimizers.registry[name]
        except KeyError:
            raise ConfigError(
                f"unknown optimizer {name!r}; use 'Pounders' or a nevergrad optimizer name such as "
                "'TwoPointsDE', 'OnePlusOne', 'CMA', 'NGOpt'"
            ) from None
        param = ng.p.Array(init=x0, lower=lo, upper=hi)
        param.random_state = np.random.RandomState(seed)
        self._ng = cls(parametrization=param, budget=budget, num_workers=max(workers, 1))
        self._pending: dict[int, Any] = {}

    def suggest(self, x: np.ndarray) -> None:
        if self._ng is not None:
            self._ng.suggest(x)

    def ask(self) -> np.ndarray:
        if self._ng is None:
            return np.asarray(self._solver.ask(), dtype=np.float64)
        import nevergrad as ng

        with warnings.catch_warnings():
            # a converged inner optimizer keeps answering with random points: fine here
            warnings.simplefilter("ignore", ng.errors.FinishedUnderlyingOptimizerWarning)
            try:
                cand = self._ng.ask()
            except RuntimeError as exc:  # a recast optimizer (e.g. scipy's) that failed
                raise TuningError(f"optimizer {self.name} failed: {exc}") from exc
        x = np.asarray(cand.value, dtype=np.float64)
        self._pending[id(x)] = cand
        return x

    def tell(self, x: np.ndarray, residuals: np.ndarray | None) -> None:
        if self._ng is None:
            self._solver.tell(x, residuals)
            return
        cand = self._pending.pop(id(x))
        loss = float(np.dot(residuals, residuals)) if residuals is not None else float("inf")
        self._ng.tell(cand, loss)

    @property
    def done(self) -> bool:
        return self._ng is None and bool(self._solver.done)


# --- the session ---------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class CacheTuning:
    """Outcome of :func:`tune_cache`: the policy file, the winning policy's simulation, the
    baselines, every evaluation and a JSON-able report."""

    policy_file: PolicyFile
    best: CacheResult
    best_params: dict[str, Any]
    unlimited: CacheResult
    baselines: dict[str, CacheResult]
    evaluations: list[Evaluation]
    report: dict[str, Any] = field(default_factory=dict)


def _warm_starts(space: CacheSpace, trace: CacheTrace, suggested_keys: int | None) -> list[np.ndarray]:
    k = space.n_keys
    ids = space.regime_ids
    picks: list[dict[str, float]] = []
    for n in (suggested_keys, PAPER_LIMIT, max(k // 30, 1), 300):
        if n:
            picks.append({"high_watermark_keys": 1, **{f"limit_{r}": n for r in ids}})
    picks.append({"high_watermark_keys": PAPER_HIGH_WATERMARK, **{f"limit_{r}": PAPER_LIMIT for r in ids}})
    return [space.encode(p) for p in picks]


def tune_cache(
    trace: CacheTrace,
    *,
    labels: np.ndarray,
    window_starts_s: np.ndarray,
    objective: CacheObjective | None = None,
    optimizer: str = DEFAULT_OPTIMIZER,
    budget: int = 80,
    executor: Executor | None = None,
    workers: int | None = None,
    store: StoreModel | None = None,
    value_size: int = DEFAULT_VALUE_SIZE,
    seed: int = 0,
    switch_time_s: float | None = None,
    suggested_keys: int | None = None,
    baselines: Mapping[str, Any] | None = None,
    detector_state: dict[str, Any] | None = None,
    trace_name: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> CacheTuning:
    """Tune a limit per regime (``labels[w]`` is the regime of the window starting at
    ``window_starts_s[w]``) and the two-phase switch point on ``trace``.

    ``switch_time_s`` (e.g. the detected start of the third regime) is tried as the switch
    point beside ``H`` keys; ``suggested_keys`` (e.g. the K-means suggestion) seeds the
    search. ``executor`` runs evaluations (default: a local process pool of ``workers``
    processes; ``workers=0`` evaluates in this process). ``baselines`` are extra named
    policies simulated for the report.
    """
    objective = objective or CacheObjective()
    store = store or StoreModel()
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise ConfigError(f"budget must be a positive number of evaluations, got {budget!r}")
    lab = np.asarray(labels, dtype=np.int64)
    starts = np.asarray(window_starts_s, dtype=np.float64)
    if lab.shape != starts.shape or lab.ndim != 1 or len(lab) == 0:
        raise InputError("labels and window starts must be equally long, non-empty vectors")
    ids = tuple(sorted({int(v) for v in lab.tolist() if v >= 0}))
    if not ids:
        raise InputError("no regime labels to tune for (all windows are unlabelled)")
    space = CacheSpace(regime_ids=ids, n_keys=trace.n_keys)
    unlimited = simulate(trace, CachePolicy(), store=store, value_size=value_size)
    problem = _Problem(trace, lab, starts, space, objective, store, value_size, unlimited)

    n_workers = min(2, os.cpu_count() or 1) if workers is None else workers
    own_pool = executor is None and n_workers > 0
    if own_pool:
        executor = ProcessPoolExecutor(max_workers=n_workers, initializer=_init_worker, initargs=(problem,))
        task: Callable[[np.ndarray], tuple[np.ndarray, dict[str, float]]] = _evaluate_in_worker
    else:
        task = partial(_evaluate_with, problem)
    batch = max(n_workers, 1)

    warm = _warm_starts(space, trace, suggested_keys)
    x0 = warm[0]
    asker = _Asker(optimizer, space, x0, budget, batch, seed)
    for x in warm[1:]:
        asker.suggest(x)
    evaluations: list[Evaluation] = []
    best: tuple[tuple[float, float], np.ndarray] | None = None
    queue = list(warm[1:]) if asker.least_squares else []
    try:
        while len(evaluations) < budget and not asker.done:
            k = min(batch, budget - len(evaluations))
            xs = []
            for _ in range(k):
                # warm starts go first for solvers that cannot be told suggestions
                xs.append(queue.pop(0) if queue else asker.ask())
            if executor is None:
                outs = [task(x) for x in xs]
            else:
                outs = [f.result() for f in [executor.submit(task, x) for x in xs]]
            for x, (r, brief) in zip(xs, outs, strict=True):
                asker.tell(x, r)
                value = objective.value(r)
                evaluations.append(
                    Evaluation(
                        params={k: float(v) for k, v in space.decode(x).items()},
                        residuals=tuple(float(v) for v in r),
                        value=value,
                    )
                )
                # the best evaluation meets both constraints if any does, then the least value
                rank = (0.0 if _meets(objective, brief) else 1.0, value)
                if best is None or rank < best[0]:
                    best = (rank, np.asarray(x))
            if progress is not None:
                progress(len(evaluations), budget)
    finally:
        if own_pool and executor is not None:
            executor.shutdown()
    if best is None:  # pragma: no cover - budget >= 1 guarantees an evaluation
        raise TuningError("no evaluation finished")

    params = space.decode(best[1])
    best_policy = problem.policy(params)
    best_res = problem.run(best_policy)
    switch_kind: dict[str, Any] = {
        "switch": "high_watermark_keys",
        "high_watermark_keys": params["high_watermark_keys"],
    }
    if switch_time_s is not None:  # the same limits, switching at the detected regime start
        alt_policy = problem.policy(params, switch_time_s=switch_time_s)
        alt = problem.run(alt_policy)

        def rank(res: CacheResult) -> tuple[bool, float]:
            return (not objective.feasible(res, unlimited), objective.value(objective.of(res, unlimited)))

        if rank(alt) < rank(best_res):
            best_res, best_policy = alt, alt_policy
            switch_kind = {"switch": "time", "switch_time_s": switch_time_s}
    score = objective.value(objective.of(best_res, unlimited))

    cache_pols = dict(best_policy.policies)
    pfile = PolicyFile(
        trace=trace_name,
        default=Policy(cache=best_policy.default, source="tuned", score=score),
        regimes={r: Policy(regime_id=r, cache=p, source="tuned", score=score) for r, p in cache_pols.items()},
        detector_state=detector_state,
    )
    base_res = {"unlimited": unlimited}
    for name, pol in (baselines or {}).items():
        base_res[name] = problem.run(pol)

    def row(res: CacheResult) -> dict[str, float]:
        r = objective.of(res, unlimited)
        return {
            **res.summary(),
            "memory_fraction": memory_fraction(res, unlimited),
            "objective": objective.value(r),
            "feasible": float(objective.feasible(res, unlimited)),
        }

    report = {
        "optimizer": asker.name,
        "budget": budget,
        "n_evaluations": len(evaluations),
        "objective": objective.get_params(),
        "store": {"capacity_ops_s": store.capacity_ops_s, "buffer_s": store.buffer_s},
        "value_size": value_size,
        "trace": {
            "requests": trace.n_requests,
            "keys": trace.n_keys,
            "duration_s": trace.duration_s,
            "regime_windows": {int(r): int(np.count_nonzero(lab == r)) for r in ids},
        },
        "best": {**switch_kind, "limits": {r: p.limit_keys for r, p in cache_pols.items()}, **row(best_res)},
        "baselines": {name: row(res) for name, res in base_res.items()},
    }
    return CacheTuning(
        policy_file=pfile,
        best=best_res,
        best_params={**params, **switch_kind},
        unlimited=unlimited,
        baselines=base_res,
        evaluations=evaluations,
        report=report,
    )


# --- from batches: windows, regimes, baselines -------------------------------------------


def paper_baselines(
    *, third_start_s: float | None = None, suggested_keys: int | None = None
) -> dict[str, CachePolicy]:
    """The hand-set policies of Sevilla et al.: a 100K-key LRU, "switch at 100K then 10K",
    and the K-means suggestion (switch at the third regime's start to its keyspace size)."""
    out = {
        "lru_100k": CachePolicy(mode=CacheMode.LRU, limit_keys=PAPER_HIGH_WATERMARK),
        "two_phase_100k_10k": CachePolicy(
            mode=CacheMode.TWO_PHASE, high_watermark_keys=PAPER_HIGH_WATERMARK, limit_keys=PAPER_LIMIT
        ),
    }
    if third_start_s is not None and suggested_keys:
        out["kmeans_suggestion"] = CachePolicy(
            mode=CacheMode.TWO_PHASE, switch_time_s=max(third_start_s, 0.0), limit_keys=int(suggested_keys)
        )
    return out


def tune_cache_batches(
    batches: Iterable[EventBatch],
    *,
    window_s: float = 10.0,
    trace_name: str | None = None,
    detector: Any | None = None,
    **kwargs: Any,
) -> CacheTuning:
    """Windows, regimes (online detector) and the paper-mode K-means on a trace, then
    :func:`tune_cache` with the paper's baselines."""
    from regimetune.collectors import window_frame
    from regimetune.regimes import OnlineRegimeDetector, paper_kmeans

    events = list(batches)
    if not events or sum(len(b) for b in events) == 0:
        raise InputError("cannot tune a cache on an empty trace")
    trace = CacheTrace.from_batches(events, window_s=window_s)
    frame = window_frame(events, window_s=window_s)
    det = detector if detector is not None else OnlineRegimeDetector()
    history = det.detect(frame)
    third_s = suggested = None
    try:
        paper = paper_kmeans(frame)
        third_s, suggested = paper.third_start_time, paper.suggested_cache_keys
    except InputError:
        pass
    state = det.to_state() if hasattr(det, "to_state") else None
    return tune_cache(
        trace,
        labels=np.asarray(history.labels),
        window_starts_s=np.asarray(frame["start"], dtype=np.float64),
        switch_time_s=third_s,
        suggested_keys=suggested,
        baselines=paper_baselines(third_start_s=third_s, suggested_keys=suggested),
        detector_state=state,
        trace_name=trace_name,
        **kwargs,
    )


__all__ = [
    "DEFAULT_OPTIMIZER",
    "CacheSpace",
    "CacheTuning",
    "paper_baselines",
    "regime_cache_policies",
    "tune_cache",
    "tune_cache_batches",
]
