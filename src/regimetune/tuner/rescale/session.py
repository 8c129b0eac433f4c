"""Per-regime tuning of the Pufferscale weights on a recorded trace (``tune --objective
rescale``).

The trace becomes windows with per-bucket statistics (keys hashed into ``n_buckets``
buckets); regimes come from :class:`regimetune.regimes.OnlineRegimeDetector` (one regime when
the trace is too short to show any). For each regime, a campaign replays that regime's windows
in order as the buckets' loads (requests) and sizes (bytes; requests when the trace has no
sizes), one or more windows per rescaling, and :func:`tune_weights` picks W_L, W_D, W_T. The
result is a :class:`PolicyFile` whose default holds the weights of the busiest regime.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from regimetune.models.errors import InputError
from regimetune.models.policy import Policy, PolicyFile
from regimetune.models.windows import WindowFrame
from regimetune.tuner.rescale.campaign import CampaignSpec
from regimetune.tuner.rescale.tuning import WeightTuningReport, tune_weights

if TYPE_CHECKING:
    from regimetune.regimes import OnlineRegimeDetector


@dataclass(frozen=True, slots=True)
class RescaleTuningResult:
    policy_file: PolicyFile
    reports: dict[int, WeightTuningReport]

    def report_json(self) -> dict[str, Any]:
        return {
            str(r): {
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
                "components": rep.components,
                "evaluations": rep.n_evaluations,
            }
            for r, rep in self.reports.items()
        }


def _finite(x: float) -> float | None:
    """``x``, or None where it is not a number (no held-out campaigns): the report is strict JSON."""
    return x if math.isfinite(x) else None


def _frame(trace: Any, trace_options: Any, window_s: float, n_buckets: int) -> tuple[WindowFrame, str | None]:
    if isinstance(trace, WindowFrame):
        return trace, None
    from regimetune.collectors import read_trace, window_frame

    batches = trace_options.open(trace) if trace_options is not None else read_trace(trace)
    return window_frame(batches, window_s=window_s, n_buckets=n_buckets), str(trace)


def _labels(frame: WindowFrame, detector: OnlineRegimeDetector | None) -> np.ndarray:
    """The regime the detector held at each window: its online labels, so a regime's
    weights are tuned on the windows where the service will use them (a change counts from
    its confirmation, not its back-dated start), as cache tuning does. Windows before the
    first regime count as regime 0; a trace too short for the detector is one regime."""
    try:
        from regimetune.regimes import OnlineRegimeDetector

        history = (detector or OnlineRegimeDetector()).detect(frame)
    except (InputError, ImportError):
        return np.zeros(len(frame), np.int64)
    online = history.online_labels
    labels = np.asarray(history.labels if online is None else online, dtype=np.int64)
    return np.where(labels < 0, 0, labels)


def tune_rescale(
    trace: str | Path | WindowFrame,
    *,
    budget: int = 30,
    optimizer: str = "Pounders",
    seed: int = 0,
    executor: cf.Executor | None = None,
    window_s: float = 10.0,
    n_buckets: int = 64,
    min_servers: int = 4,
    max_servers: int = 32,
    warmup: int = 5,
    operations: int = 15,
    trace_options: Any = None,
    out: Path | None = None,
    as_json: bool = False,
    show: bool | None = None,
    detector: OnlineRegimeDetector | None = None,
    n_seeds: int = 8,
    n_held_out: int = 8,
) -> RescaleTuningResult:
    """Tune the weights per regime of ``trace`` (a path or a :class:`WindowFrame`).

    ``detector`` names the regimes (default: a fresh :class:`OnlineRegimeDetector`; the
    service passes its own, so the ids are the ones it uses); a window belongs to the regime the
    detector held online at that window. Each regime's weights are tuned on ``n_seeds``
    campaigns and replace the best preset only if they beat it on ``n_held_out`` others
    (:func:`tune_weights`); a kept-back regime gets the preset (source ``"default"``) and its
    report's ``reason`` says why.

    ``out`` writes the policy file as JSON. ``show`` prints the report (JSON with
    ``as_json``); by default it prints when called from the CLI (``trace_options`` given).
    """
    frame, name = _frame(trace, trace_options, window_s, n_buckets)
    if len(frame) == 0:
        raise InputError("the trace has no windows")
    if frame.n_buckets == 0:
        raise InputError("the windows carry no per-bucket statistics (n_buckets = 0)")
    labels = _labels(frame, detector)
    reports: dict[int, WeightTuningReport] = {}
    policies: dict[int, Policy] = {}
    busiest, most = 0, -1.0
    for r in sorted({int(v) for v in labels.tolist()}):
        sel = labels == r
        load = np.asarray(frame.bucket_load[sel], dtype=np.float64)
        size = np.asarray(frame.bucket_bytes[sel], dtype=np.float64)
        if not size.any():
            size = load
        if not load.any():
            continue
        per_op = max(1, int(sel.sum()) // (warmup + operations))
        spec = CampaignSpec(
            load_series=load,
            size_series=size,
            windows_per_operation=per_op,
            min_servers=min_servers,
            max_servers=max_servers,
            warmup=warmup,
            operations=operations,
        )
        w, rep = tune_weights(
            spec,
            budget=budget,
            optimizer=optimizer,
            executor=executor,
            seed=seed,
            n_seeds=n_seeds,
            n_held_out=n_held_out,
        )
        reports[r] = rep
        source = "tuned" if rep.adopted else "default"
        policies[r] = Policy(regime_id=r, weights=w, source=source, score=rep.value)
        if float(load.sum()) > most:
            busiest, most = r, float(load.sum())
    if not policies:
        raise InputError("no regime of the trace has any bucket load to tune on")
    default = policies[busiest].model_copy(update={"regime_id": None})
    result = RescaleTuningResult(PolicyFile(trace=name, default=default, regimes=policies), reports)
    if out is not None:
        Path(out).write_text(result.policy_file.model_dump_json(indent=2) + "\n")
    if show if show is not None else trace_options is not None:
        _show(result, as_json, out)
    return result


def _show(result: RescaleTuningResult, as_json: bool, out: Path | None) -> None:
    if as_json:
        print(json.dumps(result.report_json()))
        return
    from rich.console import Console
    from rich.table import Table

    t = Table(title="Pufferscale weights per regime")
    for col in ("regime", "W_L", "W_D", "W_T", "objective", "best preset", "gain", "held-out gain"):
        t.add_column(col, justify="right")
    for r, rep in result.reports.items():
        w = rep.weights
        t.add_row(
            str(r),
            f"{w.w_load:.3g}",
            f"{w.w_data:.3g}",
            f"{w.w_time:.3g}",
            f"{rep.value:.4g}",
            f"{rep.best_preset} {rep.preset_values[rep.best_preset]:.4g}",
            f"{100 * rep.improvement:.1f}%",
            f"{100 * rep.held_out_improvement:.1f}%",
        )
    con = Console()
    con.print(t)
    for r, rep in result.reports.items():
        con.print(f"regime {r}: {rep.reason}", highlight=False)
    if out is not None:
        con.print(f"wrote the policy file to {out}", highlight=False)
