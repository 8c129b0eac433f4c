"""One option means one thing in every command: ``--window`` (same default), ``--format`` (the
trace's format), ``--sim-workers`` against ``--jobs``; output paths are prepared alike; and the
commands say what they skipped and why nothing was found."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

from regimetune.cli.main import app
from regimetune.collectors import GeneratorConfig, generate, write_events
from regimetune.models import DEFAULT_WINDOW_S

runner = CliRunner()
ROOT = typer.main.get_command(app)


def _param(command: str, name: str) -> Any:
    return next(p for p in ROOT.commands[command].params if name in p.opts)  # type: ignore[attr-defined]


@pytest.mark.parametrize("command", ["detect", "tune"])
def test_param_names_every_detector_parameter_but_the_window(command: str) -> None:
    """``--param``'s help lists the detector's parameters by hand: it must keep up with them
    (the window length is ``--window``)."""
    import dataclasses

    from regimetune.regimes import DetectorParams

    names = [f.name for f in dataclasses.fields(DetectorParams) if f.name != "window_s"]
    listed = _param(command, "--param").help.split("Names: ")[1].split(" (")[0]
    assert listed.split(", ") == names


@pytest.fixture(scope="module")
def short_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Five minutes of a run: shorter than the detector's min_regime_s (15 minutes)."""
    path = tmp_path_factory.mktemp("short") / "short.csv"
    write_events(generate(GeneratorConfig(duration_s=300, workers=8, seed=2)), path)
    return path


@pytest.mark.parametrize("command", ["windows", "tune", "demo", "replay", "collect"])
def test_window_has_one_meaning_and_one_default(command: str) -> None:
    window = _param(command, "--window")
    assert window.default == DEFAULT_WINDOW_S
    assert "Window length in seconds" in window.help


def test_detect_window_defaults_to_the_same_length() -> None:
    assert _param("detect", "--window").default is None  # None: 10 s, or a series' row step
    assert f"default {DEFAULT_WINDOW_S:g}" in _param("detect", "--window").help


def test_format_is_the_trace_format_wherever_it_appears() -> None:
    for command in ("windows", "detect", "tune", "replay", "generate"):
        assert "csv, tsv, jsonl, parquet" in _param(command, "--format").help, command
    assert "--body" in _param("replay", "--body").opts


def test_workers_are_never_ambiguous() -> None:
    """Simulated ParSplice workers are --sim-workers, local processes --jobs; the old --workers
    of each stays accepted but is not shown."""
    for command in ("generate", "demo"):
        assert "ParSplice workers" in _param(command, "--sim-workers").help
        assert _param(command, "--workers").hidden
    assert "Local processes" in _param("tune", "--jobs").help
    assert _param("tune", "--workers").hidden
    for command in ("generate", "demo", "tune"):
        res = runner.invoke(app, [command, "--help"], env={"COLUMNS": "200"})
        assert "--workers" not in res.output


def test_the_old_names_still_work(tmp_path: Path) -> None:
    old = tmp_path / "old.csv"
    new = tmp_path / "new.csv"
    for path, flag in ((old, "--workers"), (new, "--sim-workers")):
        r = runner.invoke(app, ["generate", str(path), "--duration", "60", flag, "4", "--seed", "1"])
        assert r.exit_code == 0, r.output
    assert old.read_bytes() == new.read_bytes()


def test_help_lists_every_column_role() -> None:
    res = runner.invoke(app, ["detect", "-h"], env={"COLUMNS": "300"})
    roles = " ".join(res.output.split())
    assert "ts, key, op, size, bucket, label, and count" in roles


def test_detect_says_how_many_bad_records_it_skipped(short_trace: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    lines = short_trace.read_text().splitlines()
    lines[10] = lines[10].replace(",", ";")
    lines[20] = "oops"
    bad.write_text("\n".join(lines) + "\n")
    r = runner.invoke(app, ["detect", str(bad), "--skip-bad", "5"])
    assert r.exit_code == 0, r.output
    assert "skipped 2 bad record(s)" in r.output


def test_a_trace_shorter_than_a_regime_gets_a_hint(short_trace: Path) -> None:
    r = runner.invoke(app, ["detect", str(short_trace)])
    assert r.exit_code == 0, r.output
    from regimetune.regimes import DetectorParams

    default = f"min_regime_s ({DetectorParams().min_regime_s:g} s)"
    assert "no regime confirmed" in r.output and default in " ".join(r.output.split())
    assert "--param min_regime_s=" in r.output
    assert "0 regimes" not in r.output and "regime 0" not in r.output
    hinted = r.output.split("--param min_regime_s=")[1].split()[0].rstrip(",")
    r = runner.invoke(app, ["detect", str(short_trace), "--param", f"min_regime_s={hinted}", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["n_regimes"] >= 1  # the hint's value finds a regime


def test_every_output_option_creates_a_missing_directory(short_trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "a" / "b"
    r = runner.invoke(
        app,
        ["detect", str(short_trace), "--param", "min_regime_s=60", "--report", str(out / "r.html"),
         "--state", str(out / "state" / "d.json"), "--plot", str(out / "plot" / "p.png")],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    assert (
        (out / "r.html").is_file()
        and (out / "state" / "d.json").is_file()
        and (out / "plot" / "p.png").is_file()
    )
    r = runner.invoke(app, ["windows", str(short_trace), "--out", str(tmp_path / "c" / "w.csv")])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "c" / "w.csv").is_file()


@pytest.mark.parametrize("option", ["--out", "--report"])
def test_tune_checks_its_outputs_before_the_work(short_trace: Path, tmp_path: Path, option: str) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    name = "p.json" if option == "--out" else "r.html"
    r = runner.invoke(app, ["tune", str(short_trace), option, str(blocker / name)])
    assert r.exit_code == 2
    assert r.output.startswith("error: cannot create the directory of") and r.output.count("\n") == 1
