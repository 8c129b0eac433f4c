from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from regimetune.cli.main import app
from regimetune.collectors import GeneratorConfig, generate, write_events
from regimetune.regimes import FORMAT_VERSION

runner = CliRunner()


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("detect") / "parsplice.csv"
    cfg = GeneratorConfig(duration_s=900, timescale_s=500, workers=32, seed=3)
    write_events(generate(cfg), path, None)
    return path


def test_json_output_lists_segments_and_changes(trace: Path, tmp_path: Path) -> None:
    state = tmp_path / "det.json"
    res = runner.invoke(app, ["detect", str(trace), "--json", "--state", str(state), "--no-hindsight"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["mode"] == "online" and out["windows"] == 900
    segs = out["segments"]
    assert segs[0]["start_window"] == 0 and segs[-1]["end_window"] == 900
    assert all(a["end_window"] == b["start_window"] for a, b in itertools.pairwise(segs))
    assert out["changes"][0]["from_id"] is None
    assert json.loads(state.read_text())["format_version"] == FORMAT_VERSION


def test_paper_mode_reports_the_third_regime_and_plots(trace: Path, tmp_path: Path) -> None:
    png = tmp_path / "fig7.png"
    res = runner.invoke(app, ["detect", str(trace), "--paper", "--plot", str(png)])
    assert res.exit_code == 0, res.output
    assert "suggested cache size" in res.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    res = runner.invoke(app, ["detect", str(trace), "--paper", "--json"])
    out = json.loads(res.output)
    assert [s["regime_id"] for s in out["segments"]] == [0, 1, 2, 3]
    assert out["suggested_cache_keys"] > 0


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (["--window", "0"], "--window must be positive"),
        (["--paper", "--k", "5000"], "cannot be found"),
        (["--plot", "fig.gif"], "must end in"),
        (["--window", "5000"], "single window"),
    ],
)
def test_bad_options_give_one_line_and_exit_2(trace: Path, args: list[str], match: str) -> None:
    res = runner.invoke(app, ["detect", str(trace), *args])
    assert res.exit_code == 2
    assert match in res.output
    assert "Traceback" not in res.output


def test_an_empty_trace_is_a_clear_error(tmp_path: Path) -> None:
    empty = tmp_path / "empty.csv"
    empty.write_text("ts,key,op\n")
    res = runner.invoke(app, ["detect", str(empty)])
    assert res.exit_code == 2
    assert "error" in res.output and "Traceback" not in res.output
