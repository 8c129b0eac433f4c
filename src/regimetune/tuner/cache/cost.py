"""The cost model of the store behind the cache: what a miss costs the run.

Two effects, both stated relative to the trace so the same defaults mean the same thing on
any trace (a figure in ops/s calibrated on one generator made every policy score 1.0 on
real traces, issue 14):

* **Latency** (``miss_cost``): a read miss makes its worker wait for the store. The wait is
  ``miss_cost`` times the compute time per request, which is read off the trace as the
  window's length over its requests (the workers' aggregate pace). A window whose reads all
  miss therefore takes ``1 + miss_cost`` times as long.
* **Throughput** (``store_headroom`` or ``store_ops_s``): the store serves a bounded number
  of operations per second; misses and writes beyond it back up, and beyond ``buffer_s``
  seconds of backlog the workers stall (:class:`StoreModel`). By default the store is sized
  at ``store_headroom`` times the heaviest window's unavoidable load (first references and
  writes, which every cache sends to the store), so the unlimited cache never stalls.

Defaults, from the seed papers (Sevilla et al., ParSplice with LevelDB on Lustre behind the
cache hierarchy; ``../shared/design/seeds-digest.md``):

* ``miss_cost = 0.05``: 256 workers issue about 750 reads/s + 300 puts/s, so each worker
  computes ~0.25 s per request; an unloaded LevelDB get through the hierarchy to Lustre
  costs a few to ~10 ms (a network hop per tier, a Lustre RPC, a few SSTable reads), i.e.
  0.01-0.05 of the compute per request. We take the upper end: the latency a user would
  not want to ignore. The sensitivity sweep covers 0.01-1.
* ``store_headroom = 1.5``: the unlimited cache (store load = writes + first references)
  ran at full speed, while a 100-key cache (~750 reads + 300 puts per second at the store)
  piled reads up behind LevelDB compactions. The store's capacity lies between the two,
  1x-3.5x the unavoidable load; the generator's calibration (50 ops/s for 28-38 ops/s of
  unavoidable load) puts it at 1.3-1.8x.
* ``buffer_s = 30``: the cache tiers absorb half a minute of store work before reads block
  (the kept calibration of :data:`DEFAULT_BUFFER_S`).

>>> CostModel().miss_cost, CostModel(miss_cost=0.2).with_miss_cost(0.5).miss_cost
(0.05, 0.5)
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from regimetune.models.errors import InputError
from regimetune.tuner.cache.store import DEFAULT_BUFFER_S, StoreModel

DEFAULT_MISS_COST = 0.05
DEFAULT_STORE_HEADROOM = 1.5


@dataclass(frozen=True, slots=True)
class CostModel:
    """What a miss costs: ``miss_cost`` (read-miss latency relative to the compute time per
    request), the store's throughput (``store_ops_s`` ops/s, or ``store_headroom`` times the
    trace's heaviest unavoidable load) and ``buffer_s`` seconds of buffered store work."""

    miss_cost: float = DEFAULT_MISS_COST
    store_headroom: float = DEFAULT_STORE_HEADROOM
    store_ops_s: float | None = None
    buffer_s: float = DEFAULT_BUFFER_S

    def __post_init__(self) -> None:
        def finite(name: str, v: Any) -> float:
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
                raise InputError(f"cost model: {name} must be a finite number, got {v!r}")
            return float(v)

        if finite("miss_cost", self.miss_cost) < 0:
            raise InputError(f"cost model: miss_cost must be >= 0, got {self.miss_cost}")
        if finite("store_headroom", self.store_headroom) < 1.0:
            raise InputError(
                f"cost model: store_headroom must be >= 1 (the store serves at least the unavoidable "
                f"load), got {self.store_headroom}"
            )
        if self.store_ops_s is not None and not finite("store_ops_s", self.store_ops_s) > 0:
            raise InputError(
                f"cost model: store capacity (--store-ops) must be > 0 ops/s, got {self.store_ops_s}"
            )
        if finite("buffer_s", self.buffer_s) < 0:
            raise InputError(f"cost model: buffer_s must be >= 0, got {self.buffer_s}")

    @classmethod
    def from_store(cls, store: StoreModel, *, miss_cost: float = 0.0) -> CostModel:
        """The older, throughput-only model: a store of fixed ops/s and no miss latency."""
        return cls(miss_cost=miss_cost, store_ops_s=store.capacity_ops_s, buffer_s=store.buffer_s)

    def with_miss_cost(self, miss_cost: float) -> CostModel:
        return replace(self, miss_cost=miss_cost)

    def store_for(self, unavoidable_w: np.ndarray, window_s: float) -> StoreModel:
        """The store for a trace whose windows send ``unavoidable_w`` operations each that no
        cache can spare it (first references and writes)."""
        if self.store_ops_s is not None:
            return StoreModel(capacity_ops_s=self.store_ops_s, buffer_s=self.buffer_s)
        peak = float(np.max(unavoidable_w)) / window_s if len(unavoidable_w) else 0.0
        return StoreModel(capacity_ops_s=max(self.store_headroom * peak, 1e-9), buffer_s=self.buffer_s)

    def latency_s(self, read_misses_w: np.ndarray, requests_w: np.ndarray, window_s: float) -> np.ndarray:
        """Seconds each window's read misses add: ``miss_cost`` times the compute time per
        request (the window's length over its requests) per miss."""
        n = np.maximum(np.asarray(requests_w, dtype=np.float64), 1.0)
        return self.miss_cost * window_s * np.asarray(read_misses_w, dtype=np.float64) / n

    def describe(self) -> dict[str, Any]:
        return asdict(self)


__all__ = ["DEFAULT_MISS_COST", "DEFAULT_STORE_HEADROOM", "CostModel"]
