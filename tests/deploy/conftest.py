"""Helpers of the deployment tests: the compose file as compose would read it (with ``${VAR:-default}``
interpolated to its default), the Dockerfile's instructions, and the CLI's click commands."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
import typer
import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
PG_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"

_VAR = re.compile(r"\$\{(\w+)(?::?-([^}]*))?\}")


def interpolate(value: Any) -> Any:
    """Replace ``${VAR:-default}`` by its default (what compose does with VAR unset)."""
    if isinstance(value, str):
        return _VAR.sub(lambda m: m.group(2) or "", value)
    if isinstance(value, list):
        return [interpolate(v) for v in value]
    if isinstance(value, dict):
        return {k: interpolate(v) for k, v in value.items()}
    return value


def compose_raw() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())


def compose() -> dict[str, Any]:
    return interpolate(compose_raw())


def dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile's final stage and build stage, in order,
    continuation lines joined."""
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        word, _, rest = line.partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def exec_form(args: str) -> list[str]:
    """A Dockerfile instruction's arguments: JSON exec form, else shell words."""
    return json.loads(args) if args.startswith("[") else shlex.split(args)


def regimetune_command(name: str) -> Any:
    """The click command behind ``regimetune <name>`` (KeyError if there is none); typer
    ships its own copy of click, so this is duck-typed."""
    from regimetune.cli.main import app

    group = typer.main.get_command(app)
    ctx = group.context_class(group, info_name="regimetune")
    cmd = group.get_command(ctx, name)  # type: ignore[attr-defined]
    if cmd is None:
        raise KeyError(name)
    return cmd


def parse(cmd: Any, args: list[str], prog: str) -> dict[str, Any]:
    """Parse ``args`` as the command would (types, ranges, required arguments) without
    running it; returns the parameters."""
    ctx = cmd.make_context(prog, list(args))
    return dict(ctx.params)


def option(args: list[str], name: str) -> str | None:
    """The value of ``--name value`` or ``--name=value`` in an argument list."""
    for i, a in enumerate(args):
        if a == name and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    return None


def pg_reachable() -> bool:
    try:
        eng = sa.create_engine(PG_URL, connect_args={"connect_timeout": 2})
        with eng.connect():
            pass
        eng.dispose()
        return True
    except Exception:
        return False


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No REGIMETUNE_* variable of the caller's environment leaks into a settings test."""
    import os

    for k in list(os.environ):
        if k.startswith("REGIMETUNE_"):
            monkeypatch.delenv(k)
    return monkeypatch
