from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from regimetune.cli.main import app
from regimetune.collectors import GeneratorConfig, generate, write_events
from regimetune.models import SERIES_STEP_S
from regimetune.regimes import FORMAT_VERSION

runner = CliRunner()


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("detect") / "parsplice.csv"
    cfg = GeneratorConfig(duration_s=900, timescale_s=500, workers=32, seed=3, preset="classic")
    write_events(generate(cfg), path, None)
    return path


def test_json_output_lists_segments_and_changes(trace: Path, tmp_path: Path) -> None:
    state = tmp_path / "det.json"
    # a 15-minute trace: regimes of at least 5 minutes (the default, 15, would leave none)
    args = ["detect", str(trace), "--json", "--state", str(state), "--param", "min_regime_s=300"]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["mode"] == "online" and out["windows"] == 90  # the default window is 10 s
    segs = out["segments"]
    assert segs[0]["start_window"] == 0 and segs[-1]["end_window"] == 90
    assert all(a["end_window"] == b["start_window"] for a, b in itertools.pairwise(segs))
    assert out["changes"][0]["from_id"] is None
    assert {s["kind"] for s in segs} <= {"level", "transition"}
    saved = json.loads(state.read_text())
    assert saved["format_version"] == FORMAT_VERSION and saved["params"]["min_regime_s"] == 300.0


def test_the_regime_count_is_of_the_regimes_shown(tmp_path: Path) -> None:
    path = tmp_path / "parsplice.csv"
    write_events(
        generate(GeneratorConfig(duration_s=10_800, workers=192, seed=7, preset="parsplice")), path, None
    )
    out = json.loads(runner.invoke(app, ["detect", str(path), "--json"]).output)
    shown = {s["regime_id"] for s in out["segments"]}
    assert out["n_regimes"] == len(shown) >= 3
    assert {c["to_id"] for c in out["changes"]} == shown
    assert f"online detector, {len(shown)} regimes" in runner.invoke(app, ["detect", str(path)]).output


def test_a_change_found_only_in_hindsight_says_so(tmp_path: Path) -> None:
    # a step in the trace's last minutes: the replay dates it, the online pass never had a
    # level long enough to confirm it, so it is confirmed at the last window and the table
    # and the report say why
    from regimetune.models import EventBatch

    rng = np.random.default_rng(3)
    n = 72_000
    ts = np.sort(rng.uniform(0, 3600, n))
    keep = (ts < 2940) | (rng.uniform(size=n) < 0.5)  # the read rate halves 11 minutes before the end
    ts = ts[keep]
    path = tmp_path / "late.csv"
    write_events(
        [EventBatch.from_columns(ts=ts, key=rng.integers(0, 50, len(ts)), op=np.zeros(len(ts)))], path, None
    )
    out = json.loads(runner.invoke(app, ["detect", str(path), "--json"]).output)
    assert out["changes"][-1]["confirmed_window"] == out["windows"] - 1
    said = f"confirmed at the last window ({out['windows'] - 1}) was found in hindsight"
    html = tmp_path / "report.html"
    text = runner.invoke(app, ["detect", str(path), "--report", str(html)]).output
    assert said in " ".join(text.split()) and said in html.read_text()
    # a trace whose changes were all known live has no such line
    early = tmp_path / "early.csv"
    ts = np.sort(rng.uniform(0, 3600, n))
    ts = ts[(ts < 1800) | (rng.uniform(size=n) < 0.5)]
    write_events(
        [EventBatch.from_columns(ts=ts, key=rng.integers(0, 50, len(ts)), op=np.zeros(len(ts)))], early, None
    )
    assert "in hindsight" not in runner.invoke(app, ["detect", str(early), "--report", str(html)]).output
    assert "in hindsight" not in html.read_text()


def test_paper_mode_reports_the_third_regime_and_plots(trace: Path, tmp_path: Path) -> None:
    png = tmp_path / "fig7.png"
    res = runner.invoke(app, ["detect", str(trace), "--paper", "--plot", str(png)])
    assert res.exit_code == 0, res.output
    assert "suggested cache size" in res.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    res = runner.invoke(app, ["detect", str(trace), "--paper", "--json"])
    out = json.loads(res.output)
    assert [s["regime_id"] for s in out["segments"]] == [0, 1, 2, 3]
    assert {s["kind"] for s in out["segments"]} == {"cluster"}  # K-means knows no levels
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


