"""The reports of ``regimetune tune --report``, one self-contained HTML file each.

Cache tuning: the read rate coloured by the regime the policy followed, the miss-ratio
curves per regime, the tuned limits over time against the keyspace, the optimiser's
convergence, the comparison with the baselines ``tune`` simulates, the cost-model sweep
(a section that says "not computed" when the result carries none) and the settings.
Rescale tuning: the regimes, W_L/W_D/W_T per regime and the campaign scores beside the
presets', on the tuning campaigns and on held-out ones. Every chart is named (``<figure id="chart-NAME">``), so tests and readers can
find it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from regimetune.models import InputError, WindowFrame
from regimetune.regimes.plot import time_axis
from regimetune.reports import tune_charts
from regimetune.reports.charts import figure_data_uri, rate_timeline, regime_color, window_length
from regimetune.reports.detect import write_detect_report
from regimetune.reports.page import (
    BASELINE_LABELS,
    BASELINE_NOTE,
    HtmlTable,
    figure_html,
    render_page,
    tuned_policy_text,
)
from regimetune.reports.tune_data import (
    RequestStream,
    convergence_of,
    limits_over_time,
    miss_ratio_curves_of,
    sweep_of,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from regimetune.tuner import TuningResult, Workload
    from regimetune.tuner.cache.session import CacheDetail
    from regimetune.tuner.rescale.tuning import WeightTuningReport

NOT_COMPUTED = "not computed"
DEFAULT_ROW = "none yet (default)"
"""The row of the windows before the detector held any regime (label -1): the default ran there."""

# (key in a report row, column header, format); columns whose key no row has are left out
_COLUMNS: tuple[tuple[str, str, Callable[[float], str]], ...] = (
    ("efficiency", "efficiency", lambda v: f"{v:.4f}"),
    ("hit_ratio", "hit ratio", lambda v: f"{v:.4f}"),
    ("hit_ratio_vs_unlimited", "hit ratio / unlimited", lambda v: f"{100 * v:.2f} %"),
    ("byte_hit_ratio_vs_unlimited", "byte hit ratio / unlimited", lambda v: f"{100 * v:.2f} %"),
    ("memory_fraction", "memory / unlimited", lambda v: f"{100 * v:.2f} %"),
    ("peak_fraction", "peak memory / unlimited", lambda v: f"{100 * v:.2f} %"),
    ("mean_bytes", "memory (time avg)", lambda v: f"{v / 1e6:,.2f} MB"),
    ("peak_bytes", "memory (peak)", lambda v: f"{v / 1e6:,.2f} MB"),
    ("objective", "objective", lambda v: f"{v:.4g}"),
    ("feasible", "meets constraints", lambda v: "yes" if v else "no"),
)


def _chart(name: str, fig: Figure, alt: str) -> str:
    return figure_html(figure_data_uri(fig), alt, name=name)


LIVE_SECTION = "read rate by the regime in force (live)"
LIVE_TITLE = "Read rate by the regime whose policy was in force (live: from each confirmation)"
"""The timeline's title in the tune reports: its labels are the regime the service would have
followed, from the window that confirmed it, unlike ``detect``'s, dated where each began."""


def _timeline(frame: WindowFrame, labels: np.ndarray) -> str:
    return _chart(
        "rate-by-regime",
        rate_timeline(frame, labels, title=LIVE_TITLE),
        "reads per second over time, coloured by the regime whose policy was in force",
    )


def comparison_table(report: Mapping[str, Any]) -> HtmlTable:
    """The tuned policy and every baseline, one row each, with the columns the report has."""
    rows = [("tuned", report["best"])] + [
        (BASELINE_LABELS.get(n, n), r) for n, r in report.get("baselines", {}).items()
    ]
    unl = report.get("baselines", {}).get("unlimited", {}).get("hit_ratio")
    if unl and "hit_ratio_vs_unlimited" not in report["best"]:
        rows = [
            (n, {**r, "hit_ratio_vs_unlimited": r["hit_ratio"] / unl} if "hit_ratio" in r else r)
            for n, r in rows
        ]
    cols = [c for c in _COLUMNS if any(c[0] in r for _, r in rows)]
    return HtmlTable(
        caption="the tuned policy beside the baselines, simulated on the same trace",
        headers=("policy", *(h for _, h, _f in cols)),
        rows=tuple((name, *(fmt(float(r[k])) if k in r else "" for k, _h, fmt in cols)) for name, r in rows),
    )


