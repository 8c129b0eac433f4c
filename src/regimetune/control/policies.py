"""The rules that decide which policy a regime gets and how a new one is taken in.

- every policy stays within the hard bounds (``engine.bounds``) or is refused;
- a regime's policy is the one stored for it (tuned or set by an operator) when within the
  bounds, else the safe default;
- a tuning job tunes one part of a regime's policy, the cache limits or the rescaling
  weights: the other part stays as it was;
- an operator's policy is checked against the bounds before it is stored.

>>> from regimetune.models import CachePolicy, Objective, Policy, PufferscaleWeights
>>> old = Policy(regime_id=1, cache=CachePolicy(mode="lru", limit_keys=500), source="operator")
>>> tuned = Policy(regime_id=1, weights=PufferscaleWeights(w_load=0.5, w_data=1.0), source="tuned")
>>> merged = merge_tuned(tuned, old, Objective.RESCALE)
>>> merged.cache.limit_keys, merged.weights.w_load, merged.source
(500, 0.5, 'tuned')
"""

from __future__ import annotations

from regimetune.control.settings import BoundsSettings
from regimetune.models import BoundsError, CachePolicy, Objective, Policy, PufferscaleWeights


def check_bounds(policy: Policy, bounds: BoundsSettings) -> None:
    """Raise :class:`BoundsError` naming the first knob of ``policy`` outside its hard bounds."""
    c, w = policy.cache, policy.weights
    knobs: list[tuple[str, float | None, tuple[float, float]]] = [
        ("cache.limit_keys", c.limit_keys, bounds.limit_keys),
        ("cache.high_watermark_keys", c.high_watermark_keys, bounds.high_watermark_keys),
        ("cache.switch_time_s", c.switch_time_s, bounds.switch_time_s),
        ("weights.w_load", w.w_load, bounds.w_load),
        ("weights.w_data", w.w_data, bounds.w_data),
        ("weights.w_time", w.w_time, bounds.w_time),
    ]
    for name, value, (lo, hi) in knobs:
        if value is not None and not lo <= value <= hi:
            raise BoundsError(f"{name}={value} is outside its hard bounds [{lo}, {hi}]")


def choose(
    regime_id: int, *, stored: Policy | None, default: Policy, bounds: BoundsSettings
) -> tuple[Policy, str]:
    """The policy for ``regime_id`` and where it came from: ``stored`` (tuned or operator)
    if within the hard bounds, else ``default`` (the safe default) with the reason."""
    safe = default.model_copy(update={"regime_id": regime_id, "source": "default"})
    if stored is None:
        return safe, f"no policy for regime {regime_id} yet: safe default"
    try:
        check_bounds(stored, bounds)
    except BoundsError as exc:
        return safe, f"stored policy of regime {regime_id} refused ({exc}): safe default"
    return stored, f"{stored.source} policy of regime {regime_id}"


def merge_tuned(tuned: Policy, old: Policy | None, objective: Objective) -> Policy:
    """A tuning job's policy for a regime with the part it did not tune (the rescaling
    weights of a cache job, the cache limits of a rescale job) kept from ``old``."""
    if old is None:
        return tuned
    keep = "weights" if objective is Objective.CACHE else "cache"
    return tuned.model_copy(update={keep: getattr(old, keep)})


def operator_policy(
    regime_id: int,
    *,
    cache: CachePolicy,
    weights: PufferscaleWeights,
    score: float | None,
    bounds: BoundsSettings,
) -> Policy:
    """The policy an operator sets for ``regime_id``, refused (:class:`BoundsError`) when a
    knob is outside its hard bounds."""
    policy = Policy(regime_id=regime_id, cache=cache, weights=weights, source="operator", score=score)
    check_bounds(policy, bounds)
    return policy


__all__ = ["check_bounds", "choose", "merge_tuned", "operator_policy"]
