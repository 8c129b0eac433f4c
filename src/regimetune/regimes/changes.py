"""The change test: the least-cost partition of blocks into lines (optimal partitioning with
PELT's pruning, Killick et al. 2012), kept up to date block by block.

Between two changes each feature ``j`` follows a line; its blocks scatter about that line
with variance ``v_j``. A segment costs the squared residuals of its least-squares lines over
``v_j``, summed over features; a change costs ``penalty``. For every new block the test
finds the best start of the last segment among the candidates (each earlier block that can
still begin the best partition); a candidate whose cost already exceeds the best is pruned
for good, since a longer segment never costs less. :meth:`Partition.segments` backtracks the
best partition of every block so far; :meth:`Partition.freeze` fixes its cuts before a block
and forgets what lies before (memory stays bounded by the blocks since the oldest segment
not yet frozen).

>>> import numpy as np
>>> y = np.r_[np.zeros(30), np.full(30, 1.0)][:, None] + np.tile([0.01, -0.01], 30)[:, None]
>>> p = Partition(d=1, penalty=10.0)
>>> for row in y:
...     p.push(row, np.array([1e4]))
>>> p.segments()
[(0, 30), (30, 60)]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: A segment holds at least this many blocks (two points fix a line: fewer is no segment).
MIN_SIZE = 2


@dataclass
class Partition:
    """Blocks since the oldest unfrozen one, their cumulative sums, and PELT's table."""

    d: int
    penalty: float
    lines: bool = True  # False: each segment is a level (no slope)
    origin: int = 0  # block counter of position 0
    rows: list[list[float]] = field(default_factory=list)  # the blocks' values (positions 0..n-1)
    best: list[float] = field(default_factory=list)  # least cost of positions 0..n (F, position 0 first)
    last: list[int] = field(default_factory=list)  # the best partition's last start before each position
    candidates: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.best:
            self.best = [-self.penalty]
            self.last = [0]
        self._sums = _Sums(np.asarray(self.rows, dtype=np.float64).reshape(-1, self.d))

    @property
    def n(self) -> int:
        """Blocks held (since the last frozen cut)."""
        return len(self.rows)

    def push(self, row: np.ndarray, inv_var: np.ndarray) -> None:
        """Learn one block's values with each feature's inverse variance."""
        self.rows.append([float(v) for v in row])
        self._sums.append(np.asarray(row, dtype=np.float64))
        self._step(self.n, inv_var)

    def _step(self, n: int, inv_var: np.ndarray) -> None:
        if n - MIN_SIZE >= 0 and (n - MIN_SIZE) not in self.candidates:
            self.candidates.append(n - MIN_SIZE)
        if not self.candidates:
            self.best.append(np.inf)
            self.last.append(0)
            return
        c = np.asarray(self.candidates)
        before = np.array([self.best[k] for k in self.candidates])
        cost = before + self._sums.cost(c, n, inv_var, lines=self.lines)
        i = int(np.argmin(cost))
        self.best.append(float(cost[i] + self.penalty))
        self.last.append(int(c[i]))
        self.candidates = c[cost <= cost[i] + self.penalty].tolist()

    def segments(self) -> list[tuple[int, int]]:
        """The best partition of the blocks held, as ``(start, end)`` block counters."""
        out = []
        t = self.n
        while t > 0:
            s = self.last[t]
            out.append((self.origin + s, self.origin + t))
            t = s
        return out[::-1]

    def freeze(self, start: int, inv_var: np.ndarray) -> None:
        """Fix a cut at block counter ``start`` (a segment's start in :meth:`segments`) and
        forget the blocks before it; the table after it is worked out again from there."""
        k = start - self.origin
        if k > 0:
            self.reread(inv_var, k)

    def reread(self, inv_var: np.ndarray, k: int = 0) -> None:
        """Work the table out again over the blocks held from position ``k`` on, with these
        variances (pruning is exact only for the variances it was done with)."""
        rows = self.rows[k:]
        self.origin += k
        self.rows, self.best, self.last, self.candidates = [], [-self.penalty], [0], []
        self._sums = _Sums(np.empty((0, self.d)))
        for row in rows:
            self.push(np.asarray(row), inv_var)

    def to_state(self) -> dict[str, Any]:
        return {
            "origin": self.origin,
            "rows": self.rows,
            "best": [None if not np.isfinite(v) else v for v in self.best],
            "last": self.last,
            "candidates": self.candidates,
        }

    @classmethod
    def from_state(cls, d: int, penalty: float, lines: bool, s: dict[str, Any]) -> Partition:
        return cls(
            d=d,
            penalty=penalty,
            lines=lines,
            origin=int(s["origin"]),
            rows=[[float(v) for v in r] for r in s["rows"]],
            best=[np.inf if v is None else float(v) for v in s["best"]],
            last=[int(v) for v in s["last"]],
            candidates=[int(v) for v in s["candidates"]],
        )


class _Sums:
    """Cumulative sums of 1, t, t^2, y, t y, y^2 over positions (t the position), grown in
    place, from which any segment's least-squares lines cost O(d)."""

    def __init__(self, rows: np.ndarray) -> None:
        n, d = rows.shape
        cap = max(64, 2 * n)
        self.t = np.zeros((cap + 1, 2))  # sum t, sum t^2
        self.y = np.zeros((cap + 1, 3, d))  # sum y, sum t y, sum y^2
        self.n = 0
        for r in rows:
            self.append(r)

    def append(self, row: np.ndarray) -> None:
        if self.n + 1 >= len(self.t):
            self.t = np.concatenate([self.t, np.zeros_like(self.t)])
            self.y = np.concatenate([self.y, np.zeros_like(self.y)])
        t = float(self.n)
        self.t[self.n + 1] = self.t[self.n] + (t, t * t)
        self.y[self.n + 1] = self.y[self.n] + (row, t * row, row * row)
        self.n += 1

    def cost(self, starts: np.ndarray, end: int, inv_var: np.ndarray, *, lines: bool = True) -> np.ndarray:
        """Each segment ``[s, end)``'s squared residuals about its lines (``lines``, else its
        means), over the variances."""
        m = (end - starts).astype(np.float64)[:, None]
        st, stt = (self.t[end] - self.t[starts]).T
        y = self.y[end] - self.y[starts]
        sy, sty, syy = y[:, 0], y[:, 1], y[:, 2]
        st, stt = st[:, None], stt[:, None]
        cxx = stt - st * st / m
        cxy = sty - st * sy / m
        cyy = syy - sy * sy / m
        rss = cyy - np.where(cxx > 1e-9, cxy * cxy / np.where(cxx > 1e-9, cxx, 1.0), 0.0) if lines else cyy
        return (np.maximum(rss, 0.0) * inv_var).sum(axis=1)


def block_noise(y: np.ndarray) -> np.ndarray:
    """Each feature's block-to-block noise variance, from second differences (a line's
    slope cancels in them): their mean square over 6 with the largest 2 % clipped, so a
    few steps do not read as noise but bursty features keep their bursts."""
    d2 = np.abs(np.diff(np.asarray(y, dtype=np.float64), n=2, axis=0))
    n = len(d2)
    if n < 3:
        return np.zeros(y.shape[1])
    k = min(n - 1, int(0.98 * n))
    q = np.partition(d2, k, axis=0)[k]
    return np.mean(np.minimum(d2, q) ** 2, axis=0) / 6.0


__all__ = ["MIN_SIZE", "Partition", "block_noise"]
