"""The detector's clock: trace windows pooled into blocks of ``block_s`` seconds.

Block ``k`` holds the windows that start in ``[k block_s, (k + 1) block_s)`` of the clock.
A rate pools exactly (requests over the seconds covered: the ``log1p`` features are turned
back into rates, weighted by each window's length, and logged again), so windows of 10 s and
of 60 s give the same block; the keyspace growth is the keys added between the ends of two
blocks over the seconds covered (the first block has none: NaN, for the detector to fill);
other features (shares, entropy) are averaged over the block's windows by length. A block is
complete when a window reaches its end or a window of a later block arrives.

>>> import numpy as np
>>> pool = BlockPooler(log1p=(True,), units=(1.0,), block_s=60.0)
>>> [b.values.round(3).tolist() for b in pool.add(0, 0.0, 30.0, np.log1p([10.0]), 0)]
[]
>>> [(b.clock, round(float(np.expm1(b.values[0])), 3)) for b in pool.add(1, 30.0, 30.0, np.log1p([20.0]), 0)]
[(0, 15.0)]
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np


class Block(NamedTuple):
    """A complete block: its clock index, feature values, and its first window (index,
    start), so a change dated to the block can be dated to a window."""

    clock: int
    values: np.ndarray
    first_window: int
    first_start: float


@dataclass
class BlockPooler:
    """Windows in, complete blocks out, the partial block kept in between."""

    log1p: tuple[bool, ...]
    units: tuple[float, ...]
    block_s: float
    growth: int | None = None  # the keyspace growth's column, computed from the keyspace
    clock: int | None = None  # the partial block's clock index
    sums: list[float] = field(default_factory=list)  # per feature: value (a rate where log1p) x seconds
    seconds: list[float] = field(default_factory=list)  # per feature: seconds with a value
    first_window: int = 0
    first_start: float = 0.0
    covered: float = 0.0  # seconds of the partial block's windows
    keyspace: float = 0.0  # at the partial block's latest window
    keyspace_before: float | None = None  # at the end of the block before
    last: list[float] = field(default_factory=list)  # the last complete block's values (a gap's fill)

    def add(self, index: int, start: float, length: float, x: np.ndarray, keyspace: float) -> list[Block]:
        """One window (its features ``x`` in feature units, the keyspace size at its end);
        the blocks it completes."""
        out: list[Block] = []
        k = math.floor(start / self.block_s)
        if self.clock is not None and k != self.clock:
            out.append(self._close())
        if self.clock is None:
            self._open(k, index, start)
        for j, v in enumerate(x.tolist()):
            if v == v:  # not NaN
                self.sums[j] += (math.expm1(v * self.units[j]) if self.log1p[j] else v) * length
                self.seconds[j] += length
        self.covered += length
        self.keyspace = float(keyspace)
        if start + length >= (k + 1) * self.block_s - 1e-9:
            out.append(self._close())
        return out

    def _open(self, k: int, index: int, start: float) -> None:
        self.clock, self.first_window, self.first_start = k, index, start
        self.sums = [0.0] * len(self.units)
        self.seconds = [0.0] * len(self.units)
        self.covered = 0.0

    def add_frame(
        self, index: np.ndarray, start: np.ndarray, length: np.ndarray, x: np.ndarray, keyspace: np.ndarray
    ) -> list[tuple[int, Block]]:
        """:meth:`add` for every window of a frame at once: the blocks completed, each with
        the position of the window whose arrival completed it (the same blocks, at the same
        windows, as one :meth:`add` a window)."""
        n = len(index)
        if n == 0:
            return []
        clock = np.floor(start / self.block_s).astype(np.int64)
        ends = start + length >= (clock + 1) * self.block_s - 1e-9
        # runs of windows in one block; a window that reaches its block's end ends its run
        cut = np.r_[True, (clock[1:] != clock[:-1]) | ends[:-1]]
        firsts = np.flatnonzero(cut)
        units = np.asarray(self.units)
        rate = np.where(np.asarray(self.log1p), np.expm1(x * units), x)
        ok = ~np.isnan(x)
        weighted = np.where(ok, rate * length[:, None], 0.0)
        seconds = np.where(ok, length[:, None], 0.0)
        sums = np.add.reduceat(weighted, firsts, axis=0)
        secs = np.add.reduceat(seconds, firsts, axis=0)
        covered = np.add.reduceat(length, firsts)
        out: list[tuple[int, Block]] = []
        lasts = np.r_[firsts[1:], n] - 1
        for r, (a, b) in enumerate(zip(firsts.tolist(), lasts.tolist(), strict=True)):
            k = int(clock[a])
            if self.clock is not None and k != self.clock:
                out.append((a, self._close()))
            if self.clock is None:
                self._open(k, int(index[a]), float(start[a]))
            self.sums = [u + v for u, v in zip(self.sums, sums[r].tolist(), strict=True)]
            self.seconds = [u + v for u, v in zip(self.seconds, secs[r].tolist(), strict=True)]
            self.covered += float(covered[r])
            self.keyspace = float(keyspace[b])
            if ends[b]:
                out.append((b, self._close()))
        return out

    def flush(self) -> list[Block]:
        """The partial block as if complete (a recording's end), without closing it."""
        return [self._values()] if self.clock is not None else []

    def _values(self) -> Block:
        vals = []
        for j, (s, sec) in enumerate(zip(self.sums, self.seconds, strict=True)):
            if sec > 0:
                m = s / sec
                vals.append(math.log1p(max(m, 0.0)) / self.units[j] if self.log1p[j] else m)
            else:
                vals.append(self.last[j] if self.last else math.nan)
        if self.growth is not None:
            g = j = self.growth
            if self.keyspace_before is None or self.covered <= 0:
                vals[g] = math.nan
            else:
                rate = max(self.keyspace - self.keyspace_before, 0.0) / self.covered
                vals[g] = math.log1p(rate) / self.units[j]
        assert self.clock is not None
        return Block(self.clock, np.asarray(vals), self.first_window, self.first_start)

    def _close(self) -> Block:
        b = self._values()
        self.last = b.values.tolist()
        self.keyspace_before = self.keyspace
        self.clock, self.sums, self.seconds = None, [], []
        return b

    def to_state(self) -> dict[str, Any]:
        return {
            "clock": self.clock,
            "sums": self.sums,
            "seconds": self.seconds,
            "first_window": self.first_window,
            "first_start": self.first_start,
            "covered": self.covered,
            "keyspace": self.keyspace,
            "keyspace_before": self.keyspace_before,
            "last": [None if v != v else v for v in self.last],
        }

    def load(self, s: dict[str, Any]) -> None:
        self.clock = None if s["clock"] is None else int(s["clock"])
        self.sums = [float(v) for v in s["sums"]]
        self.seconds = [float(v) for v in s["seconds"]]
        self.first_window = int(s["first_window"])
        self.first_start = float(s["first_start"])
        self.covered = float(s["covered"])
        self.keyspace = float(s["keyspace"])
        self.keyspace_before = None if s["keyspace_before"] is None else float(s["keyspace_before"])
        self.last = [math.nan if v is None else float(v) for v in s["last"]]


def median3(prev2: np.ndarray | None, prev: np.ndarray, new: np.ndarray | None) -> np.ndarray:
    """The running median of three blocks at ``prev`` (its neighbours ``prev2`` and ``new``;
    a missing neighbour leaves the block as it is): a one-block burst is no change."""
    if prev2 is None or new is None:
        return prev
    return np.maximum(np.minimum(prev2, prev), np.minimum(np.maximum(prev2, prev), new))


__all__ = ["Block", "BlockPooler", "median3"]
