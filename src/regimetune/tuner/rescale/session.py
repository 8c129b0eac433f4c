"""Per-regime tuning of the Pufferscale weights on a recorded trace: the rescale half of
:func:`regimetune.tuner.tune`.

A workload's windows carry per-bucket statistics (keys hashed into buckets); each window is
labelled by the regime whose policy is in force (:func:`regimetune.tuner.workload.policy_labels`:
a change counts from its confirmation). For each label, a campaign replays its windows in
order as the buckets' loads (requests) and sizes (bytes; requests when the trace has no
sizes), one or more windows per rescaling, and :func:`tune_campaign` picks W_L, W_D, W_T.
Windows before the first regime tune the policy file's default (the policy in force there);
without such windows the default is the busiest regime's. A :class:`CampaignSpec` given
instead of a workload is tuned as one regime (id 0).
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from regimetune.models import Evaluation, Objective, Policy, PolicyFile
from regimetune.models.errors import InputError
from regimetune.tuner.config import RescaleConfig, Validation, WarmStart
from regimetune.tuner.optim.executors import default_workers, open_executor
from regimetune.tuner.rescale.campaign import CampaignSpec
from regimetune.tuner.rescale.tuning import WeightTuningReport, at_bounds, tune_campaign
from regimetune.tuner.result import Search, TuningResult, Verdict
from regimetune.tuner.workload import NO_REGIME, Workload


def _held_out(n_seeds: int, holdout: float) -> int:
    """Held-out campaigns for ``n_seeds`` training ones, ``holdout`` being their share of all.

    >>> _held_out(8, 0.5), _held_out(8, 0.25), _held_out(8, 0.0)
    (8, 3, 0)
    """
    return 0 if holdout <= 0 else max(1, round(n_seeds * holdout / (1.0 - holdout)))


def _campaigns(workload: Workload, config: RescaleConfig) -> dict[int, tuple[CampaignSpec, float]]:
    """A campaign per label with bucket load, and that load (to find the busiest regime)."""
    frame = workload.frame
    if frame is None:
        raise InputError("rescale tuning needs the trace's windows, not only its requests")
    if frame.n_buckets == 0:
        raise InputError("the windows carry no per-bucket statistics (n_buckets = 0)")
    out = {}
    for r in sorted({int(v) for v in workload.labels.tolist()}):
        sel = workload.labels == r
        load = np.asarray(frame.bucket_load[sel], dtype=np.float64)
        size = np.asarray(frame.bucket_bytes[sel], dtype=np.float64)
        if not size.any():
            size = load
        if not load.any():
            continue
        per_op = max(1, int(sel.sum()) // (config.warmup + config.operations))
        spec = CampaignSpec(
            load_series=load,
            size_series=size,
            windows_per_operation=per_op,
            min_servers=config.min_servers,
            max_servers=config.max_servers,
            warmup=config.warmup,
            operations=config.operations,
        )
        out[r] = (spec, float(load.sum()))
    if not out:
        raise InputError("no regime of the trace has any bucket load to tune on")
    return out


@contextlib.contextmanager
def _pool(executor: cf.Executor | str | None, workers: int | None) -> Iterator[cf.Executor | None]:
    """One pool for every regime's search (each task carries its own campaign)."""
    n = default_workers() if workers is None else workers
    if isinstance(executor, cf.Executor):
        yield executor
    elif executor is None and n <= 0:
        yield None
    else:
        with open_executor(executor or "process", workers=n) as pool:
            yield pool


def tune_rescale(
    data: Workload | CampaignSpec,
    config: RescaleConfig,
    *,
    validation: Validation,
    warm_start: WarmStart | None = None,
    executor: cf.Executor | str | None = None,
    workers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    on_evaluation: Callable[[Evaluation], None] | None = None,
) -> TuningResult:
    """Tune the weights per regime of ``data`` (see :func:`regimetune.tuner.tune`, which
    validates the arguments and calls this)."""
    if isinstance(data, CampaignSpec):
        campaigns, windows = {0: (data, 1.0)}, {}
        name, state = None, None
    else:
        campaigns, windows = _campaigns(data, config), data.windows_of()
        name, state = data.name, data.detector_state
    n_held = _held_out(config.n_seeds, validation.holdout_for(Objective.RESCALE))
    current = validation.current
    total = config.budget * len(campaigns)
    done = 0

    def told(e: Evaluation) -> None:
        nonlocal done
        done += 1
        if on_evaluation is not None:
            on_evaluation(e)
        if progress is not None:
            progress(min(done, total), total)

    reports: dict[int, WeightTuningReport] = {}
    with _pool(executor, workers) as pool:
        for r, (spec, _load) in campaigns.items():
            cur = None if current is None else _policy_of(current, r)
            warm = None if warm_start is None else _policy_of(warm_start.policies, r)
            reports[r] = tune_campaign(
                spec,
                config,
                n_held_out=n_held,
                current=None if cur is None else cur.weights,
                starts=() if warm is None else (warm.weights,),
                past=() if warm_start is None else warm_start.evaluations_for((r,)),
                min_gain=validation.min_gain,
                executor=pool,
                on_evaluation=told,
            )
    return _result(reports, campaigns, windows, config, n_held, current, name, state, warm_start is not None)