def binding_note(report: Mapping[str, Any]) -> str:
    """Plain sentences on which constraints bound: the tuning's own notes
    (``report["binds"]["notes"]``) and its push decision when it has them; otherwise a
    sentence when the efficiency target separates no policy (every one compared, the tuned
    one included, meets it, so the tuning only traded memory). Empty if nothing to say."""
    notes = list((report.get("binds") or {}).get("notes") or [])
    decision = report.get("decision") or {}
    if "reason" in decision:
        what = "push the tuned policy" if decision.get("push") else "keep the current policy"
        notes.append(f"Decision: {what} ({decision['reason']}).")
    if notes or "binds" in report:
        return "".join(f'<p class="notice">{escape(str(n))}</p>' for n in notes)
    target = (report.get("target") or {}).get("efficiency_target")
    rows = [report["best"], *report.get("baselines", {}).values()]
    if target is None or any("efficiency" not in r for r in rows):
        return ""
    low = min(float(r["efficiency"]) for r in rows)
    if low < float(target):
        return ""
    return (
        f'<p class="notice">Every policy compared reaches efficiency {low:.4f} or more, at or above '
        f"the target {float(target):g}: on this trace the efficiency constraint never binds, so the "
        "tuning only reduced memory.</p>"
    )


def _regime_name(r: int) -> str:
    return DEFAULT_ROW if r < 0 else str(r)


def _swatch(r: int) -> str:
    return "#ffffff" if r < 0 else regime_color(r)


def _cache_detail(result: TuningResult) -> CacheDetail:
    from regimetune.tuner.cache.session import CacheDetail

    if not isinstance(result.detail, CacheDetail):
        raise InputError(f"a cache report needs a cache tuning result, not a {result.objective.value} one")
    return result.detail


def _weight_reports(result: TuningResult) -> Mapping[int, WeightTuningReport]:
    if result.objective.value != "rescale" or not isinstance(result.detail, Mapping):
        raise InputError(
            f"a rescale report needs a rescale tuning result, not a {result.objective.value} one"
        )
    return result.detail


POLICY_CAPTION = "the tuned policy per regime: its LRU limit and when the limit takes over"


def _policy_table(result: TuningResult, windows: Mapping[int, int]) -> HtmlTable:
    pf = result.tuned_file
    rows, swatches = [], []
    for rid, pol in sorted(pf.regimes.items()):
        c = pol.cache
        if c is None:
            continue
        if c.high_watermark_keys is not None and c.high_watermark_keys > 1:
            switch = f"once the cache holds {c.high_watermark_keys:,} keys"
        elif c.switch_time_s is not None:
            switch = f"from t = {c.switch_time_s:,.0f} s"
        else:
            switch = "from the start (no unlimited phase)"
        limit = "none" if c.limit_keys is None else f"{c.limit_keys:,}"
        rows.append((str(rid), f"{windows.get(rid, 0):,}", c.mode.value, switch, limit))
        swatches.append(regime_color(rid))
    if windows.get(-1):  # windows before the detector held a regime ran the default policy
        c = pf.default.cache
        limit = "none" if c is None or c.limit_keys is None else f"{c.limit_keys:,}"
        mode = "unlimited" if c is None else c.mode.value
        rows.append((DEFAULT_ROW, f"{windows[-1]:,}", mode, "as the regimes'", limit))
        swatches.append("#ffffff")
    return HtmlTable(
        caption=POLICY_CAPTION,
        headers=("regime", "windows", "mode", "limit in force", "limit (keys)"),
        rows=tuple(rows),
        swatches=tuple(swatches),
    )


def _setting(v: Any) -> str:
    """A setting's value as text: ``None`` is a setting left to its derived default."""
    if v is None:
        return "not set (derived)"
    if isinstance(v, bool):
        return "yes" if v else "no"
    return f"{v:g}" if isinstance(v, float) else str(v)


def _settings_table(report: Mapping[str, Any]) -> HtmlTable:
    rows = [
        ("optimizer", str(report.get("optimizer", ""))),
        ("evaluations", str(report.get("n_evaluations", ""))),
    ]
    for group in ("target", "cost_model", "store"):
        for k, v in (report.get(group) or {}).items():
            rows.append((f"{group}: {k}", _setting(v)))
    rows.append(("value size", f"{report.get('value_size', '')} B"))
    return HtmlTable(caption="what the tuning assumed", headers=("setting", "value"), rows=tuple(rows))


def _sweep_section(report: Mapping[str, Any]) -> str:
    sweep = sweep_of(report)
    if sweep is None:
        return (
            f'<p class="notice"><strong>{NOT_COMPUTED}</strong>: this tuning result carries no '
            'sweep of the miss cost (<code>report["sweep"]</code>).</p>'
        )
    x, series = sweep
    series = {BASELINE_LABELS.get(n, n): ys for n, ys in series.items()}
    fig = tune_charts.cost_sweep(x, series, xlabel="miss cost (multiple of the compute time per request)")
    table = HtmlTable(
        caption="efficiency of each policy at each miss cost",
        headers=("miss cost", *series),
        rows=tuple((f"{v:g}", *(f"{series[n][i]:.4f}" for n in series)) for i, v in enumerate(x)),
    )
    return _chart("cost-sweep", fig, "efficiency against the store's miss cost") + table.html()


