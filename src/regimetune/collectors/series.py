"""Metric series from CSV: a time column and numeric columns (e.g. exported from Prometheus),
for the regime detector to read as it reads trace windows.

Each row is one step of the series. The time column may hold numbers (seconds, or any
increasing index) or dates (ISO 8601, e.g. ``1913-01-01`` or ``2018-07-31T18:22:28``);
times are only reported, never used to space the rows, so a series sampled once a year and
one sampled every 10 s are read the same way: ``detect --series`` gives every row the
length of one window.

>>> import io
>>> s = read_series(io.StringIO("year,coal\\n1913-01-01,1107000\\n1914-01-01,1038000\\n"))
>>> s.names, s.values.shape, str(s.times[1])
(('coal',), (2, 1), '1914-01-01T00:00:00')
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np

from regimetune.models.errors import TraceFormatError


@dataclass(frozen=True, slots=True)
class Series:
    """Rows of numeric ``values`` (``(n, d)``, columns ``names``) at ``times`` (float
    seconds or ``datetime64``; ``None`` when the file has no time column)."""

    names: tuple[str, ...]
    values: np.ndarray
    times: np.ndarray | None

    def time_of(self, row: int) -> float | str:
        """A row's time as JSON can carry it (its row index when there is no time column)."""
        if self.times is None:
            return row
        t = self.times[row]
        return str(t) if isinstance(t, np.datetime64) else float(t)


def read_series(source: str | Path | IO[str], *, time_column: str | None = None) -> Series:
    """Read a CSV series with a header. The time column is ``time_column``, else a column
    named like a time (``t``, ``time``, ``timestamp``, ``date``, ...), else the first column
    if it is not numeric, else none. Every other column must be numeric: a cell that is not
    a finite number stops the read with its file and line."""
    name = str(source) if isinstance(source, str | Path) else getattr(source, "name", "<series>")
    if isinstance(source, str | Path):
        with open(source, newline="") as fh:
            rows = list(csv.reader(fh))
    else:
        rows = list(csv.reader(source))
    if len(rows) < 2:
        raise TraceFormatError("a series needs a header and at least one row", source=name, line=1)
    header = [h.strip() for h in rows[0]]
    body = [r for r in rows[1:] if any(c.strip() for c in r)]
    for i, r in enumerate(body):
        if len(r) != len(header):
            raise TraceFormatError(f"{len(r)} fields, the header has {len(header)}", source=name, line=i + 2)
    tcol = _time_column(header, body, time_column, name)
    names = tuple(h for j, h in enumerate(header) if j != tcol)
    if not names:
        raise TraceFormatError("no numeric column besides the time", source=name, line=1)
    values = np.empty((len(body), len(names)))
    for i, r in enumerate(body):
        cells = [c for j, c in enumerate(r) if j != tcol]
        for j, c in enumerate(cells):
            v = _number(c)
            if v is None or not math.isfinite(v):
                raise TraceFormatError(
                    f"column {names[j]!r}: {c!r} is not a finite number", source=name, line=i + 2
                )
            values[i, j] = v
    times = None if tcol is None else _times([r[tcol] for r in body], name)
    return Series(names=names, values=values, times=times)


_TIME_NAMES = ("t", "time", "timestamp", "date", "ts", "datetime", "day", "month", "year")


def _number(cell: str) -> float | None:
    try:
        return float(cell)
    except ValueError:
        return None


def _time_column(header: list[str], body: list[list[str]], wanted: str | None, name: str) -> int | None:
    if wanted is not None:
        if wanted not in header:
            raise TraceFormatError(f"no column {wanted!r} (columns: {header})", source=name, line=1)
        return header.index(wanted)
    for j, h in enumerate(header):
        if h.lower() in _TIME_NAMES:
            return j
    if any(_number(r[0]) is None for r in body):
        return 0  # a first column of dates or labels
    return None


def _times(cells: list[str], name: str) -> np.ndarray:
    if all(_number(c) is not None for c in cells):
        return np.array([float(c) for c in cells])
    try:
        return np.array([np.datetime64(c.strip().replace(" ", "T"), "s") for c in cells])
    except ValueError as exc:
        raise TraceFormatError(
            f"the time column holds neither numbers nor dates ({exc})", source=name, line=2
        ) from exc


__all__ = ["Series", "read_series"]
