"""What the commands print is read whole: no cell ends in "…" in a pipe or on a narrow
terminal, times are relative to the trace's start, a first regime comes from "start"."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table
from typer.testing import CliRunner

from regimetune.cli import demo
from regimetune.cli.main import app
from regimetune.cli.output import print_tables
from regimetune.collectors import read_trace, window_frame
from regimetune.regimes.plot import time_axis
from regimetune.reports import rate_timeline

runner = CliRunner()
NARROW = {"COLUMNS": "30"}
LONG = "150430000001234"


def _wide_table() -> Table:
    t = Table(title="wide")
    for name in ("first column", "second column", "third column"):
        t.add_column(name, justify="right")
    t.add_row(LONG, LONG, LONG)
    return t


def test_a_piped_table_is_printed_at_its_natural_width() -> None:
    buf = io.StringIO()
    console = Console(file=buf, width=30)  # not a terminal, narrow as COLUMNS=30 makes it
    print_tables(console, _wide_table())
    out = buf.getvalue()
    assert "…" not in out
    assert out.count(LONG) == 3


def test_a_narrow_terminal_folds_cells_instead_of_cutting_them() -> None:
    buf = io.StringIO()
    console = Console(file=buf, width=30, force_terminal=True, color_system=None)
    t = Table()
    t.add_column("n", justify="right")
    t.add_column("label")
    t.add_row(LONG, "some words that will have to wrap")
    print_tables(console, t)
    out = buf.getvalue()
    assert "…" not in out
    assert max(len(line) for line in out.splitlines()) <= 30
    first_column = "".join(line.split("│")[1].strip() for line in out.splitlines() if line.startswith("│"))
    assert first_column == LONG


def test_detect_prints_whole_tables_with_times_since_the_start(epoch_trace: Path) -> None:
    res = runner.invoke(app, ["detect", str(epoch_trace)], env=NARROW)
    assert res.exit_code == 0, res.output
    assert "…" not in res.output
    out = json.loads(runner.invoke(app, ["detect", str(epoch_trace), "--json"]).output)
    for seg in out["segments"]:  # every segment's row is there whole
        assert re.search(
            rf"│\s+{seg['regime_id']} │\s+{seg['kind']} │\s+{seg['start_window']}-{seg['end_window']} │",
            res.output,
        )
    assert "+0:00:00" in res.output and "1,504,000" not in res.output.split("times are relative")[0]
    assert re.search(r"│\s+start │\s+\d+ │", res.output)  # the first change comes from "start"
    assert "None" not in res.output


def test_windows_prints_starts_since_the_trace_start(epoch_trace: Path) -> None:
    res = runner.invoke(app, ["windows", str(epoch_trace), "--window", "10"], env=NARROW)
    assert res.exit_code == 0, res.output
    assert not re.search(r"\S…", res.output)  # a row of "…" marks the windows left out, no cell is cut
    cells = [line.split("│")[1:3] for line in res.output.splitlines() if line.startswith("│")]
    starts = [float(start.replace(",", "")) for index, start in cells if index.strip().isdigit()]
    assert starts[0] == 0.0 and 0.0 < starts[1] < 60.0
    assert 10_700.0 < starts[-1] < 10_800.0  # seconds into a 3 h run, not 1,504,010,800


def test_plots_read_time_since_the_trace_start(epoch_trace: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    frame = window_frame(read_trace(epoch_trace), window_s=1.0)
    origin, scale, label = time_axis(frame)
    assert origin == float(frame["start"][0]) and (scale, label) == (60.0, "time since trace start (min)")
    fig = rate_timeline(frame, np.zeros(len(frame), dtype=int))
    fig.canvas.draw()
    ax = fig.axes[0]
    assert ax.get_xlim()[0] > -12 and ax.get_xlim()[1] < 200  # 180 minutes, not 4.178e5 hours
    assert ax.xaxis.get_offset_text().get_text() == ""
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert "0" in ticks and all("e" not in t for t in ticks)


def test_demo_keep_running_prints_the_write_token(monkeypatch) -> None:
    buf = io.StringIO()
    monkeypatch.setattr(demo, "console", Console(file=buf, width=200))
    procs = demo.Processes(None, None, "http://127.0.0.1:4568", "http://127.0.0.1:4567", "tok-123_abc", "b")  # type: ignore[arg-type]
    demo._print_still_serving(procs)
    out = buf.getvalue()
    assert "write token: tok-123_abc" in out
    assert "export TOKEN=tok-123_abc" in out
    assert 'curl -s -H "Authorization: Bearer $TOKEN" \'http://127.0.0.1:4567/v1/decisions' in out
