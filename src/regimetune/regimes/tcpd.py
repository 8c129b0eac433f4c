"""Seven real series with human change-point annotations, as TCPD indexes them.

river's wheel ships seven series of the Turing change-point dataset (TCPD, van den Burg &
Williams 2020) in ``river.drift.datasets``, with every annotator's change points. The
annotations index TCPD's rows, and river ships two series unsampled, so the rows are cut
here exactly as TCPD's own build scripts cut them:

* Apple: drop the first row, then keep every 3rd row; columns Close and Volume (622 rows);
* Brent: keep every 10th row, then start at the first kept row in year 2000 (500 rows).

The other five are used as river ships them; Occupancy and RunLog are multivariate (all
their numeric columns). One row is one step. Everything is read from the files in river's
wheel: no network.

>>> s = load_series("brent")
>>> s.values.shape, s.columns, str(s.times[0])
((500, 1), ('DPB',), '2000-01-04T00:00:00')
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np
from river.drift import datasets as river_cp

from regimetune.models import InputError


@dataclass(frozen=True, slots=True)
class TcpdSeries:
    """One annotated series: ``values`` is ``(n, d)`` float, one row per step; ``times`` the
    row dates; ``annotations`` maps each annotator to its sorted change rows (0-based)."""

    name: str
    values: np.ndarray
    columns: tuple[str, ...]
    times: np.ndarray
    annotations: Mapping[str, tuple[int, ...]]

    @property
    def n(self) -> int:
        """Number of rows (steps)."""
        return int(self.values.shape[0])


@dataclass(frozen=True, slots=True)
class _Spec:
    """How to read one river dataset: its class, value columns, date column and format, and
    the TCPD row selection applied to the river file's rows."""

    dataset: Callable[[], river_cp.base.ChangePointFileDataset]
    columns: tuple[str, ...]
    time_column: str
    time_format: str
    rows: Callable[[list[dict[str, str]]], list[dict[str, str]]]


def _all(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    return rows


def _apple_rows(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """TCPD drops the first row (so the 2000 drop shows in the sample), then keeps every 3rd."""
    return rows[1:][::3]


def _brent_rows(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """TCPD keeps every 10th row of the whole series, then starts at the first one in 2000."""
    sampled = rows[::10]
    start = next(i for i, r in enumerate(sampled) if r["day"].endswith("2000"))
    return sampled[start : start + 500]


_SPECS: dict[str, _Spec] = {
    "airline_passengers": _Spec(river_cp.AirlinePassengers, ("Total Passengers",), "date", "%Y-%b", _all),
    "apple": _Spec(river_cp.Apple, ("Close", "Volume"), "Date", "%Y-%m-%d", _apple_rows),
    "bitcoin": _Spec(river_cp.Bitcoin, ("price",), "date", "%Y-%m-%d", _all),
    "brent": _Spec(river_cp.BrentSpotPrice, ("DPB",), "day", "%m/%d/%Y", _brent_rows),
    "occupancy": _Spec(river_cp.Occupancy, ("V1", "V2", "V3", "V4"), "time", "%Y-%m-%d %H:%M:%S", _all),
    "run_log": _Spec(river_cp.RunLog, ("Pace", "Distance"), "time", "%Y-%m-%d %H:%M:%S", _all),
    "uk_coal_employ": _Spec(river_cp.UKCoalEmploy, ("Employment",), "Year", "%Y", _all),
}

#: The series' names, in a fixed order (alphabetical, as TCPD lists them).
SERIES: tuple[str, ...] = tuple(_SPECS)


_LINE = "__line__"


def _read_rows(path: Path) -> list[dict[str, str]]:
    """The file's data rows, each with its line number in the file under ``_LINE``."""
    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        return [{**row, _LINE: str(reader.line_num)} for row in reader]


def _parse(rows: list[dict[str, str]], spec: _Spec, path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Values ``(n, d)`` and datetime64 times of the selected rows; a bad cell names the file
    and its line."""
    values = np.empty((len(rows), len(spec.columns)), dtype=np.float64)
    times = np.empty(len(rows), dtype="datetime64[s]")
    for i, row in enumerate(rows):
        try:
            values[i] = [float(row[c]) for c in spec.columns]
            times[i] = np.datetime64(datetime.strptime(row[spec.time_column], spec.time_format))
        except (KeyError, ValueError) as exc:
            raise InputError(f"{path}, line {row[_LINE]}: {exc}") from exc
    return values, times


def load_series(name: str) -> TcpdSeries:
    """Load one series by name (one of :data:`SERIES`), rows aligned with its annotations."""
    spec = _SPECS.get(name)
    if spec is None:
        raise InputError(f"unknown TCPD series {name!r}; known: {', '.join(SERIES)}")
    dataset = spec.dataset()
    path = Path(dataset.path)
    rows = spec.rows(_read_rows(path))
    values, times = _parse(rows, spec, path)
    annotations = {
        str(who): tuple(sorted(int(i) for i in points)) for who, points in dataset.annotations.items()
    }
    for who, points in annotations.items():
        if any(not 0 <= p < len(rows) for p in points):
            raise InputError(f"{name}: annotator {who} marks a row outside 0..{len(rows) - 1}")
    return TcpdSeries(name, values, spec.columns, times, annotations)


def load_all() -> list[TcpdSeries]:
    """All seven series, in the order of :data:`SERIES`."""
    return [load_series(name) for name in SERIES]


__all__ = ["SERIES", "TcpdSeries", "load_all", "load_series"]
