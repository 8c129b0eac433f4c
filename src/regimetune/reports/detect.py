"""The report of ``regimetune detect --report``: the read-rate timeline coloured by regime,
the segments (each row with its regime's colour) and the confirmed changes, times relative to
the trace's start."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from regimetune.models import InputError, RegimeChange, RegimeSegment, WindowFrame
from regimetune.reports.charts import figure_data_uri, rate_timeline, regime_color, window_length
from regimetune.reports.page import (
    SEGMENT_HEADERS,
    HtmlTable,
    figure_html,
    hindsight_note,
    render_page,
    segment_cells,
    since_start,
)

_EPOCH_2000 = 946_684_800.0  # a trace stamped after this is taken to use Unix epoch seconds


def _origin_text(origin: float) -> str:
    """The trace's start, as a UTC date when the stamps look like epoch seconds."""
    if origin >= _EPOCH_2000:
        return datetime.fromtimestamp(origin, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"t = {origin:,.0f} s"


REPLAYED_TITLE = "Read rate by regime, each regime from where it began (the trace replayed)"
"""The timeline's title in ``detect``'s report: its labels are dated in hindsight, unlike the
tune report's live labels (the regime whose policy was in force, from each confirmation)."""


def _windows_text(frame: WindowFrame) -> str:
    """The windows' length, and the first's when the trace starts inside it."""
    length, first = window_length(frame), float(frame["length"][0])
    if first < length:
        return f"{length:g} s (the first {first:.3g} s: the trace starts inside it)"
    return f"{length:g} s"


def segments_table(segments: Sequence[RegimeSegment], origin: float) -> HtmlTable:
    """One row per segment, in its regime's colour."""
    rows = tuple(segment_cells(s, origin) for s in segments)
    return HtmlTable(
        caption="one row per segment, in its regime's colour in the chart",
        headers=SEGMENT_HEADERS,
        rows=rows,
        swatches=tuple(regime_color(s.regime_id) for s in segments),
    )


def changes_table(changes: Sequence[RegimeChange], origin: float, last_window: int) -> HtmlTable:
    """One row per confirmed change: where it began, when it was confirmed, the delay (and a
    word on a change dated in hindsight, confirmed at ``last_window``)."""
    rows = tuple(
        (
            "start" if c.from_id is None else str(c.from_id),
            str(c.to_id),
            f"{c.at_window}",
            since_start(c.at_time - origin),
            f"{c.confirmed_window}",
            since_start(c.confirmed_time - origin),
            str(c.delay_windows),
        )
        for c in changes
    )
    note = hindsight_note(changes, last_window)
    return HtmlTable(
        caption="; ".join(
            filter(None, ["one row per confirmed change, in the colour of the regime it starts", note])
        ),
        headers=("from", "to", "at window", "at", "confirmed window", "confirmed at", "delay (windows)"),
        rows=rows,
        swatches=tuple(regime_color(c.to_id) for c in changes),
    )


def detect_report(
    frame: WindowFrame,
    labels: np.ndarray,
    segments: Sequence[RegimeSegment],
    changes: Sequence[RegimeChange],
    *,
    title: str,
) -> str:
    """The whole report as one HTML document."""
    if not len(frame):
        raise InputError("no windows to report on")
    import matplotlib

    matplotlib.use("Agg")
    origin = float(frame["start"][0])
    fig = rate_timeline(frame, labels, changes=changes, title=REPLAYED_TITLE)
    chart = figure_html(
        figure_data_uri(fig), "reads per second over time, coloured by regime", name="rate-by-regime"
    )
    meta = (
        f"{len(frame):,} windows of {_windows_text(frame)} from {_origin_text(origin)}; "
        f"times are relative to the trace's start; {len(segments)} segments"
        + (f", {len(changes)} confirmed changes (dashed lines where confirmed)." if changes else ".")
    )
    sections = [
        ("read rate by regime (replayed)", chart),
        ("segments", segments_table(segments, origin).html()),
    ]
    if changes:
        sections.append(("confirmed changes", changes_table(changes, origin, int(frame["index"][-1])).html()))
    return render_page(title, meta, sections)


def write_detect_report(path: str | Path, html: str) -> Path:
    """Write a report, refusing a name that browsers would not open as HTML."""
    p = Path(path)
    if p.suffix.lower() not in (".html", ".htm"):
        raise InputError(f"--report must end in .html, got {p.name!r}")
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(html, encoding="utf-8")
    return p


__all__ = ["changes_table", "detect_report", "segments_table", "write_detect_report"]
