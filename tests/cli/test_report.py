"""``regimetune detect --report``: one self-contained HTML file (no external URL, the chart
embedded), a table row per segment and per change, and, where Debian's chromium is installed,
the page as a browser renders it."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from regimetune.cli.main import app
from regimetune.reports import regime_color

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
