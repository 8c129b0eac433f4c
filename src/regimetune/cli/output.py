"""What the commands print: tables that are never cut, and regimes and times named as people
read them.

A rich table squeezed into 80 columns ends its cells with "…" ("15043…"): the numbers are
lost. On a terminal, :func:`print_tables` folds cells onto a second line instead; piped into a
file or another program (or in a test), a table is printed at its natural width whatever
``COLUMNS`` says, since nothing there wraps lines for the reader.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

from regimetune.models.errors import ConfigError
from regimetune.reports.page import since_start

PIPE_WIDTH = 4000  # widest table printed whole into a pipe


def fold(table: Table) -> Table:
    """Make every cell wrap onto more lines rather than end in an ellipsis; returns ``table``."""
    for column in table.columns:
        column.overflow = "fold"
        column.no_wrap = False
    return table


def print_tables(console: Console, *tables: Table) -> None:
    """Print tables whole: folded to the width of a terminal, at their natural width elsewhere."""
    for table in tables:
        fold(table)
        if console.is_terminal:
            console.print(table)
            continue
        width = Measurement.get(console, console.options.update_width(PIPE_WIDTH), table).maximum
        if width <= console.width:
            console.print(table)
        else:
            wide = Console(file=console.file, width=width, color_system=None)  # no escapes in a pipe
            wide.print(table)


def prepare_output(path: Path | None) -> None:
    """Make the directory an output file (``--out``, ``--report``, ``--plot``, ``--state``)
    goes into, before the work starts: every output option takes a missing directory alike,
    and a path that cannot be written fails now, not after minutes of work."""
    if path is None:
        return
    if path.is_dir():
        raise ConfigError(f"{path} is a directory; name a file in it")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create the directory of {path}: {exc.strerror or exc}") from None


def regime_name(regime_id: int | None) -> str:
    """A regime id as printed: ``start`` for the 'from' side of the first regime.

    >>> regime_name(None), regime_name(3)
    ('start', '3')
    """
    return "start" if regime_id is None else str(regime_id)


__all__ = ["PIPE_WIDTH", "fold", "prepare_output", "print_tables", "regime_name", "since_start"]
