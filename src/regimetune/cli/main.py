"""Entry point of the ``regimetune`` command. Each command module exposes ``register(app)``;
errors of the project's own kind print one line and exit 2, never a traceback."""

from __future__ import annotations

import sys

import typer
from rich.console import Console

from regimetune.cli import backend, demo, detect, plan, serve, traces, tune
from regimetune.models import RegimetuneError

app = typer.Typer(
    name="regimetune",
    help="Detect workload regimes of elastic storage services and tune their knobs per regime.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


@app.callback()
def _root() -> None:
    """Detect workload regimes of elastic storage services and tune their knobs per regime."""


@app.command()
def version() -> None:
    """Print the installed version."""
    from regimetune import __version__

    typer.echo(__version__)


for _module in (traces, detect, tune, plan, backend, serve, demo):
    _module.register(app)

EXIT_BAD_INPUT = 2


def main() -> None:
    try:
        app()
    except RegimetuneError as exc:
        Console(stderr=True).print(f"[bold red]error:[/] {exc}", highlight=False)
        sys.exit(EXIT_BAD_INPUT)
    except FileNotFoundError as exc:
        Console(stderr=True).print(f"[bold red]error:[/] no such file: {exc.filename}", highlight=False)
        sys.exit(EXIT_BAD_INPUT)


if __name__ == "__main__":
    main()
