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

import os
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
from regimetune.tuner.optim import Param, Space, available_optimizers, minimize

DEFAULT_OPTIMIZER = "Pounders"
PAPER_HIGH_WATERMARK = 100_000
PAPER_LIMIT = 10_000


# --- the search space --------------------------------------------------------------------


def cache_space(regime_ids: Sequence[int], n_keys: int, *, init: Mapping[str, float] | None = None) -> Space:
    """The search space: ``high_watermark_keys`` (H) and ``limit_<r>`` per regime id, integer
    key counts on a log scale within ``[1, n_keys]`` (a limit beyond the keyspace is no limit).

    >>> [p.name for p in cache_space([0, 2], 1000).params]
    ['high_watermark_keys', 'limit_0', 'limit_2']
    """
    hi = float(max(n_keys, 2))
    names = ["high_watermark_keys", *(f"limit_{r}" for r in regime_ids)]
    init = init or {}
    return Space(
        [
            Param(
                n,
                1.0,
                hi,
                integer=True,
                log=True,
                init=min(max(float(init[n]), 1.0), hi) if n in init else None,
            )
            for n in names
        ]
    )


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
    regime_ids: tuple[int, ...]
    objective: CacheObjective
    store: StoreModel
    value_size: int
    unlimited: CacheResult

    def policy(self, params: Mapping[str, float], switch_time_s: float | None = None) -> RegimePolicy:
        pols = regime_cache_policies(params, self.regime_ids, switch_time_s=switch_time_s)
        return RegimePolicy(
            policies=pols,
            window_starts_s=self.window_starts_s,
            labels=self.labels,
            default=_default_of(pols),
        )

    def run(self, policy: Any) -> CacheResult:
        return simulate(self.trace, policy, store=self.store, value_size=self.value_size)

    def residuals(self, params: Mapping[str, float]) -> np.ndarray:
        res = self.run(self.policy(params))
        return self.objective.of(res, self.unlimited)


_WORKER_PROBLEM: _Problem | None = None


def _init_worker(problem: _Problem) -> None:
    global _WORKER_PROBLEM
    _WORKER_PROBLEM = problem


def _residuals_in_worker(params: dict[str, float]) -> np.ndarray:
    """Objective for a pool started with ``_init_worker``: the trace crossed over once."""
    if _WORKER_PROBLEM is None:  # pragma: no cover - a pool without the initializer
        raise TuningError("worker has no tuning problem")
    return _WORKER_PROBLEM.residuals(params)


def _residuals_with(problem: _Problem, params: dict[str, float]) -> np.ndarray:
    return problem.residuals(params)


def _meets(residuals: Sequence[float] | None) -> bool:
    """Both constraints hold: their hinge residuals are zero (see ``CacheObjective``)."""
    return residuals is not None and residuals[0] == 0.0 and residuals[1] == 0.0


def _default_of(pols: Mapping[int, CachePolicy]) -> CachePolicy:
    """For a regime never seen while tuning: the most generous of the tuned limits."""
    if not pols:
        return CachePolicy()
    return max(pols.values(), key=lambda p: p.limit_keys or 0)


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


def _warm_starts(
    regime_ids: Sequence[int], n_keys: int, suggested_keys: int | None
) -> list[dict[str, float]]:
    """Uniform limits (the K-means suggestion, the paper's 10K, a 30th of the keyspace, 300
    keys) from the start, and the paper's "100K then 10K"; clipped to the keyspace."""
    picks: list[dict[str, float]] = []
    for n in (suggested_keys, PAPER_LIMIT, max(n_keys // 30, 1), 300):
        if n:
            picks.append({"high_watermark_keys": 1, **{f"limit_{r}": n for r in regime_ids}})
    picks.append(
        {"high_watermark_keys": PAPER_HIGH_WATERMARK, **{f"limit_{r}": PAPER_LIMIT for r in regime_ids}}
    )
    hi = max(n_keys, 2)
    out = []
    for p in picks:
        q = {k: float(min(max(int(v), 1), hi)) for k, v in p.items()}
        if q not in out:
            out.append(q)
    return out


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
    if optimizer not in available_optimizers():
        raise ConfigError(
            f"unknown optimizer {optimizer!r}; use 'Pounders' (default) or a nevergrad optimizer such as "
            "'TwoPointsDE', 'OnePlusOne', 'CMA', 'NGOpt'"
        )
    unlimited = simulate(trace, CachePolicy(), store=store, value_size=value_size)
    problem = _Problem(trace, lab, starts, ids, objective, store, value_size, unlimited)
    warm = _warm_starts(ids, trace.n_keys, suggested_keys)[: max(budget - 1, 1)]
    space = cache_space(ids, trace.n_keys, init=warm[0])

    n_workers = min(2, os.cpu_count() or 1) if workers is None else workers
    own_pool = executor is None and n_workers > 0
    if own_pool:
        executor = ProcessPoolExecutor(max_workers=n_workers, initializer=_init_worker, initargs=(problem,))
        task: Callable[[dict[str, float]], np.ndarray] = _residuals_in_worker
    else:
        task = partial(_residuals_with, problem)
    try:
        # the warm starts are evaluated here (they count against the budget) and told to the
        # optimizer, so it starts from the best of the hand-set policies
        if executor is None:
            warm_r = [task(p) for p in warm]
        else:
            warm_r = [f.result() for f in [executor.submit(task, p) for p in warm]]
        if progress is not None:
            progress(len(warm), budget)
        run = minimize(
            task,
            space,
            budget=max(budget - len(warm), 1),
            optimizer=optimizer,
            executor=executor,
            num_workers=max(n_workers, 1) if executor is not None else None,
            warm_start=list(zip(warm, warm_r, strict=True)),
            seed=seed,
            progress=None if progress is None else lambda done, _b, _v: progress(len(warm) + done, budget),
        )
    finally:
        if own_pool and executor is not None:
            executor.shutdown()
    evaluations = [
        Evaluation(params=p, residuals=tuple(float(v) for v in r), value=objective.value(r))
        for p, r in zip(warm, warm_r, strict=True)
    ] + list(run.evaluations)
    # the best evaluation meets both constraints if any does, then has the least value
    ok = [e for e in evaluations if not e.failed]
    best = min(ok, key=lambda e: (not _meets(e.residuals), e.value))
    params = {k: int(v) for k, v in best.params.items()}
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
        "optimizer": run.optimizer,
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
    :func:`tune_cache` with the paper's baselines. Policies switch on the regime the detector
    held at each window (its online labels, detection delay included), as the service would."""
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
        # the regime the detector held at each window (no hindsight): what the service will do
        labels=np.asarray(history.online_labels if history.online_labels is not None else history.labels),
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
    "cache_space",
    "CacheTuning",
    "paper_baselines",
    "regime_cache_policies",
    "tune_cache",
    "tune_cache_batches",
]
