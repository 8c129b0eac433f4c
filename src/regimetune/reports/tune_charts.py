"""Charts of the tuning report, one function per chart, each returning a matplotlib figure.

Inputs are plain arrays and mappings (computed in :mod:`regimetune.reports.tune_data`), so
each chart can be drawn and tested on its own. Regimes keep their colour from
:func:`regimetune.reports.charts.regime_color`; times are relative to the trace's start.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
from matplotlib.ticker import MaxNLocator

from regimetune.reports.charts import _NO_REGIME, _new_figure, regime_color

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

# ten distinct colours (tab10, grey second) and as many markers: two policies whose lines
# coincide still show as two markers
_POLICY_COLORS = (
    "#1f77b4", "#7f7f7f", "#ff7f0e", "#2ca02c", "#9467bd",
    "#8c564b", "#e377c2", "#d62728", "#bcbd22", "#17becf",
)  # fmt: skip
_POLICY_MARKERS = ("o", "s", "^", "v", "D", "P", "X", "<", ">", "*")


def _finish(ax: Axes, *, xlabel: str, ylabel: str, legend: bool = True, title: str = "") -> None:
    if title:
        ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    if legend and ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=9)


def miss_ratio_curves(
    capacities: np.ndarray,
    curves: Mapping[int, np.ndarray],
    *,
    limits: Mapping[int, int] | None = None,
) -> Figure:
    """Miss ratio of an LRU cache against its size in keys, one curve per regime (requests
    of that regime's windows, the recency stack carried over from earlier regimes); a dotted
    line at each regime's tuned limit."""
    fig = _new_figure()
    ax = fig.add_subplot()
    for rid, mr in sorted(curves.items()):
        shown = np.where(np.asarray(mr) > 0, mr, np.nan)  # no misses at all: off the log axis
        ax.plot(capacities, shown, color=regime_color(rid), lw=1.8, label=f"regime {rid}")
    for i, (rid, limit) in enumerate(sorted((r, n) for r, n in (limits or {}).items() if r in curves)):
        ax.axvline(limit, color=regime_color(rid), ls=":", lw=1.2,
                   label="tuned limit (dotted, in its regime's colour)" if i == 0 else None)  # fmt: skip
    ax.set_xscale("log")
    ax.set_yscale("log")  # traces with strong locality miss a few percent: a linear axis hides it
    ax.set_ylim(top=1.05)
    _finish(
        ax,
        xlabel="LRU cache size (keys)",
        ylabel="miss ratio (misses / requests)",
        title="Miss ratio of an LRU cache, per regime",
    )
    return fig


def limits_timeline(
    t: np.ndarray,
    *,
    keyspace: np.ndarray,
    limit: np.ndarray,
    cache_keys: np.ndarray,
    labels: np.ndarray,
    xlabel: str,
) -> Figure:
    """Keys over time: the keyspace seen so far, the tuned limit in force (``nan`` while the
    cache grows without limit) and what the tuned cache held; the background in the colour
    of the regime the policy followed (none before the detector held one: the default
    policy applied)."""
    fig = _new_figure()
    ax = fig.add_subplot()
    if len(t) > 1:
        half = np.diff(t).mean() / 2.0
        cuts = np.flatnonzero(np.diff(labels)) + 1  # one span per run of equal labels
        for a, b in zip(np.r_[0, cuts], np.r_[cuts, len(t)], strict=True):
            if labels[a] >= 0:
                ax.axvspan(t[a] - half, t[b - 1] + half, color=regime_color(int(labels[a])), alpha=0.12, lw=0)
    ax.plot(t, keyspace, color="0.25", lw=1.6, label="keyspace (distinct keys so far)")
    ax.step(t, limit, where="mid", color="#d62728", lw=2.4, label="tuned limit in force")
    ax.plot(t, cache_keys, color="#1f77b4", lw=1.4, ls="--", label="keys held by the tuned cache")
    ax.set_yscale("log")
    ax.ticklabel_format(axis="x", style="plain", useOffset=False)
    _finish(
        ax,
        xlabel=f"{xlabel}; shaded in the colour of the regime the policy followed",
        ylabel="keys",
        title="Keyspace, tuned limit in force and keys held by the tuned cache",
    )
    return fig


def convergence(values: np.ndarray, feasible: np.ndarray) -> Figure:
    """The optimiser's convergence: every evaluation's objective (filled where it meets the
    constraints) and the best so far, against the number of evaluations."""
    fig = _new_figure()
    ax = fig.add_subplot()
    n = np.arange(1, len(values) + 1)
    ok = np.isfinite(values)
    ax.scatter(n[ok & feasible], values[ok & feasible], s=24, color="#2ca02c", label="meets the constraints",
               zorder=3)  # fmt: skip
    ax.scatter(
        n[ok & ~feasible], values[ok & ~feasible], s=18, facecolor="none", edgecolor="#d62728",
        label="misses a constraint", zorder=3,
    )  # fmt: skip
    best = np.fmin.accumulate(np.where(ok, values, np.inf))
    ax.step(n, np.where(np.isfinite(best), best, np.nan), where="post", color="#1f77b4", lw=1.8,
            label="best so far")  # fmt: skip
    if ok.any() and np.all(values[ok] > 0):
        ax.set_yscale("log")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    _finish(
        ax,
        xlabel="evaluation",
        ylabel="objective (dimensionless, lower is better)",
        title=f"Optimiser convergence over {len(values)} evaluations",
    )
    return fig


def cost_sweep(miss_costs: np.ndarray, series: Mapping[str, np.ndarray], *, xlabel: str) -> Figure:
    """Efficiency of each policy against the store's miss cost (the cost model's sensitivity):
    each policy its own colour and marker, the first (the tuned policy) drawn last, hollow and
    larger, so a baseline whose line it covers still shows."""
    fig = _new_figure()
    ax = fig.add_subplot()
    for i, (name, ys) in reversed(list(enumerate(series.items()))):
        first = i == 0
        ax.plot(
            miss_costs, ys, marker=_POLICY_MARKERS[i % len(_POLICY_MARKERS)], ms=9 if first else 5,
            mfc="none" if first else None, mew=1.8 if first else 1.0, lw=2.2 if first else 1.3,
            ls="-" if first else "--", color=_POLICY_COLORS[i % len(_POLICY_COLORS)], label=name,
            zorder=3 if first else 2,
        )  # fmt: skip
    if len(miss_costs) and np.all(np.asarray(miss_costs) > 0):
        ax.set_xscale("log")
    _finish(
        ax,
        xlabel=xlabel,
        ylabel="efficiency (trace time / simulated time)",
        legend=False,
        title="Efficiency against the store's miss cost",
    )
    handles, labels = ax.get_legend_handles_labels()
    if handles:  # in the order given, the tuned policy first
        ax.legend(handles[::-1], labels[::-1], fontsize=9, ncol=2)
    return fig


def _grouped_bars(ax: Axes, groups: Sequence[str], bars: Mapping[str, Sequence[float]]) -> None:
    width = 0.8 / max(len(bars), 1)
    x = np.arange(len(groups))
    for i, (name, ys) in enumerate(bars.items()):
        ax.bar(x + (i - (len(bars) - 1) / 2) * width, ys, width, label=name,
               color=_POLICY_COLORS[i % len(_POLICY_COLORS)])  # fmt: skip
    ax.set_xticks(x, list(groups))


def rescale_weights(weights: Mapping[int, tuple[float, float, float]]) -> Figure:
    """W_L, W_D, W_T tuned for each regime (log scale: the weights span decades)."""
    fig = _new_figure()
    ax = fig.add_subplot()
    ids = sorted(weights, key=_default_last)
    bars = {name: [weights[r][i] for r in ids] for i, name in enumerate(("W_L", "W_D", "W_T"))}
    _grouped_bars(ax, [_group(r) for r in ids], bars)
    for lab, r in zip(ax.get_xticklabels(), ids, strict=True):
        lab.set_color(regime_color(r) if r >= 0 else _NO_REGIME)
    ax.set_yscale("log")
    low = min((w for ws in weights.values() for w in ws), default=1.0)
    high = max((w for ws in weights.values() for w in ws), default=1.0)
    ax.set_ylim(bottom=low / 3.0, top=high * 10.0)  # the smallest bar shows; the legend clears the tallest
    _finish(ax, xlabel="", ylabel="weight (max(W_L, W_D) = 1)", legend=False,
            title="Pufferscale weights in force per regime")  # fmt: skip
    ax.legend(fontsize=9, ncol=3, loc="upper center")
    return fig


def campaign_scores(
    scores: Mapping[int, Mapping[str, float]], *, held_out: Mapping[int, Mapping[str, float]] | None = None
) -> Figure:
    """Each regime's campaign score for the tuned candidate and for every preset (lower is
    better) on the tuning campaigns, and beside it on held-out campaigns when given: where
    tuned weights only fit their training campaigns, the two panels disagree."""
    fig = _new_figure()
    panels = [("tuning campaigns", scores)] + ([("held-out campaigns", held_out)] if held_out else [])
    axes = fig.subplots(1, len(panels), sharey=True, squeeze=False)[0]
    for ax, (name, sc) in zip(axes, panels, strict=True):
        ids = sorted(sc, key=_default_last)
        names = list(dict.fromkeys(n for r in ids for n in sc[r]))
        _grouped_bars(ax, [_group(r) for r in ids], {n: [sc[r].get(n, np.nan) for r in ids] for n in names})
        ax.set_title(name, fontsize=10)
        _finish(ax, xlabel="", ylabel="campaign score (sum of squared residuals)" if ax is axes[0] else "")
    fig.suptitle("Campaign score per regime, tuned candidate and presets (lower is better)")
    return fig


def _group(r: int) -> str:
    """A bar group's name: the regime, or the default (label -1: no regime yet)."""
    return f"regime {r}" if r >= 0 else "default"


def _default_last(r: int) -> tuple[bool, int]:
    return (r < 0, r)


__all__ = [
    "campaign_scores",
    "convergence",
    "cost_sweep",
    "limits_timeline",
    "miss_ratio_curves",
    "rescale_weights",
]
