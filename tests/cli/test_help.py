"""Every command answers -h and --help, every parameter has a help text, and no help shows
typer's type placeholders (``<bool>``, ``<path>``, ``{trace}``)."""

from __future__ import annotations

import re

import pytest
import typer.main
from typer.testing import CliRunner

from regimetune import __version__
from regimetune.cli.main import app

runner = CliRunner()
ROOT = typer.main.get_command(app)
COMMANDS = sorted(ROOT.commands)  # type: ignore[attr-defined]
PLACEHOLDER = re.compile(r"<[a-z][\w\[\]|, ]*>|\{[a-z_]+\}")


def _params(name: str) -> list:
    cmd = ROOT if name == "" else ROOT.commands[name]  # type: ignore[attr-defined]
    ctx = cmd.make_context(name or "regimetune", ["--help"], resilient_parsing=True)
    return cmd.get_params(ctx)


def test_the_app_has_the_commands_people_look_for() -> None:
    assert {"detect", "tune", "serve", "demo", "version"} <= set(COMMANDS)


@pytest.mark.parametrize("name", ["", *COMMANDS])
def test_every_parameter_has_a_help_text(name: str) -> None:
    missing = [p.name for p in _params(name) if not (getattr(p, "help", None) or "").strip()]
    assert not missing, f"{name or 'regimetune'}: no help for {missing}"


@pytest.mark.parametrize("name", ["", *COMMANDS])
@pytest.mark.parametrize("flag", ["-h", "--help"])
def test_help_without_placeholders(name: str, flag: str) -> None:
    args = [name, flag] if name else [flag]
    res = runner.invoke(app, args, env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "Usage:" in res.output
    found = PLACEHOLDER.findall(res.output)
    assert not found, f"{' '.join(args)} shows placeholders {found}"


def test_arguments_and_values_are_named_the_click_way() -> None:
    res = runner.invoke(app, ["detect", "-h"], env={"COLUMNS": "200"})
    assert "[OPTIONS] TRACE" in res.output
    assert re.search(r"--window\s+FLOAT", res.output)
    assert re.search(r"--plot\s+PATH", res.output)
    assert not re.search(r"--paper\s+(BOOLEAN|<)", res.output)  # a flag takes no value


def test_version_as_option_and_as_command() -> None:
    for args in (["--version"], ["version"]):
        res = runner.invoke(app, args)
        assert res.exit_code == 0 and res.output.strip() == __version__


def test_docstrings_are_unwrapped_into_sentences() -> None:
    res = runner.invoke(app, ["-h"], env={"COLUMNS": "200"})
    demo_line = next(line for line in res.output.splitlines() if " demo " in line)
    assert "through POST /v1/ingest" in demo_line  # one line, not cut where the docstring wraps
