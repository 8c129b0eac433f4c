"""A figure like Sevilla et al.'s Figure 7: read rate over time, points coloured by regime,
centroids as black stars, the paper's switch point marked."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from regimetune.models import InputError, WindowFrame


def time_axis(frame: WindowFrame) -> tuple[float, float, str]:
    """Origin, scale and axis label that show a frame's times relative to its start.

    Real traces stamp requests with epoch times: plotted as is, an axis in hours reads
    "+4.178e5". Relative to the first window, in s, min or h by the trace's span, it reads
    like a stopwatch. Plot ``(t - origin) / scale`` against ``label``.
    """
    origin = float(frame["start"][0]) if len(frame) else 0.0
    span = float(frame["start"][-1] + frame["length"][-1]) - origin if len(frame) else 0.0
    scale, unit = (3600.0, "h") if span > 3 * 3600 else ((60.0, "min") if span > 600 else (1.0, "s"))
    return origin, scale, f"time since trace start ({unit})"


def plot_regimes(
    frame: WindowFrame,
    labels: np.ndarray,
    path: str | Path,
    *,
    centroids: Sequence[tuple[float, float]] = (),
    title: str = "",
    switch_time: float | None = None,
    switch_note: str = "",
    kinds: Mapping[int, str] | None = None,
) -> Path:
    """Write a PNG (or any format matplotlib knows from the suffix) and return its path;
    ``kinds`` (by regime id: ``level``, ``transition``) name each regime's kind in the legend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if len(labels) != len(frame):
        raise InputError("one label per window is needed")
    p = Path(path)
    if p.suffix.lower() not in (".png", ".svg", ".pdf"):
        raise InputError(f"--plot must end in .png, .svg or .pdf, got {p.name!r}")
    t = frame["start"].astype(np.float64) + frame["length"] / 2.0
    rate = frame.reads_per_s
    origin, scale, xlabel = time_axis(frame)
    t = t - origin
    fig, ax = plt.subplots(figsize=(10, 4.8), dpi=110)
    cmap = plt.get_cmap("tab10")
    for rid in sorted({int(v) for v in labels.tolist()}):
        m = labels == rid
        kind = (kinds or {}).get(rid, "")
        name = f"regime {rid} ({kind})" if kind in ("level", "transition") else f"regime {rid}"
        ax.scatter(t[m] / scale, rate[m], s=6, color=cmap(rid % 10), label=name, alpha=0.7, lw=0)
    if centroids:
        c = np.asarray(centroids, dtype=np.float64)
        ax.scatter(
            (c[:, 0] - origin) / scale, c[:, 1], marker="*", s=260, color="black", label="centroids", zorder=5
        )
    if switch_time is not None:
        switch_time -= origin
        ax.axvline(switch_time / scale, color="black", ls="--", lw=1)
        ax.annotate(
            switch_note,
            xy=(switch_time / scale, float(np.percentile(rate, 98))),
            xytext=(8, 0),
            textcoords="offset points",
            fontsize=10,
        )
    ax.set_xlabel(xlabel)
    ax.ticklabel_format(axis="x", style="plain", useOffset=False)
    ax.set_ylabel("reads per second")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    legend = ax.legend(loc="upper right", fontsize=9)
    for handle in legend.legend_handles:
        set_sizes = getattr(handle, "set_sizes", None)
        if set_sizes is not None:
            set_sizes([40.0])
    fig.tight_layout()
    p.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(p)
    plt.close(fig)
    return p


__all__ = ["plot_regimes", "time_axis"]
