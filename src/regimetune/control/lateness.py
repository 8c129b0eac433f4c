"""Event time with bounded lateness: which windows a daemon's batch belongs to, whether it is
still accepted, and the windows held open until the watermark passes them.

Several daemons report the same windows at slightly different times, and after a restart
they resend their backlogs in any interleaving. As stream processors do (Flink's allowed
lateness, Beam's watermark), a window stays open while it is no more than ``lateness``
windows behind the newest window any batch reported; batches for it are merged until then.
A batch for an older window, or one dated more than ``max_future_s`` after the service's
clock, is refused before it is stored. A window nobody reported is never closed (silence is
not zero load) and a gap of any length costs nothing.

>>> buf = WindowBuffer(window_s=10.0, lateness=1, max_future_s=60.0)
>>> cols = {"keys": np.array([1], np.uint64), "reads": np.array([2], np.uint32)}
>>> [k for k, _ in buf.add("counts", 0.0, cols)], [k for k, _ in buf.add("counts", 20.0, cols)]
([], [0])
>>> buf.admit("counts", 0.0, cols, now=0.0)
Traceback (most recent call last):
...
regimetune.models.errors.InputError: window starting at 0 is already closed: 2 windows older than the newest (starting at 20), more than the allowed lateness of 1 window (ingest.allowed_lateness_windows)
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from regimetune.models import InputError

Part = tuple[str, dict[str, np.ndarray]]
"""One batch's share of a window: its kind (``counts`` or ``events``) and its columns."""


class WindowBuffer:
    """The windows still open for late batches, keyed by window index (``start / window_s``).

    ``admit`` says whether a batch would be accepted now (raises :class:`InputError` with the
    reason otherwise); ``add`` takes an admitted batch and returns the windows the watermark
    has passed, oldest first, each with the parts that arrived for it in arrival order.
    """

    def __init__(self, *, window_s: float, lateness: int, max_future_s: float) -> None:
        self.window_s = window_s
        self.lateness = lateness
        self.max_future_s = max_future_s
        self.newest: int | None = None
        self._open: dict[int, list[Part]] = {}

    # -- admission ------------------------------------------------------------------------------
    def span(self, kind: str, window_start: float, columns: dict[str, np.ndarray]) -> tuple[int, int]:
        """The first and last window index a batch touches (an empty batch: its own window)."""
        ws = self.window_s
        if kind == "events" and len(columns.get("ts", ())):
            ts = columns["ts"]
            return math.floor(float(ts[0]) / ws), math.floor(float(ts[-1]) / ws)
        k = round(window_start / ws) if kind == "counts" else math.floor(window_start / ws)
        return k, k

    def admit(
        self, kind: str, window_start: float, columns: dict[str, np.ndarray], *, now: float
    ) -> tuple[int, int]:
        """The batch's window span if it is accepted now, else :class:`InputError` saying why."""
        if not math.isfinite(window_start) or window_start < 0:
            raise InputError("window_start must be a finite number >= 0")
        last_t = float(columns["ts"][-1]) if kind == "events" and len(columns.get("ts", ())) else window_start
        if not math.isfinite(last_t) or last_t > now + self.max_future_s:
            raise InputError(
                f"time {last_t:g} is more than ingest.max_future_s={self.max_future_s:g} s after the "
                f"service's clock ({now:.0f}): a time in milliseconds sent as seconds?"
            )
        first, last = self.span(kind, window_start, columns)
        if self.newest is not None and first < self.newest - self.lateness:
            behind = self.newest - first
            plural = "" if self.lateness == 1 else "s"
            raise InputError(
                f"window starting at {first * self.window_s:g} is already closed: {behind:,} windows "
                f"older than the newest (starting at {self.newest * self.window_s:g}), more than the "
                f"allowed lateness of {self.lateness} window{plural} (ingest.allowed_lateness_windows)"
            )
        return first, last

    def note(self, last: int) -> None:
        """Move the newest window forward (the admission side of :meth:`add`)."""
        self.newest = last if self.newest is None else max(self.newest, last)

    # -- windows --------------------------------------------------------------------------------
    def add(
        self, kind: str, window_start: float, columns: dict[str, np.ndarray]
    ) -> list[tuple[int, list[Part]]]:
        """Hold an admitted batch in its window(s); return the windows now past the watermark."""
        first, last = self.span(kind, window_start, columns)
        if kind == "events" and len(columns.get("ts", ())) and first != last:
            widx = np.floor(columns["ts"] / self.window_s).astype(np.int64)
            cuts = np.flatnonzero(np.diff(widx)) + 1
            bounds = [0, *cuts.tolist(), len(widx)]
            for a, b in itertools.pairwise(bounds):
                # per-event columns are cut; per-batch ones (bucket figures) go with the first part
                part = {n: c[a:b] for n, c in columns.items() if n in _ROW_COLUMNS}
                if a == 0:
                    part |= {n: c for n, c in columns.items() if n not in _ROW_COLUMNS}
                self._open.setdefault(int(widx[a]), []).append((kind, part))
        else:
            self._open.setdefault(first, []).append((kind, columns))
        self.note(last)
        return self._passed()

    def _passed(self) -> list[tuple[int, list[Part]]]:
        assert self.newest is not None
        watermark = self.newest - self.lateness
        ready = sorted(k for k in self._open if k < watermark)
        return [(k, self._open.pop(k)) for k in ready]

    def flush(self) -> list[tuple[int, list[Part]]]:
        """Every open window, oldest first (e.g. at the end of a recorded replay)."""
        ready = sorted(self._open)
        return [(k, self._open.pop(k)) for k in ready]

    @property
    def open_windows(self) -> int:
        return len(self._open)

    # -- snapshot -------------------------------------------------------------------------------
    def to_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """The open windows as JSON-able metadata and arrays (for the engine's snapshot)."""
        meta: dict[str, Any] = {"newest": self.newest, "windows": []}
        arrays: dict[str, np.ndarray] = {}
        i = 0
        for k in sorted(self._open):
            parts = []
            for kind, cols in self._open[k]:
                parts.append([kind, i, sorted(cols)])
                arrays |= {f"b{i}.{n}": np.ascontiguousarray(c) for n, c in cols.items()}
                i += 1
            meta["windows"].append([k, parts])
        return meta, arrays

    def restore(self, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        """Continue from :meth:`to_state`."""
        self.newest = None if meta.get("newest") is None else int(meta["newest"])
        self._open = {
            int(k): [(kind, {n: arrays[f"b{i}.{n}"] for n in names}) for kind, i, names in parts]
            for k, parts in meta["windows"]
        }


_ROW_COLUMNS = frozenset({"ts", "key", "op", "size"})
"""Columns of an events batch with one value per event (the bucket columns are per batch)."""

__all__ = ["Part", "WindowBuffer"]