def cache_tune_report(
    result: TuningResult,
    *,
    frame: WindowFrame,
    labels: np.ndarray,
    ts: np.ndarray,
    keys: np.ndarray,
    title: str,
) -> str:
    """The cache tuning report as one HTML document. ``frame`` and ``labels`` are the windows
    and the regime the policy followed in each (the tuning's own); ``ts`` and ``keys`` the
    trace's requests in time order."""
    if not len(frame) or len(labels) != len(frame):
        raise InputError(f"one label per window is needed: {len(labels)} labels, {len(frame)} windows")
    _use_agg()
    labels = np.asarray(labels, dtype=np.int64)
    stream = RequestStream.of(ts, keys)
    starts = np.asarray(frame["start"], dtype=np.float64)
    report = result.report
    tuned = result.tuned_file
    limits = {r: p.cache.limit_keys for r, p in tuned.regimes.items() if p.cache and p.cache.limit_keys}
    caps, curves = miss_ratio_curves_of(stream, starts, labels)
    lot = limits_over_time(stream, frame, labels, tuned, _cache_detail(result).best.window_keys)
    origin, scale, xlabel = time_axis(frame)
    t = (starts + np.asarray(frame["length"]) / 2.0 - origin) / scale
    values, feasible = convergence_of(result.evaluations)
    windows = {int(r): int(np.count_nonzero(labels == r)) for r in np.unique(labels)}
    sections = [
        (LIVE_SECTION, _timeline(frame, labels)),
        (
            "miss-ratio curves per regime",
            _chart(
                "miss-ratio-curves",
                tune_charts.miss_ratio_curves(caps, curves, limits=limits),
                "miss ratio against LRU cache size, one curve per regime",
            ),
        ),
        (
            "tuned limits over time against the keyspace",
            _chart(
                "limits-over-time",
                tune_charts.limits_timeline(
                    t,
                    keyspace=lot.keyspace,
                    limit=lot.limit,
                    cache_keys=lot.cache_keys,
                    labels=labels,
                    xlabel=xlabel,
                ),
                "keyspace, tuned limit in force and keys held over time",
            )
            + _policy_table(result, windows).html(),
        ),
        (
            "optimiser convergence",
            _chart(
                "convergence",
                tune_charts.convergence(values, feasible),
                "objective of each evaluation and the best so far",
            ),
        ),
        (
            "tuned policy against the baselines",
            comparison_table(report).html()
            + f"<p>{escape(tuned_policy_text(report['best']))}.</p><p>{escape(BASELINE_NOTE)}</p>"
            + binding_note(report),
        ),
        ("cost-model sweep", _sweep_section(report)),
        ("settings", _settings_table(report).html()),
    ]
    tr = report.get("trace", {})
    meta = (
        f"{tr.get('requests', 0):,} requests on {tr.get('keys', 0):,} keys over {len(frame):,} windows of "
        f"{window_length(frame):g} s; {len(curves)} regimes; {report.get('optimizer', '')}, "
        f"{report.get('n_evaluations', len(values))} evaluations; times relative to the trace's start."
    )
    return render_page(title, meta, sections)


def _weights_table(reps: Mapping[int, WeightTuningReport]) -> HtmlTable:
    ids = sorted(reps, key=_last_default)
    return HtmlTable(
        caption="the weights in force per regime (max(W_L, W_D) = 1): the tuned candidate if it "
        "beat the best preset on held-out campaigns, else that preset",
        headers=("regime", "W_L", "W_D", "W_T", "in force", "evaluations"),
        rows=tuple(
            (
                _regime_name(r),
                f"{reps[r].weights.w_load:.3g}",
                f"{reps[r].weights.w_data:.3g}",
                f"{reps[r].weights.w_time:.3g}",
                "tuned" if reps[r].adopted else f"preset {reps[r].incumbent}",
                str(reps[r].n_evaluations),
            )
            for r in ids
        ),
        swatches=tuple(_swatch(r) for r in ids),
    )


def _last_default(r: int) -> tuple[bool, int]:
    """Regimes in order, the default's row last (as in the cache's policy table)."""
    return (r < 0, r)


