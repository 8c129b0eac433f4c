"""Cache policies as capacity schedules: the key limit in force at every request.

A schedule is piecewise constant over request indices: ``starts[p]`` is the first request
of piece ``p`` (``starts[0] == 0``) and ``caps[p]`` its capacity in keys (``UNLIMITED`` for
no limit). Every policy of :class:`regimetune.models.CachePolicy` maps to one, and so does a
regime-keyed policy (a ``CachePolicy`` per regime id, switching when the regime changes).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from regimetune.models import CacheMode, CachePolicy
from regimetune.models.errors import InputError

if TYPE_CHECKING:
    from regimetune.tuner.cache.trace import RequestTimes

UNLIMITED: int = 1 << 62
"""Capacity of an unlimited cache: more keys than any trace holds, less than ``COLD``."""


@dataclass(frozen=True)
class CapacitySchedule:
    """The key limit in force from request ``starts[p]`` on is ``caps[p]``.

    >>> s = CapacitySchedule.build([0, 5, 5, 9], [10, 3, 3, 7])
    >>> s.starts.tolist(), s.caps.tolist()
    ([0, 5, 9], [10, 3, 7])
    >>> s.grows
    True
    """

    starts: np.ndarray
    caps: np.ndarray

    @classmethod
    def build(cls, starts: npt.ArrayLike, caps: npt.ArrayLike) -> CapacitySchedule:
        """Validate, drop empty pieces and merge neighbours of equal capacity."""
        st = np.asarray(starts, dtype=np.int64)
        cp = np.asarray(caps, dtype=np.int64)
        if st.ndim != 1 or st.shape != cp.shape or len(st) == 0:
            raise InputError("a capacity schedule needs equally long, non-empty starts and caps")
        if st[0] != 0 or np.any(np.diff(st) < 0):
            raise InputError("schedule starts must begin at 0 and not decrease")
        if np.any(cp < 0):
            raise InputError(f"cache capacity must be >= 0 keys, got {int(cp.min())}")
        # of pieces that start at the same request, the last one wins
        keep = np.ones(len(st), dtype=bool)
        keep[:-1] = st[1:] != st[:-1]
        st, cp = st[keep], cp[keep]
        keep = np.ones(len(st), dtype=bool)
        keep[1:] = cp[1:] != cp[:-1]
        st, cp = st[keep], cp[keep]
        st.setflags(write=False)
        cp.setflags(write=False)
        return cls(starts=st, caps=cp)

    @property
    def grows(self) -> bool:
        """True if the capacity ever goes up again (the cache must refill)."""
        return bool(np.any(np.diff(self.caps) > 0))

    def cap_at(self, idx: npt.ArrayLike) -> np.ndarray:
        """Capacity in force at request indices ``idx``."""
        return self.caps[np.searchsorted(self.starts, np.asarray(idx), side="right") - 1]


def policy_schedule(
    policy: CachePolicy, *, ts: np.ndarray | RequestTimes, first_ref: np.ndarray
) -> CapacitySchedule:
    """The schedule of one ``CachePolicy`` over a trace with request times ``ts`` (an array,
    or a spooled trace's :class:`~regimetune.tuner.cache.trace.RequestTimes`) and the
    index of each key's first reference ``first_ref`` (increasing).

    A two-phase cache switches after the request that makes it hold ``H`` keys, i.e. the
    first reference of the ``H``-th distinct key (an unlimited cache holds every key seen),
    or at the first request at or after ``switch_time_s``; it never switches if neither
    happens within the trace.
    """
    if not isinstance(policy, CachePolicy):
        raise InputError(f"expected a CachePolicy, got {type(policy).__name__}")
    if policy.mode is CacheMode.UNLIMITED:
        return CapacitySchedule.build([0], [UNLIMITED])
    limit = int(policy.limit_keys or 0)  # the model guarantees one for these modes
    if policy.mode is CacheMode.LRU:
        return CapacitySchedule.build([0], [limit])
    if policy.high_watermark_keys is not None:
        h = policy.high_watermark_keys
        at = int(first_ref[h - 1]) + 1 if h <= len(first_ref) else len(ts)
    else:
        at = int(ts.searchsorted(float(policy.switch_time_s or 0.0), side="left"))
    if at >= len(ts):
        return CapacitySchedule.build([0], [UNLIMITED])
    return CapacitySchedule.build([0, at], [UNLIMITED, limit])


@dataclass(frozen=True)
class RegimePolicy:
    """A ``CachePolicy`` per regime id, switched when the regime changes.

    ``window_starts_s[w]`` is when label window ``w`` begins and ``labels[w]`` its regime id
    (e.g. the per-window labels of a detector's ``RegimeHistory``); a regime without a policy
    (or label ``-1``) uses ``default``. Two-phase policies keep their global switch point:
    before it every regime runs unlimited.
    """

    policies: Mapping[int, CachePolicy]
    window_starts_s: np.ndarray
    labels: np.ndarray
    default: CachePolicy = field(default_factory=CachePolicy)

    def __post_init__(self) -> None:
        st = np.asarray(self.window_starts_s, dtype=np.float64)
        lb = np.asarray(self.labels, dtype=np.int64)
        if st.ndim != 1 or st.shape != lb.shape or len(st) == 0:
            raise InputError("a regime policy needs equally long, non-empty window starts and labels")
        if np.any(np.diff(st) < 0) or not np.all(np.isfinite(st)):
            raise InputError("regime window starts must be finite and increasing")
        for rid, pol in self.policies.items():
            if not isinstance(pol, CachePolicy):
                raise InputError(f"regime {rid}: expected a CachePolicy, got {type(pol).__name__}")
        if not isinstance(self.default, CachePolicy):
            raise InputError("the default regime policy must be a CachePolicy")

    def schedule(self, *, ts: np.ndarray | RequestTimes, first_ref: np.ndarray) -> CapacitySchedule:
        pols = [self.default, *self.policies.values()]
        index = {rid: i + 1 for i, rid in enumerate(self.policies)}
        scheds = [policy_schedule(p, ts=ts, first_ref=first_ref) for p in pols]
        st = np.asarray(self.window_starts_s, dtype=np.float64)
        lb = np.asarray(self.labels, dtype=np.int64)
        win_idx = np.asarray(ts.searchsorted(st, side="left"))
        win_idx[0] = 0  # the first label window also covers anything before it
        ids = np.array(sorted(index), dtype=np.int64)
        pos = np.minimum(np.searchsorted(ids, lb), max(len(ids) - 1, 0))
        known = (ids[pos] == lb) if len(ids) else np.zeros(len(lb), dtype=bool)
        which = np.where(
            known, np.array([index[int(r)] for r in ids], dtype=np.int64)[pos] if len(ids) else 0, 0
        )
        cuts = np.unique(np.concatenate([win_idx, *[s.starts for s in scheds]]))
        cuts = cuts[cuts < max(len(ts), 1)]
        pol_of_cut = which[np.searchsorted(win_idx, cuts, side="right") - 1]
        caps = np.empty(len(cuts), dtype=np.int64)
        for i, s in enumerate(scheds):
            sel = pol_of_cut == i
            if np.any(sel):
                caps[sel] = s.cap_at(cuts[sel])
        return CapacitySchedule.build(cuts, caps)


CachePolicyLike = CachePolicy | RegimePolicy | CapacitySchedule


def as_schedule(
    policy: CachePolicyLike, *, ts: np.ndarray | RequestTimes, first_ref: np.ndarray
) -> CapacitySchedule:
    if isinstance(policy, CapacitySchedule):
        return policy
    if isinstance(policy, RegimePolicy):
        return policy.schedule(ts=ts, first_ref=first_ref)
    if isinstance(policy, CachePolicy):
        return policy_schedule(policy, ts=ts, first_ref=first_ref)
    raise InputError(
        f"a cache policy is a CachePolicy, RegimePolicy or CapacitySchedule, not {type(policy).__name__}"
    )


__all__ = [
    "UNLIMITED",
    "CachePolicyLike",
    "CapacitySchedule",
    "RegimePolicy",
    "as_schedule",
    "policy_schedule",
]
