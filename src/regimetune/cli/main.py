"""Entry point of the ``regimetune`` command. Each command module exposes ``register(app)``;
errors of the project's own kind print one line and exit 2, never a traceback."""

from __future__ import annotations

import sys

import typer
from rich.console import Console

from regimetune.cli import backend, collect, demo, detect, migrate, plan, replay, serve, traces, tune
from regimetune.cli.help import Group, apply_conventions
from regimetune.models import RegimetuneError

app = typer.Typer(
    name="regimetune",
    help="Detect workload regimes of elastic storage services and tune their knobs per regime.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    cls=Group,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _print_version(value: bool) -> None:
    if value:
        from regimetune import __version__

        typer.echo(__version__)
        raise typer.Exit()


@app.callback()
def _root(
    _version: bool = typer.Option(
        False,
        "--version",
        is_eager=True,
        callback=_print_version,
        help="Print the installed version and exit.",
    ),
) -> None:
    """Detect workload regimes of elastic storage services and tune their knobs per regime."""


@app.command()
def version() -> None:
    """Print the installed version."""
    from regimetune import __version__

    typer.echo(__version__)


for _module in (traces, detect, tune, plan, backend, serve, demo, migrate, replay, collect):
    _module.register(app)
apply_conventions(app)

EXIT_BAD_INPUT = 2


def main() -> None:
    try:
        app()
    except RegimetuneError as exc:
        Console(stderr=True, soft_wrap=True).print(f"[bold red]error:[/] {exc}", highlight=False)
        sys.exit(EXIT_BAD_INPUT)
    except FileNotFoundError as exc:
        Console(stderr=True, soft_wrap=True).print(
            f"[bold red]error:[/] no such file: {exc.filename}", highlight=False
        )
        sys.exit(EXIT_BAD_INPUT)


if __name__ == "__main__":
    main()