def _policy_of(pf: PolicyFile, label: int) -> Policy:
    return pf.default if label == NO_REGIME else pf.regimes.get(label, pf.default)


def _in_force(rep: WeightTuningReport, label: int, current: PolicyFile | None) -> Policy:
    """The regime's policy to use: the tuned weights if adopted, the current policy if it
    stayed the incumbent, else the best preset."""
    rid = None if label == NO_REGIME else label
    if rep.adopted:
        return Policy(regime_id=rid, weights=rep.weights, source="tuned", score=rep.value)
    if current is not None and rep.incumbent == "current":
        return _policy_of(current, label).model_copy(update={"regime_id": rid})
    return Policy(regime_id=rid, weights=rep.weights, source="default", score=rep.value)


def _result(
    reports: dict[int, WeightTuningReport],
    campaigns: dict[int, tuple[CampaignSpec, float]],
    windows: dict[int, int],
    config: RescaleConfig,
    n_held: int,
    current: PolicyFile | None,
    name: str | None,
    state: dict[str, Any] | None,
    warm_started: bool,
) -> TuningResult:
    ids = [r for r in reports if r != NO_REGIME]
    policies = {r: _in_force(reports[r], r, current) for r in ids}
    if NO_REGIME in reports:
        default = _in_force(reports[NO_REGIME], NO_REGIME, current)
    else:  # no windows ran the default: the busiest regime's weights serve there
        busiest = max(ids, key=lambda r: campaigns[r][1])
        default = policies[busiest].model_copy(update={"regime_id": None})
    candidates = {
        r: Policy(
            regime_id=None if r == NO_REGIME else r,
            weights=rep.candidate,
            source="tuned",
            score=rep.candidate_value,
        )
        for r, rep in reports.items()
    }
    verdicts = {
        r: Verdict(rep.adopted, rep.reason, rep.candidate_held_out_value, rep.incumbent_held_out_value)
        for r, rep in reports.items()
    }
    table: dict[str, dict[str, float]] = {"tuned": {}}
    for r, rep in reports.items():
        table["tuned"][f"regime {r}"] = rep.candidate_value
        if rep.held_out_seeds:
            table["tuned"][f"regime {r} held-out"] = rep.candidate_held_out_value
        for p, v in rep.preset_values.items():
            table.setdefault(p, {})[f"regime {r}"] = v
            if p in rep.held_out_preset_values:
                table[p][f"regime {r} held-out"] = rep.held_out_preset_values[p]
    bounds = {r: at_bounds(rep.candidate) for r, rep in reports.items()}
    binds = {
        "bounds": {r: b for r, b in bounds.items() if b},
        "notes": [
            f"regime {r}: the tuned weights sit on the search's bound ({', '.join(b)})"
            for r, b in bounds.items()
            if b
        ],
    }
    n_evals = sum(rep.n_evaluations for rep in reports.values())
    report = {
        "objective": Objective.RESCALE.value,
        "optimizer": next(iter(reports.values())).optimizer,
        "budget": config.budget,
        "n_evaluations": n_evals,
        "best_value": float(np.mean([rep.value for rep in reports.values()])),
        "warm_started": warm_started,
        "settings": config.get_params(),
        "held_out_campaigns": n_held,
        "trace": {
            "windows": sum(windows.values()),
            "regime_windows": {r: windows.get(r, 0) for r in reports},
        },
        "regimes": {r: _regime_json(rep, windows.get(r, 0)) for r, rep in reports.items()},
        "baselines": table,
        "binds": binds,
        "decision": {
            "push": any(rep.adopted for rep in reports.values()),
            "reason": "; ".join(f"regime {r}: {rep.reason}" for r, rep in reports.items()),
        },
    }
    return TuningResult(
        objective=Objective.RESCALE,
        policy_file=PolicyFile(trace=name, default=default, regimes=policies, detector_state=state),
        candidates=candidates,
        searches=tuple(
            Search(regimes=(r,), optimizer=rep.optimizer, evaluations=rep.evaluations)
            for r, rep in reports.items()
        ),
        verdicts=verdicts,
        baselines=table,
        binds=binds,
        report=report,
        detail=reports,
    )


def _regime_json(rep: WeightTuningReport, windows: int) -> dict[str, Any]:
    return {
        "windows": windows,
        "weights": rep.weights.model_dump(),
        "value": rep.value,
        "preset_values": rep.preset_values,
        "best_preset": rep.best_preset,
        "improvement_over_best_preset": rep.improvement,
        "adopted": rep.adopted,
        "reason": rep.reason,
        "incumbent": rep.incumbent,
        "candidate": rep.candidate.model_dump(),
        "candidate_value": rep.candidate_value,
        "held_out_value": _finite(rep.held_out_value),
        "candidate_held_out_value": _finite(rep.candidate_held_out_value),
        "held_out_preset_values": rep.held_out_preset_values,
        "held_out_se": _finite(rep.held_out_se),
        "components": rep.components,
        "evaluations": rep.n_evaluations,
    }


def _finite(x: float) -> float | None:
    """``x``, or None where it is not a number (no held-out campaigns): the report is strict JSON."""
    return x if np.isfinite(x) else None


__all__: list[str] = []  # the rescale half of regimetune.tuner.tune, which is the entry point
