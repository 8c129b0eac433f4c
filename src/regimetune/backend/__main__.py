"""``python -m regimetune.backend``: the ``regimetune backend`` command alone, without
loading the rest of the CLI (a faster start for a process that only serves)."""

from __future__ import annotations


def main() -> None:
    import sys

    import typer
    from rich.console import Console

    from regimetune.cli.backend import backend
    from regimetune.models import RegimetuneError

    try:
        typer.run(backend)
    except RegimetuneError as exc:
        Console(stderr=True).print(f"[bold red]error:[/] {exc}", highlight=False)
        sys.exit(2)


if __name__ == "__main__":
    main()