@pytest.fixture(scope="module")
def yearly(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """River's UK coal employment (TCPD): one row a year, dates in the time column."""
    from river.drift.datasets import UKCoalEmploy

    path = tmp_path_factory.mktemp("series") / "coal.csv"
    lines = ["year,employment"] + [f"{x['Year'].date().isoformat()},{y}" for x, y in UKCoalEmploy()]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_series_of_a_river_dataset_prints_changes_with_rows_and_times(yearly: Path) -> None:
    res = runner.invoke(app, ["detect", str(yearly), "--series", "--json", "--window", "30"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["rows"] == 105 and out["columns"] == ["employment"] and out["window_s"] == 30.0
    first = out["changes"][0]
    assert first["from_id"] is None and first["at_window"] == 0 and first["at_time"] == "1913-01-01T00:00:00"
    # one row a year is one step of 30 s: a regime lasts at least min_regime_s = 900 s = 30 rows
    for seg in out["segments"]:
        assert seg["n_rows"] >= 30 or seg is out["segments"][-1]


def test_segments_say_which_regime_is_a_level_and_which_a_transition(tmp_path: Path) -> None:
    # a level, a steady decline over 150 rows, a level: a person sees the middle as a ramp,
    # not as a level at its mean, and the table and the JSON say so
    rng = np.random.default_rng(0)
    y = np.r_[np.full(100, 10.0), np.linspace(10.0, 0.0, 150), np.zeros(100)] + rng.normal(0.0, 0.25, 350)
    path = tmp_path / "ramp.csv"
    path.write_text("t,load\n" + "".join(f"{i},{v}\n" for i, v in enumerate(y)))
    out = json.loads(runner.invoke(app, ["detect", str(path), "--series", "--json"]).output)
    assert [s["kind"] for s in out["segments"]] == ["level", "transition", "level"]
    ramp = out["segments"][1]
    assert abs(ramp["start_row"] - 100) <= 10 and abs(ramp["end_row"] - 250) <= 10
    table = runner.invoke(app, ["detect", str(path), "--series"]).output
    assert "kind" in table and table.count("transition") == 1 and table.count(" level ") == 2


def test_series_output_names_the_noise_it_read(yearly: Path) -> None:
    out = json.loads(runner.invoke(app, ["detect", str(yearly), "--series", "--json"]).output)
    assert out["noise_sd"]["employment"] > 0
    table = " ".join(runner.invoke(app, ["detect", str(yearly), "--series"]).output.split())
    assert "noise sd employment" in table


def test_a_series_row_stands_for_series_step_s_unless_told(yearly: Path) -> None:
    # a yearly series has no storage time scale: by default a row is SERIES_STEP_S (50 s)
    out = json.loads(
        runner.invoke(app, ["detect", str(yearly), "--series", "--json", "--log", "employment"]).output
    )
    assert out["window_s"] == SERIES_STEP_S
    assert all(isinstance(c["at_window"], int) for c in out["changes"]) and len(out["changes"]) > 1


def test_series_reads_a_counter_column_as_its_increase_unless_told(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    speed = np.maximum(np.r_[np.full(60, 2.0), np.full(60, 5.0)] + rng.normal(0, 0.3, 120), 0.0)
    path = tmp_path / "served.csv"
    rows = [f"{i * 15},{v:.3f}" for i, v in enumerate(np.cumsum(speed))]
    path.write_text("\n".join(["time,requests_total", *rows]) + "\n")
    out = json.loads(runner.invoke(app, ["detect", str(path), "--series", "--json"]).output)
    assert out["counters"] == ["requests_total"]
    assert [c["at_window"] for c in out["changes"]][1:] == [pytest.approx(60, abs=2)]
    raw = json.loads(runner.invoke(app, ["detect", str(path), "--series", "--json", "--raw-counters"]).output)
    assert raw["counters"] == [] and len(raw["changes"]) == 1
    res = runner.invoke(app, ["detect", str(path), "--raw-counters"])
    assert res.exit_code == 2 and "--series only" in res.output


def test_a_series_with_a_bad_cell_names_its_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("t,v\n0,1\n1,oops\n")
    res = runner.invoke(app, ["detect", str(bad), "--series"])
    assert res.exit_code == 2
    assert "bad.csv:3" in res.output and "'oops'" in res.output


def _rate_csv(path: Path, values: np.ndarray) -> Path:
    path.write_text(
        "\n".join(["time,rate,share", *(f"{i * 15},{v:.6g},{v % 1:.6g}" for i, v in enumerate(values))])
    )
    return path


def test_series_log_reads_the_named_columns_in_log_space(tmp_path: Path) -> None:
    rng = np.random.default_rng(11)
    rate = np.exp(np.r_[np.full(150, 3.0), np.full(150, 4.0)] + rng.normal(0, 0.3, 300))
    path = _rate_csv(tmp_path / "rate.csv", rate)
    out = json.loads(runner.invoke(app, ["detect", str(path), "--series", "--json", "--log", "rate"]).output)
    assert out["log"] == ["rate"]
    # what the detector read is the log of the column: the same as the series' logs read raw
    logged = tmp_path / "logged.csv"
    rows = path.read_text().splitlines()
    cells = [r.split(",") for r in rows[1:]]
    logged.write_text("\n".join([rows[0], *(f"{t},{np.log(float(v)):.12g},{s}" for t, v, s in cells)]))
    raw = json.loads(runner.invoke(app, ["detect", str(logged), "--series", "--json"]).output)
    assert raw["log"] == []
    assert [c["at_window"] for c in out["changes"]] == [c["at_window"] for c in raw["changes"]]
    assert [c["at_window"] for c in out["changes"]][1:] == [pytest.approx(150, abs=3)]
    table = runner.invoke(app, ["detect", str(path), "--series", "--log", "rate"]).output
    assert "mean log rate" in table and "mean share" in table  # each mean is of what was read


def test_series_log_refuses_what_has_no_log(tmp_path: Path) -> None:
    path = _rate_csv(tmp_path / "idle.csv", np.r_[np.full(20, 5.0), 0.0, np.full(20, 5.0)])
    res = runner.invoke(app, ["detect", str(path), "--series", "--log", "rate"])
    assert res.exit_code == 2
    assert "idle.csv" in res.output and "'rate'" in res.output and "row 20" in res.output
    res = runner.invoke(app, ["detect", str(path), "--series", "--log", "latency"])
    assert res.exit_code == 2 and "'latency'" in res.output and "'rate'" in res.output  # names what it has
    res = runner.invoke(app, ["detect", str(path), "--log", "rate"])
    assert res.exit_code == 2 and "--series only" in res.output
