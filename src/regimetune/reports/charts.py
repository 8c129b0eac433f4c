"""Charts for the reports, one function per chart, each returning a matplotlib figure.

Colours come from :func:`regime_color`, so a chart and the table beside it name a regime
with the same colour. Times are plotted relative to the trace's start (``time_axis``).
"""

from __future__ import annotations

import base64
import io
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from regimetune.models import InputError, RegimeChange, WindowFrame
from regimetune.regimes.plot import time_axis

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# matplotlib's tab10, the palette of ``regimetune detect --plot``
_PALETTE = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
)  # fmt: skip


_NO_REGIME = "#a0a0a0"


def regime_color(regime_id: int) -> str:
    """The colour of a regime in every chart and table (ten colours, then they repeat).

    >>> regime_color(0), regime_color(11)
    ('#1f77b4', '#ff7f0e')
    """
    return _PALETTE[regime_id % len(_PALETTE)]


def window_length(frame: WindowFrame) -> float:
    """The windows' configured length: the longest window's (the first and the last may be
    cut short where the trace starts or ends inside them)."""
    return float(frame["length"].max()) if len(frame) else 0.0


def _new_figure(width: float = 10.0, height: float = 4.2) -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def rate_timeline(
    frame: WindowFrame,
    labels: np.ndarray,
    *,
    changes: Sequence[RegimeChange] = (),
    title: str = "",
) -> Figure:
    """Reads per second of every window over time, each point in its regime's colour; a dashed
    line where each change was confirmed."""
    if len(labels) != len(frame):
        raise InputError(f"one label per window is needed: {len(labels)} labels, {len(frame)} windows")
    origin, scale, xlabel = time_axis(frame)
    t = (frame["start"].astype(np.float64) + frame["length"] / 2.0 - origin) / scale
    rate = frame.reads_per_s
    fig = _new_figure()
    ax = fig.add_subplot()
    for rid in sorted({int(v) for v in np.asarray(labels).tolist()}):
        m = labels == rid
        # label -1: windows before the online detector held any regime
        color, name = (regime_color(rid), f"regime {rid}") if rid >= 0 else (_NO_REGIME, "no regime yet")
        ax.scatter(t[m], rate[m], s=8, color=color, label=name, lw=0)
    for i, c in enumerate(changes):
        ax.axvline((c.confirmed_time - origin) / scale, color="0.35", ls="--", lw=0.8,
                   label="change confirmed" if i == 0 else None)  # fmt: skip
    ax.set_xlabel(xlabel)
    ax.set_ylabel("read rate (reads/s)")
    ax.ticklabel_format(axis="x", style="plain", useOffset=False)
    ax.grid(alpha=0.3)
    if title:
        ax.set_title(title)
    if len(frame):
        ax.legend(loc="upper right", fontsize=9, markerscale=2.0)
    return fig


def figure_data_uri(fig: Figure) -> str:
    """The figure as a ``data:image/png;base64,...`` URI, for an ``<img>`` that needs no file."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


__all__ = ["figure_data_uri", "rate_timeline", "regime_color", "window_length"]
