"""What moving slots costs on a cluster: the model behind a rescale's predicted duration.

Pufferscale's duration (Eq. 3) is the busiest node's bytes over the bandwidth. Moving a Redis
slot is bound by round trips more than by bytes: each batch of slots between one (source,
target) pair opens them (``SETSLOT IMPORTING``/``MIGRATING``), drains them (rounds of
``GETKEYSINSLOT`` and ``MIGRATE``, one call per slot and round, ``KEY_BATCH`` keys at most)
and closes them on every master (``SETSLOT NODE``, a cluster-config save each). So a batch
takes

    t = per_batch_s + per_slot_s * slots + per_key_s * keys + per_byte_s * bytes

and, since a node is in one move at a time while pairs that share no node run together, a
rescale takes at least its busiest node's sum over its pairs (:meth:`MoveCosts.predict`).

The coefficients are fitted (least squares, none negative) to the batches the mover timed on
this cluster, kept in the backend's state between runs; before a first move,
:data:`DEFAULT_COSTS`, fitted the same way on a local cluster of this machine (loopback,
nodes.conf on local disk). :func:`calibrate` times one-way moves on a cluster given to it.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from regimetune.backend.redis_cluster.measure import SlotStats
    from regimetune.backend.redis_cluster.topology import Connections, Topology

import numpy as np

#: Fewest timed batches a fit takes; with fewer the costs in force stay.
MIN_BATCHES = 4


@dataclass(frozen=True, slots=True)
class BatchTiming:
    """One batch the mover carried out: slots, keys and bytes moved, and its seconds."""

    slots: int
    keys: int
    bytes: float
    seconds: float


@dataclass(frozen=True, slots=True)
class PairWork:
    """What one (source, target) pair moves."""

    slots: int
    keys: int
    bytes: float


@dataclass(frozen=True, slots=True)
class MoveCosts:
    """Seconds per batch, slot, key and byte of a slot move (module docstring).

    >>> c = MoveCosts(per_batch_s=0.01, per_slot_s=0.001, per_key_s=1e-5, per_byte_s=1e-9)
    >>> round(c.predict({("a", "b"): PairWork(64, 1000, 1e6), ("c", "b"): PairWork(1, 0, 0.0)}, 32), 4)
    0.106
    """

    per_batch_s: float
    per_slot_s: float
    per_key_s: float
    per_byte_s: float
    batches_fitted: int = 0

    def pair_seconds(self, work: PairWork, slot_batch: int) -> float:
        batches = -(-work.slots // slot_batch) if work.slots else 0
        return (
            self.per_batch_s * batches
            + self.per_slot_s * work.slots
            + self.per_key_s * work.keys
            + self.per_byte_s * work.bytes
        )

    def predict(self, pairs: Mapping[tuple[str, str], PairWork], slot_batch: int) -> float:
        """The busiest node's time: the sum over the pairs it is in (its moves never
        overlap; pairs that share no node do)."""
        per_node: dict[str, float] = defaultdict(float)
        for (src, dst), work in pairs.items():
            t = self.pair_seconds(work, slot_batch)
            per_node[src] += t
            per_node[dst] += t
        return max(per_node.values(), default=0.0)

    @classmethod
    def fit(cls, timings: Sequence[BatchTiming], fallback: MoveCosts) -> MoveCosts:
        """Least squares, no coefficient negative, on the timed batches (``fallback``
        when there are fewer than :data:`MIN_BATCHES`). A column that never varies (say,
        every batch of one slot) cannot be told from the batch term: it keeps the
        fallback's coefficient, taken off the times first."""
        from scipy.optimize import nnls

        if len(timings) < MIN_BATCHES:
            return fallback
        x = np.array([[1.0, t.slots, t.keys, t.bytes] for t in timings])
        y = np.array([t.seconds for t in timings])
        prior = np.array([fallback.per_batch_s, fallback.per_slot_s, fallback.per_key_s, fallback.per_byte_s])
        free = np.ones(4, np.bool_)
        free[1:] = x[:, 1:].std(axis=0) > 1e-12 * np.maximum(np.abs(x[:, 1:]).max(axis=0), 1.0)
        y_free = y - x[:, ~free] @ prior[~free]
        scale = np.maximum(np.abs(x[:, free]).max(axis=0), 1e-300)
        coef, _ = nnls(x[:, free] / scale, y_free)
        out = prior.copy()
        out[free] = coef / scale
        return cls(
            per_batch_s=float(out[0]),
            per_slot_s=float(out[1]),
            per_key_s=float(out[2]),
            per_byte_s=float(out[3]),
            batches_fitted=len(timings),
        )


#: Of the order :func:`calibrate` fits on a local cluster of this machine (loopback, 1-16 KiB
#: values, nodes.conf on local disk).
DEFAULT_COSTS = MoveCosts(per_batch_s=5e-3, per_slot_s=2e-4, per_key_s=2e-5, per_byte_s=3e-9)


def pair_work(
    targets: Mapping[int, str],
    owners: Mapping[int, str],
    keys: np.ndarray,
    sizes: Mapping[int, float] | np.ndarray,
) -> dict[tuple[str, str], PairWork]:
    """Each (source, target) pair's slots, keys and bytes for slots moving to ``targets``."""
    acc: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0, 0.0])
    for slot, dst in targets.items():
        src = owners.get(slot)
        if src is None or src == dst:
            continue
        a = acc[(src, dst)]
        a[0] += 1
        a[1] += int(keys[slot])
        a[2] += float(sizes[slot])
    return {pair: PairWork(int(a[0]), int(a[1]), float(a[2])) for pair, a in acc.items()}


def calibrate(
    conns: Connections,
    topo: Topology,
    stats: SlotStats,
    *,
    sizes: Sequence[int] = (1, 2, 4, 8, 16, 32, 64),
    rounds: int = 2,
    key_batch: int = 200,
) -> list[BatchTiming]:
    """Time batches of ``sizes`` slots (each size ``rounds`` times) moved from the master with
    the most slots to the next one, the largest slots first, so slots, keys and bytes vary
    between batches; one slot first, untimed (the first ``MIGRATE`` between two nodes opens
    their connection). The slots stay where they went: this is for a scratch cluster (a slot
    moved straight back can be lost to the race of config epochs, see the rescaler)."""
    from regimetune.backend.redis_cluster.migrate import SlotMove, SlotMover

    masters = topo.masters
    src, dst = sorted(masters, key=lambda node: -len(node.slots))[:2]
    mine = sorted(src.slots, key=lambda s: -float(stats.bytes[s]))
    mover = SlotMover(conns, key_batch=key_batch)
    mover.move([SlotMove(mine.pop(), src, dst)], masters)
    out = []
    for n in sizes:
        for _ in range(rounds):
            slots, mine = mine[:n], mine[n:]
            t = time.perf_counter()
            keys = mover.move([SlotMove(s, src, dst) for s in slots], masters)
            out.append(
                BatchTiming(len(slots), keys, float(stats.bytes[slots].sum()), time.perf_counter() - t)
            )
    return out


def timings_of(rows: Iterable[tuple[int, int, float, float]]) -> list[BatchTiming]:
    return [BatchTiming(int(s), int(k), float(b), float(t)) for s, k, b, t in rows]


__all__ = [
    "DEFAULT_COSTS",
    "MIN_BATCHES",
    "BatchTiming",
    "MoveCosts",
    "PairWork",
    "calibrate",
    "pair_work",
    "timings_of",
]
