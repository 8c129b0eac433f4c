"""``regimetune detect --report``: one self-contained HTML file (no external URL, the chart
embedded), a table row per segment and per change, and, where Debian's chromium is installed,
the page as a browser renders it."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner

from regimetune.cli.main import app
from regimetune.models import WindowFrame, WindowStats
from regimetune.reports import detect_report, regime_color

runner = CliRunner()
EXTERNAL = re.compile(r"""(?:src|href)\s*=\s*(?!["']?(?:data:|#))|https?://|url\(\s*(?!["']?data:)""")


@pytest.fixture(scope="module")
def report(epoch_trace: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    path = tmp_path_factory.mktemp("report") / "report.html"
    res = runner.invoke(app, ["detect", str(epoch_trace), "--report", str(path), "--json"])
    assert res.exit_code == 0, res.output
    return path, json.loads(res.output)


def _tables(html: str) -> list[str]:
    return re.findall(r"<table>.*?</table>", html, flags=re.S)


def test_the_report_is_one_file_with_no_external_url(report: tuple[Path, dict]) -> None:
    html = report[0].read_text()
    assert html.startswith("<!DOCTYPE html>")
    assert not EXTERNAL.search(html), EXTERNAL.search(html)
    assert "<script" not in html
    images = re.findall(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)
    assert len(images) == 1 and len(images[0]) > 10_000


def test_a_row_per_segment_and_per_change_in_the_regimes_colours(report: tuple[Path, dict]) -> None:
    html, out = report[0].read_text(), report[1]
    segments, changes = _tables(html)
    seg_rows = re.findall(r"<tbody>.*</tbody>", segments, flags=re.S)[0].count("<tr>")
    assert seg_rows == len(out["segments"]) >= 2
    assert changes.count("<tr>") - 1 == len(out["changes"])
    for seg in out["segments"]:
        assert f"background:{regime_color(seg['regime_id'])}" in segments
    assert "<td>start</td>" in changes and "None" not in html
    assert "+0:00:00" in html and "2017-08-29 09:46:4" in html  # the run starts a few seconds in


def test_a_report_must_be_named_html(epoch_trace: Path, tmp_path: Path) -> None:
    res = runner.invoke(app, ["detect", str(epoch_trace), "--report", str(tmp_path / "r.png")])
    assert res.exit_code == 2 and "--report must end in .html" in res.output


def test_chromium_renders_the_chart_and_the_tables(
    report: tuple[Path, dict], chromium_probe: Callable[[Path], dict]
) -> None:
    probe = chromium_probe(report[0])
    assert probe["imgs"] == ["true:1000x420"]  # the PNG decoded at its size (10 x 4.2 in at 100 dpi)
    assert probe["rows"] == [len(report[1]["segments"]), len(report[1]["changes"])]


def _windows(lengths: list[float]) -> WindowFrame:
    """Windows of the given lengths, back to back from t = 1000 s (the first ends on a
    multiple of 10 s, as a trace that starts inside its first window)."""
    starts = 1000.0 + np.concatenate([[0.0], np.cumsum(lengths)[:-1]])
    return WindowFrame.from_records(
        WindowStats(index=i, start=float(s), length=n, reads=100, writes=5, active_keys=10,
                    keyspace_size=10, topk_share=0.5, entropy=1.0)
        for i, (s, n) in enumerate(zip(starts, lengths, strict=True))
    )  # fmt: skip


def test_the_header_names_the_configured_window_length_not_the_partial_first() -> None:
    frame = _windows([8.0, 10.0, 10.0, 10.0, 4.0])
    html = detect_report(frame, np.zeros(5, dtype=np.int64), [], [], title="t")
    assert "5 windows of 10 s (the first 8 s: the trace starts inside it)" in html
    assert "windows of 8 s" not in html
    whole = detect_report(_windows([10.0] * 3), np.zeros(3, dtype=np.int64), [], [], title="t")
    assert "3 windows of 10 s from" in whole and "the first" not in whole


def test_the_timeline_says_its_regimes_are_dated_where_each_began(report: tuple[Path, dict]) -> None:
    html = report[0].read_text()
    assert "<h2>read rate by regime (replayed)</h2>" in html
    assert 'id="chart-rate-by-regime"' in html


def test_the_report_as_a_reader_sees_it(report: tuple[Path, dict], screenshot: Callable[..., Path]) -> None:
    """The whole page in Chromium, kept as ``detect-report.png``: the chart and both tables
    drawn, the regimes' colours on screen."""
    shot = screenshot(report[0].as_uri(), "detect-report", height=1800)
    img = np.asarray(Image.open(shot).convert("RGB"))
    assert img.shape[1] == 1400 and img.std() > 10
    for seg in report[1]["segments"]:
        rgb = np.array([int(regime_color(seg["regime_id"])[i : i + 2], 16) for i in (1, 3, 5)])
        assert np.count_nonzero(np.all(np.abs(img.astype(int) - rgb) <= 30, axis=-1)) > 100, seg
