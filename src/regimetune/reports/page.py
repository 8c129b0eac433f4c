"""HTML for the reports: tables and figures in one page with its style inline, no script and
no external URL, so the file opens offline and can be mailed as is."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from html import escape
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from regimetune.models import RegimeChange, RegimeSegment

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.6em; }
p.meta { color: #555; }
table { border-collapse: collapse; margin: 0.6em 0; }
th, td { padding: 0.25em 0.6em; border-bottom: 1px solid #ddd; text-align: right; font-size: 0.92em; }
th { background: #f4f4f4; }
td:first-child { text-align: left; white-space: nowrap; }
caption { caption-side: bottom; text-align: left; color: #666; font-size: 0.9em; }
td.swatch span { display: inline-block; width: 0.9em; height: 0.9em; border-radius: 2px; }
figure { margin: 0.6em 0; } figure img { max-width: 100%; }
p.notice { color: #8a5a00; background: #fff6e0; padding: 0.5em 0.8em; }
"""


@dataclass(frozen=True)
class HtmlTable:
    """A table of text cells; ``swatches`` (one colour per row, or empty) adds a first column
    with a square of that colour, to tie a row to its colour in a chart."""

    caption: str
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    swatches: tuple[str, ...] = field(default=())

    def html(self) -> str:
        """The table as an HTML fragment (cells escaped)."""
        head = ("<th></th>" if self.swatches else "") + "".join(f"<th>{escape(h)}</th>" for h in self.headers)
        body = []
        for i, row in enumerate(self.rows):
            swatch = (
                f'<td class="swatch"><span style="background:{escape(self.swatches[i])}"></span></td>'
                if self.swatches
                else ""
            )
            body.append("<tr>" + swatch + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>")
        return (
            f"<table><caption>{escape(self.caption)}</caption><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table>"
        )


def figure_html(data_uri: str, alt: str, *, name: str = "") -> str:
    """An embedded image (``data:`` URI) with its alternative text; ``name`` gives the figure
    the id ``chart-<name>``, so a reader's link or a test can find the chart."""
    ident = f' id="chart-{escape(name)}"' if name else ""
    return f'<figure{ident}><img src="{escape(data_uri)}" alt="{escape(alt)}"></figure>'


def since_start(seconds: float) -> str:
    """Seconds since the trace's start as ``+h:mm:ss`` (``+1d 02:03:04`` beyond a day).

    >>> since_start(3723.4), since_start(0.0), since_start(93784)
    ('+1:02:03', '+0:00:00', '+1d 02:03:04')
    """
    total = round(seconds)
    days, rest = divmod(total, 86400)
    h, rest = divmod(rest, 3600)
    m, s = divmod(rest, 60)
    return f"+{days}d {h:02d}:{m:02d}:{s:02d}" if days else f"+{h}:{m:02d}:{s:02d}"


def hindsight_note(changes: Sequence[RegimeChange], last_window: int) -> str | None:
    """What the terminal table and the HTML report both say under a change that was dated
    in hindsight (confirmed at the trace's last window, after it began), or None."""
    if not any(c.confirmed_window == last_window and c.delay_windows > 0 for c in changes):
        return None
    return (
        f"a change confirmed at the last window ({last_window}) was found in hindsight, over the "
        "whole trace: live, the drift before it looked like the level it settled at"
    )


#: The columns of :func:`segment_cells`.
SEGMENT_HEADERS = (
    "regime",
    "kind",
    "windows",
    "start",
    "end",
    "reads/s",
    "writes/s",
    "active keys",
    "keys seen",
)


def segment_cells(segment: RegimeSegment, origin: float) -> tuple[str, ...]:
    """A segment's row as the terminal table and the HTML report both print it
    (:data:`SEGMENT_HEADERS`): regime, its kind, windows, start and end since the trace's
    start, mean reads/s, writes/s, active keys, and the keys seen when it began."""
    s = segment.summary
    return (
        str(segment.regime_id),
        segment.kind,
        f"{segment.start_window}-{segment.end_window}",
        since_start(segment.start - origin),
        since_start(segment.end - origin),
        f"{s['mean_reads_per_s']:,.1f}",
        f"{s['mean_writes_per_s']:,.1f}",
        f"{s['mean_active_keys']:,.1f}",
        f"{s['keyspace_at_start']:,.0f}",
    )


#: How the reports and the terminal name each baseline policy ``tune`` simulates.
BASELINE_LABELS = {
    "unlimited": "unlimited",
    "lru_100k": "LRU 100K",
    "two_phase_100k_10k": "100K -> 10K",
    "kmeans_suggestion": "K-means",
    "lru_scaled": "LRU 10K scaled",
    "two_phase_scaled": "100K -> 10K scaled",
    "lru_budget": "LRU at the memory budget",
    "tuned": "tuned",
}

#: What each baseline does, in one sentence under the comparison (terminal and HTML).
BASELINE_NOTE = (
    "Baselines: LRU 100K holds at most 100K keys; 100K -> 10K grows without limit until the "
    "cache holds 100K keys, then holds 10K (Sevilla et al.); the scaled variants scale both "
    "numbers to this trace's keyspace; K-means grows without limit until the 3rd regime K-means "
    "finds begins, then holds as many keys as the keyspace had then; LRU at the memory budget "
    "holds the budget's share of the unlimited cache's mean keys from the start."
)


def tuned_policy_text(best: Mapping[str, Any]) -> str:
    """The tuned cache policy in one sentence, from a tuning report's ``best`` row: when the
    per-regime limits take over (from the start, at a keyspace size or at a time) and each.

    >>> tuned_policy_text({"switch": "keys", "high_watermark_keys": 0, "limits": {"1": 900, "0": 50}})
    'tuned policy: per-regime LRU limits from the start (no unlimited phase); regime 0: 50 keys, regime 1: 900 keys'
    >>> tuned_policy_text({"switch": "keys", "high_watermark_keys": 12000, "limits": {}})
    'tuned policy: unlimited until the cache holds 12,000 keys, then per-regime LRU limits'
    """
    if best.get("switch") == "time":
        when = (
            f"unlimited until t = {float(best['switch_time_s']):,.0f} s (the detected 3rd regime's "
            "start), then per-regime LRU limits"
        )
    elif int(best.get("high_watermark_keys") or 0) <= 1:
        when = "per-regime LRU limits from the start (no unlimited phase)"
    else:
        when = f"unlimited until the cache holds {int(best['high_watermark_keys']):,} keys, then per-regime LRU limits"
    limits = ", ".join(
        f"regime {r}: {int(n):,} keys"
        for r, n in sorted((best.get("limits") or {}).items(), key=lambda x: int(x[0]))
    )
    return f"tuned policy: {when}" + (f"; {limits}" if limits else "")


def render_page(title: str, meta: str, sections: Sequence[tuple[str, str]]) -> str:
    """A whole HTML document: a title, a line of context, then (heading, HTML fragment) sections."""
    parts = [f"<h2>{escape(h)}</h2>\n{fragment}" for h, fragment in sections]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title><style>{_STYLE}</style></head>\n<body>"
        f'<h1>{escape(title)}</h1><p class="meta">{escape(meta)}</p>\n'
        + "\n".join(parts)
        + "\n</body></html>\n"
    )


__all__ = [
    "BASELINE_LABELS",
    "BASELINE_NOTE",
    "SEGMENT_HEADERS",
    "HtmlTable",
    "figure_html",
    "render_page",
    "segment_cells",
    "since_start",
    "tuned_policy_text",
]
