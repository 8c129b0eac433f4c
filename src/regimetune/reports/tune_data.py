"""What the tuning report plots, computed from a tuning result and the trace it was tuned on.

Miss-ratio curves come from one pass of LRU stack distances (a request hits an LRU cache of
``c`` keys iff its distance is below ``c``, so one pass gives every size at once). The limit
in force over time is the capacity schedule the simulator itself follows
(:meth:`RegimePolicy.schedule`), so the chart shows what was scored, not a re-derivation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from regimetune.models import CachePolicy, Evaluation, PolicyFile, WindowFrame
from regimetune.tuner.cache import COLD, UNLIMITED, RegimePolicy, stack_distances
from regimetune.tuner.objectives import RESIDUAL_NAMES


@dataclass(frozen=True, eq=False)
class RequestStream:
    """Request times and LRU stack distances of a trace, in time order."""

    ts: np.ndarray
    dist: np.ndarray

    @classmethod
    def of(cls, ts: np.ndarray, keys: np.ndarray) -> RequestStream:
        return cls(ts=np.asarray(ts, dtype=np.float64), dist=stack_distances(keys))

    @property
    def first_ref(self) -> np.ndarray:
        """Index of each key's first request, in order."""
        return np.flatnonzero(self.dist == COLD)


def _window_of(starts: np.ndarray, ts: np.ndarray) -> np.ndarray:
    return np.clip(np.searchsorted(starts, ts, side="right") - 1, 0, max(len(starts) - 1, 0))


def miss_ratio_curves_of(
    stream: RequestStream, starts: np.ndarray, labels: np.ndarray, *, points: int = 120
) -> tuple[np.ndarray, dict[int, np.ndarray]]:
    """Cache sizes (log-spaced keys, up to the keyspace) and, per regime, the fraction of
    its requests that miss an LRU cache of each size (first references always miss).

    >>> s = RequestStream.of(np.arange(6.0), np.array([1, 2, 1, 1, 3, 3]))
    >>> caps, mr = miss_ratio_curves_of(s, np.array([0.0, 3.0]), np.array([0, 1]))
    >>> caps.tolist(), mr[0].tolist(), mr[1].tolist()
    ([1, 2, 3], [1.0, 0.6666666666666666, 0.6666666666666666], [0.3333333333333333, 0.3333333333333333, 0.3333333333333333])
    """
    n_keys = max(int(np.count_nonzero(stream.dist == COLD)), 1)
    caps = np.unique(np.round(np.logspace(0.0, np.log10(max(n_keys, 1)), points)).astype(np.int64))
    reg = np.asarray(labels)[_window_of(starts, stream.ts)]
    curves = {}
    for rid in sorted({int(v) for v in np.unique(reg) if v >= 0}):
        d = np.sort(stream.dist[reg == rid])
        curves[rid] = (len(d) - np.searchsorted(d, caps, side="left")) / len(d)
    return caps, curves


@dataclass(frozen=True, eq=False)
class LimitsOverTime:
    """Per window: the keyspace seen by its end, the tuned limit in force at its start
    (``nan`` while unlimited), and the keys the tuned cache held at its end."""

    keyspace: np.ndarray
    limit: np.ndarray
    cache_keys: np.ndarray


def limits_over_time(
    stream: RequestStream,
    frame: WindowFrame,
    labels: np.ndarray,
    policy_file: PolicyFile,
    window_keys: np.ndarray,
) -> LimitsOverTime:
    """The tuned policy replayed as the simulator's capacity schedule, window by window.
    ``window_keys`` is the tuned simulation's per-window occupancy, whose windows start at
    the first request."""
    starts = np.asarray(frame["start"], dtype=np.float64)
    ends = starts + np.asarray(frame["length"], dtype=np.float64)
    first_ref = stream.first_ref
    pols = {r: p.cache for r, p in policy_file.regimes.items() if p.cache is not None}
    policy = RegimePolicy(
        policies=pols,
        window_starts_s=starts,
        labels=np.asarray(labels, dtype=np.int64),
        default=policy_file.default.cache or CachePolicy(),
    )
    sched = policy.schedule(ts=stream.ts, first_ref=first_ref)
    idx = np.clip(np.searchsorted(stream.ts, starts, side="left"), 0, len(stream.ts) - 1)
    caps = sched.cap_at(idx).astype(np.float64)
    caps[caps >= UNLIMITED] = np.nan
    keyspace = np.searchsorted(stream.ts[first_ref], ends, side="left").astype(np.float64)
    wk = np.asarray(window_keys, dtype=np.float64)
    length = float(frame["length"].max()) if len(frame) else 1.0
    t0 = float(stream.ts[0])
    # the simulator's windows start at the first request and are as long as the frame's
    sim_w = np.clip(np.ceil((ends - t0) / length).astype(np.int64) - 1, 0, max(len(wk) - 1, 0))
    held = wk[sim_w] if len(wk) else np.full(len(frame), np.nan)
    return LimitsOverTime(keyspace=keyspace, limit=caps, cache_keys=held)


#: The residuals of ``CacheObjective`` that are constraints (hinges, zero when met); the
#: others pull towards less memory and more efficiency and are never zero.
CONSTRAINTS = ("efficiency", "memory_excess")


def convergence_of(evaluations: Sequence[Evaluation]) -> tuple[np.ndarray, np.ndarray]:
    """Each evaluation's objective (``nan`` if it failed) and whether it met the
    constraints: the efficiency target and the memory budget (their hinges are zero).

    >>> from regimetune.models import Evaluation
    >>> met = Evaluation(params={}, residuals=(0.0, 0.0, 2.4, 0.05), value=5.8)
    >>> short = Evaluation(params={}, residuals=(1.5, 0.0, 0.9, 0.4), value=3.2)
    >>> convergence_of([met, short])[1].tolist()
    [True, False]
    """
    values = np.array([np.nan if e.value is None else e.value for e in evaluations], dtype=np.float64)
    hinges = [RESIDUAL_NAMES.index(n) for n in CONSTRAINTS]

    def meets(e: Evaluation) -> bool:
        r = e.residuals
        return r is not None and len(r) == len(RESIDUAL_NAMES) and all(r[i] == 0.0 for i in hinges)

    return values, np.array([meets(e) for e in evaluations], dtype=bool)


def sweep_of(report: Mapping[str, Any]) -> tuple[np.ndarray, dict[str, np.ndarray]] | None:
    """The cost-model sweep a tuning report carries, if any: ``report["sweep"]`` maps each
    miss cost (a number, or its text) to each policy's efficiency at that cost; ``None``
    when absent or empty.

    >>> x, ys = sweep_of({"sweep": {"0.1": {"tuned": 0.9}, "0.01": {"tuned": 0.99}}})
    >>> x.tolist(), ys["tuned"].tolist()
    ([0.01, 0.1], [0.99, 0.9])
    """
    sweep = report.get("sweep")
    if not sweep:
        return None
    costs = sorted(sweep, key=float)
    x = np.array([float(c) for c in costs])
    names = list(dict.fromkeys(n for c in costs for n in sweep[c]))
    series = {n: np.array([float(sweep[c].get(n, np.nan)) for c in costs]) for n in names}
    return x, series


__all__ = [
    "LimitsOverTime",
    "RequestStream",
    "convergence_of",
    "limits_over_time",
    "miss_ratio_curves_of",
    "sweep_of",
]