def _scores_table(reps: Mapping[int, WeightTuningReport], *, held_out: bool) -> HtmlTable:
    ids = sorted(reps, key=_last_default)
    presets = list(dict.fromkeys(n for r in ids for n in reps[r].preset_values))

    def cells(rep: WeightTuningReport) -> tuple[str, ...]:
        cand = rep.candidate_held_out_value if held_out else rep.candidate_value
        pres = rep.held_out_preset_values if held_out else rep.preset_values
        return (f"{cand:.4g}", *(f"{pres[p]:.4g}" if p in pres else "" for p in presets))

    where = "held-out campaigns (never seen by the tuning)" if held_out else "the tuning campaigns"
    return HtmlTable(
        caption=f"campaign scores on {where}: sum of squared residuals, lower is better",
        headers=("regime", "tuned candidate", *presets),
        rows=tuple((_regime_name(r), *cells(reps[r])) for r in ids),
        swatches=tuple(_swatch(r) for r in ids),
    )


def _scores_of(reps: Mapping[int, WeightTuningReport], *, held_out: bool) -> dict[int, dict[str, float]]:
    if held_out:
        return {r: {"tuned": p.candidate_held_out_value, **p.held_out_preset_values} for r, p in reps.items()}
    return {r: {"tuned": p.candidate_value, **p.preset_values} for r, p in reps.items()}


def rescale_tune_report(result: TuningResult, *, frame: WindowFrame, labels: np.ndarray, title: str) -> str:
    """The rescale tuning report: regimes, the weights in force per regime and the campaign
    scores of the tuned candidate beside every preset (lower is better), on the tuning
    campaigns and on held-out ones, with the reason each regime's weights were adopted or kept
    back."""
    if not len(frame) or len(labels) != len(frame):
        raise InputError(f"one label per window is needed: {len(labels)} labels, {len(frame)} windows")
    _use_agg()
    reps = _weight_reports(result)
    weights = {r: (p.weights.w_load, p.weights.w_data, p.weights.w_time) for r, p in reps.items()}
    has_held_out = any(np.isfinite(p.candidate_held_out_value) for p in reps.values())
    held = _scores_of(reps, held_out=True) if has_held_out else None
    reasons = "".join(
        f"<li>{'regime ' + str(r) if r >= 0 else DEFAULT_ROW}: {escape(reps[r].reason)}</li>"
        for r in sorted(reps, key=_last_default)
    )
    sections: Sequence[tuple[str, str]] = [
        (LIVE_SECTION, _timeline(frame, np.asarray(labels, dtype=np.int64))),
        (
            "weights per regime",
            _chart("weights", tune_charts.rescale_weights(weights), "W_L, W_D, W_T in force per regime")
            + _weights_table(reps).html()
            + f"<ul>{reasons}</ul>",
        ),
        (
            "campaign scores",
            _chart(
                "campaign-scores",
                tune_charts.campaign_scores(_scores_of(reps, held_out=False), held_out=held),
                "campaign score per regime: tuned candidate and presets",
            )
            + _scores_table(reps, held_out=False).html()
            + (_scores_table(reps, held_out=True).html() if has_held_out else ""),
        ),
    ]
    meta = (
        f"{len(frame):,} windows of {window_length(frame):g} s; {len([r for r in reps if r >= 0])} "
        "regimes tuned (and the default, where windows ran before the first regime); "
        "each regime's windows replayed as rescaling campaigns; times relative to the trace's start."
    )
    return render_page(title, meta, sections)


def write_cache_tune_report(
    path: str | Path, result: TuningResult, *, workload: Workload, title: str
) -> Path:
    """Write the cache report of a tuning run on ``workload``: its windows, the regime whose
    policy was in force in each (the tuning's own labels) and its requests."""
    events = workload.events
    if workload.frame is None or events is None:
        raise InputError("a cache report needs the workload's windows and requests")
    html = cache_tune_report(
        result, frame=workload.frame, labels=workload.labels, ts=events.ts, keys=events.key, title=title
    )
    return write_detect_report(path, html)


def write_rescale_tune_report(
    path: str | Path, result: TuningResult, *, workload: Workload, title: str
) -> Path:
    """Write the rescale report of a tuning run on ``workload`` (windows labelled as the
    tuning labelled them: -1 before the first regime, where the default is in force)."""
    if workload.frame is None:
        raise InputError("a rescale report needs the workload's windows")
    html = rescale_tune_report(result, frame=workload.frame, labels=workload.labels, title=title)
    return write_detect_report(path, html)


def _use_agg() -> None:
    import matplotlib

    matplotlib.use("Agg")


__all__ = [
    "NOT_COMPUTED",
    "cache_tune_report",
    "binding_note",
    "comparison_table",
    "rescale_tune_report",
    "write_cache_tune_report",
    "write_rescale_tune_report",
]
