"""Which policy a regime gets: the stored one within the hard bounds, else the safe default;
a tuning job replaces only the part it tuned; an operator's policy is bounds-checked."""

from __future__ import annotations

import pytest

from regimetune.control.policies import check_bounds, choose, merge_tuned, operator_policy
from regimetune.control.settings import BoundsSettings
from regimetune.models import BoundsError, CachePolicy, Objective, Policy, PufferscaleWeights

BOUNDS = BoundsSettings(limit_keys=(10, 1000))
LRU = CachePolicy(mode="lru", limit_keys=500)
WEIGHTS = PufferscaleWeights(w_load=0.25, w_data=1.0, w_time=3.0)


def test_check_bounds_names_the_first_knob_outside() -> None:
    check_bounds(Policy(cache=LRU), BOUNDS)
    with pytest.raises(BoundsError, match=r"cache\.limit_keys=5 is outside its hard bounds \[10, 1000\]"):
        check_bounds(Policy(cache=CachePolicy(mode="lru", limit_keys=5)), BOUNDS)
    with pytest.raises(BoundsError, match=r"weights\.w_time"):
        check_bounds(Policy(weights=PufferscaleWeights(w_time=2e6)), BOUNDS)


def test_choose_the_stored_policy_within_bounds_else_the_safe_default() -> None:
    default = Policy(cache=CachePolicy(mode="lru", limit_keys=42))
    stored = Policy(regime_id=3, cache=LRU, source="operator")
    got, why = choose(3, stored=stored, default=default, bounds=BOUNDS)
    assert got == stored and why == "operator policy of regime 3"
    got, why = choose(3, stored=None, default=default, bounds=BOUNDS)
    assert (got.regime_id, got.source, got.cache.limit_keys) == (3, "default", 42)
    assert why == "no policy for regime 3 yet: safe default"
    # bounds tightened after the policy was stored: it is refused, with the reason
    got, why = choose(3, stored=stored, default=default, bounds=BoundsSettings(limit_keys=(1, 100)))
    assert got.source == "default" and "refused (cache.limit_keys=500 is outside" in why


@pytest.mark.parametrize(("objective", "kept"), [(Objective.CACHE, "weights"), (Objective.RESCALE, "cache")])
def test_a_tuning_job_replaces_only_the_part_it_tuned(objective: Objective, kept: str) -> None:
    old = Policy(regime_id=1, cache=LRU, weights=WEIGHTS, source="operator")
    tuned = Policy(
        regime_id=1,
        cache=CachePolicy(mode="lru", limit_keys=77),
        weights=PufferscaleWeights(w_load=1.0, w_data=0.5),
        source="tuned",
    )
    merged = merge_tuned(tuned, old, objective)
    tuned_part = "cache" if kept == "weights" else "weights"
    assert getattr(merged, kept) == getattr(old, kept)
    assert getattr(merged, tuned_part) == getattr(tuned, tuned_part)
    assert merged.source == "tuned"
    assert merge_tuned(tuned, None, objective) == tuned  # nothing to keep


def test_an_operator_policy_is_bounds_checked() -> None:
    p = operator_policy(2, cache=LRU, weights=WEIGHTS, score=0.5, bounds=BOUNDS)
    assert (p.regime_id, p.source, p.score) == (2, "operator", 0.5)
    with pytest.raises(BoundsError):
        operator_policy(
            2, cache=CachePolicy(mode="lru", limit_keys=5000), weights=WEIGHTS, score=None, bounds=BOUNDS
        )
