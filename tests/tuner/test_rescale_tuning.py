"""The held-out gate and the shrinkage of the weight tuning (issue 14: tuned weights must not
replace a preset they lose to off their training set)."""

from __future__ import annotations

import pytest

from regimetune.models import PRESETS, ConfigError, PufferscaleWeights
from regimetune.tuner.rescale import CampaignSpec
from regimetune.tuner.rescale.tuning import (
    campaign_seeds,
    held_out_gate,
    params_from_weights,
    tune_weights,
)

SMALL = dict(n_buckets=128, min_servers=4, max_servers=32, warmup=4, operations=8)
VOLATILE = CampaignSpec(p_commission=0.85, volatility=0.3, size_volatility=0.3, **SMALL)  # type: ignore[arg-type]


def test_training_and_held_out_campaigns_never_meet() -> None:
    for seed in (0, 1, 7):
        train, held = campaign_seeds(seed, 16, 16)
        assert len(set(train)) == 16 and len(set(held)) == 16 and not set(train) & set(held)
    assert not set(sum(campaign_seeds(0, 100, 100), ())) & set(sum(campaign_seeds(1, 100, 100), ()))
    with pytest.raises(ConfigError):
        campaign_seeds(0, 0, 4)


def test_gate_adopts_only_a_held_out_win() -> None:
    assert held_out_gate(1.9, 2.0, name="LDT", n_campaigns=4)[0]
    kept, why = held_out_gate(2.0, 2.0, name="LDT", n_campaigns=4)
    assert not kept and why.startswith("kept LDT") and "4 held-out campaigns" in why
    assert not held_out_gate(1.9, 2.0, name="LDT", n_campaigns=4, min_gain=0.1)[0]


def test_weights_that_do_not_win_on_held_out_campaigns_are_kept_back() -> None:
    # a gain of 90% on held-out campaigns is out of reach: the incumbent (best preset) stays
    w, rep = tune_weights(VOLATILE, budget=6, seed=0, n_seeds=2, n_held_out=3, min_gain=0.9)
    assert not rep.adopted
    assert rep.incumbent == min(rep.preset_values, key=rep.preset_values.__getitem__)
    assert w == PRESETS[rep.incumbent] == rep.weights
    assert rep.value == rep.preset_values[rep.incumbent]
    assert rep.held_out_value == rep.held_out_preset_values[rep.incumbent]
    assert rep.reason.startswith(f"kept {rep.incumbent}") and "3 held-out campaigns" in rep.reason
    assert not set(rep.train_seeds) & set(rep.held_out_seeds)


def test_adopted_weights_beat_the_incumbent_on_held_out_campaigns() -> None:
    w, rep = tune_weights(VOLATILE, budget=12, seed=0, n_seeds=4, n_held_out=4)
    assert rep.adopted, rep.reason  # the volatile campaign rewards relaxing the balances
    assert w == rep.candidate
    assert rep.candidate_held_out_value < rep.held_out_preset_values[rep.incumbent]
    assert rep.held_out_improvement > 0


def test_a_named_incumbent_is_what_the_tuned_weights_must_beat() -> None:
    current = PufferscaleWeights(w_load=1.0, w_data=0.5, w_time=2.0)
    w, rep = tune_weights(
        VOLATILE, budget=4, seed=1, n_seeds=2, n_held_out=2, incumbent=current, min_gain=0.9
    )
    assert rep.incumbent == "the incumbent" and w == current and not rep.adopted


def test_strong_shrinkage_holds_the_tuning_at_the_best_preset() -> None:
    _, loose = tune_weights(VOLATILE, budget=12, seed=0, n_seeds=2, n_held_out=0, shrinkage=0.0)
    _, tight = tune_weights(VOLATILE, budget=12, seed=0, n_seeds=2, n_held_out=0, shrinkage=1e6)
    anchor = params_from_weights(PRESETS[tight.incumbent])
    moved = params_from_weights(tight.candidate)
    assert moved == pytest.approx(anchor, abs=0.02)
    assert params_from_weights(loose.candidate) != pytest.approx(anchor, abs=0.02)
    assert tight.adopted and "without validation" in tight.reason
