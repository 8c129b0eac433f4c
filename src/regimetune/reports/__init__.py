"""Self-contained HTML reports: one file, no CDN, charts embedded as base64 PNG from matplotlib.

``charts`` and ``tune_charts`` have one function per chart (each returns a matplotlib
figure), ``page`` turns figures and tables into HTML, ``detect`` assembles the report of
``regimetune detect`` and ``tune`` those of ``regimetune tune`` (from what ``tune_data``
computes). The names below are imported on first use (PEP 562),
so the command line can use ``page``'s formatters without loading numpy and matplotlib.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from regimetune._lazy import lazy_attributes

if TYPE_CHECKING:
    from regimetune.reports.charts import figure_data_uri, rate_timeline, regime_color
    from regimetune.reports.detect import detect_report, write_detect_report
    from regimetune.reports.page import HtmlTable, figure_html, render_page, since_start
    from regimetune.reports.tune import cache_tune_report, rescale_tune_report

_WHERE = {
    "figure_data_uri": "charts",
    "rate_timeline": "charts",
    "regime_color": "charts",
    "detect_report": "detect",
    "write_detect_report": "detect",
    "HtmlTable": "page",
    "figure_html": "page",
    "render_page": "page",
    "since_start": "page",
    "cache_tune_report": "tune",
    "rescale_tune_report": "tune",
}


__getattr__ = lazy_attributes(__name__, _WHERE)


__all__ = [
    "HtmlTable",
    "cache_tune_report",
    "detect_report",
    "figure_data_uri",
    "figure_html",
    "rate_timeline",
    "regime_color",
    "render_page",
    "rescale_tune_report",
    "since_start",
    "write_detect_report",
]
