"""The persistent store behind the cache: a server of fixed throughput with a backlog.

Per window the store receives the cache's read misses plus every write (writes land in
each tier and in the store). It serves ``capacity_ops_s`` operations per second; the cache
tiers can buffer ``buffer_s`` seconds of store work. Work beyond that backs up and the
workers stall until the store has caught up with the buffer (ParSplice's reads block
behind LevelDB compactions), which stretches the run. A backlog within the buffer is
carried over to later windows.

>>> s = StoreModel(capacity_ops_s=10.0, buffer_s=0.0)
>>> s.stalls(np.array([5.0, 30.0, 5.0]), np.ones(3)).tolist()
[0.0, 2.0, 0.0]
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numba
import numpy as np

from regimetune.models.errors import InputError

DEFAULT_CAPACITY_OPS_S = 50.0
"""Calibrated on the collectors' ParSplice-like generator at its defaults (256 workers,
2.5 h, growth 1; 10 s windows, ``DEFAULT_BUFFER_S`` of buffer): the store keeps up with the
unavoidable load (first references and writes, 28-38 ops/s) so a 100K-key cache runs at
100% of the unlimited cache, while a 10- or 30-key cache overloads it from the flash crowd
on (efficiency ~0.1) and a 100-key cache loses ~17%. Scale it with the number of workers;
for other traces pass the store's measured throughput."""

DEFAULT_BUFFER_S = 30.0
"""Seconds of store work the cache tiers absorb before workers stall."""


@numba.njit(cache=True, nogil=True)
def _stalls(
    demand: np.ndarray, lengths: np.ndarray, cap: float, buf: float
) -> np.ndarray:  # pragma: no cover
    out = np.zeros(demand.shape[0])
    q = 0.0
    for w in range(demand.shape[0]):
        q += demand[w] - cap * lengths[w]
        if q > buf:
            out[w] = (q - buf) / cap
            q = buf
        if q < 0.0:
            q = 0.0
    return out


@dataclass(frozen=True, slots=True)
class StoreModel:
    """A persistent store that serves ``capacity_ops_s`` operations per second, behind
    cache tiers that can buffer ``buffer_s`` seconds of its work."""

    capacity_ops_s: float = DEFAULT_CAPACITY_OPS_S
    buffer_s: float = DEFAULT_BUFFER_S

    def __post_init__(self) -> None:
        if not (math.isfinite(self.capacity_ops_s) and self.capacity_ops_s > 0):
            raise InputError(f"store capacity must be a positive number of ops/s, got {self.capacity_ops_s}")
        if not (math.isfinite(self.buffer_s) and self.buffer_s >= 0):
            raise InputError(f"store buffer must be >= 0 seconds, got {self.buffer_s}")

    def stalls(self, demand: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """Seconds the workers stall in each window, given the store operations each window
        asks for and the windows' nominal lengths."""
        d = np.ascontiguousarray(demand, dtype=np.float64)
        ln = np.ascontiguousarray(lengths, dtype=np.float64)
        if d.shape != ln.shape or d.ndim != 1:
            raise InputError("demand and window lengths must be equally long vectors")
        if np.any(d < 0) or np.any(ln <= 0):
            raise InputError("demand must be >= 0 and window lengths > 0")
        return _stalls(d, ln, float(self.capacity_ops_s), float(self.capacity_ops_s * self.buffer_s))


__all__ = ["DEFAULT_BUFFER_S", "DEFAULT_CAPACITY_OPS_S", "StoreModel"]
