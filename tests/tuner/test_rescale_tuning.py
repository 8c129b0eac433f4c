"""The held-out gate, the shrinkage and the warm start of the weight tuning (issue 14: tuned
weights must not replace a preset they lose to off their training set), through the one API."""

from __future__ import annotations

import numpy as np
import pytest

from regimetune.collectors import GeneratorConfig, generate
from regimetune.models import PRESETS, ConfigError, Policy, PolicyFile, PufferscaleWeights
from regimetune.regimes import OnlineRegimeDetector
from regimetune.tuner import RescaleConfig, Validation, tune
from regimetune.tuner.rescale import CampaignSpec
from regimetune.tuner.rescale.tuning import (
    CampaignObjective,
    campaign_seeds,
    held_out_gate,
    paired_se,
    params_from_weights,
)

SMALL = dict(n_buckets=128, min_servers=4, max_servers=32, warmup=4, operations=8)
# The paper's Algorithms 1 and 2: their prefix fixing moves much more than the loads drift,
# so on this campaign weights off the presets pay, well outside the held-out campaigns'
# standard error, and the gate has a win to adopt.
VOLATILE = CampaignSpec(p_commission=0.85, volatility=0.3, size_volatility=0.3, heuristic="paper", **SMALL)  # type: ignore[arg-type]


def tune_volatile(budget: int, *, seed: int = 0, n_seeds: int = 3, holdout: float = 0.5, **kw):
    """The weights of the volatile campaign (regime 0): the result and its report."""
    validation = Validation(
        holdout=holdout, min_gain=kw.pop("min_gain", 0.0), current=kw.pop("current", None)
    )
    config = RescaleConfig(budget=budget, seed=seed, n_seeds=n_seeds, **kw)
    res = tune(VOLATILE, "rescale", config=config, validation=validation, workers=0)
    return res, res.detail[0]


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


def test_the_paired_noise_is_the_spread_of_per_campaign_differences() -> None:
    """Common campaigns cancel what they share: a candidate that is 1% better on every
    campaign has no noise, however much the campaigns differ from each other."""
    base = np.array([1.0, 3.0, 2.0, 5.0])
    assert paired_se(base * 0.99, base) == pytest.approx(np.std(base * 0.01, ddof=1) / 2 / base.mean())
    assert paired_se(base - 0.1, base) == pytest.approx(0.0, abs=1e-12)
    assert np.isnan(paired_se(base[:1], base[:1]))


def test_the_gate_states_the_noise_of_its_comparison() -> None:
    res, rep = tune_volatile(4, n_seeds=4)
    assert rep.held_out_se > 0 and "±" in rep.reason
    assert res.report["regimes"][0]["held_out_se"] == pytest.approx(rep.held_out_se)
    # the gain and its noise as measured on the held-out campaigns, paired by seed
    validate = CampaignObjective(VOLATILE, rep.held_out_seeds)
    inc = validate.values(rep.incumbent_weights)
    assert rep.held_out_se == pytest.approx(paired_se(validate.values(rep.candidate), inc))
    assert rep.incumbent_held_out_value == pytest.approx(inc.mean())


def test_weights_that_do_not_win_on_held_out_campaigns_are_kept_back() -> None:
    # a gain of 90% on held-out campaigns is out of reach: the incumbent (best preset) stays
    res, rep = tune_volatile(6, min_gain=0.9)
    assert not rep.adopted and not res.push and not res.verdicts[0].adopted
    assert rep.incumbent == min(rep.preset_values, key=rep.preset_values.__getitem__)
    assert res.policy_file.regimes[0].weights == PRESETS[rep.incumbent] == rep.weights
    assert res.policy_file.regimes[0].source == "default"
    assert res.candidates[0].weights == rep.candidate != rep.weights  # what the tuning found
    assert rep.value == rep.preset_values[rep.incumbent]
    assert rep.held_out_value == rep.held_out_preset_values[rep.incumbent]
    assert rep.reason.startswith(f"kept {rep.incumbent}") and "3 held-out campaigns" in rep.reason
    assert res.verdicts[0].current_held_out == rep.held_out_preset_values[rep.incumbent]
    assert not set(rep.train_seeds) & set(rep.held_out_seeds)


def test_adopted_weights_beat_the_incumbent_on_held_out_campaigns() -> None:
    res, rep = tune_volatile(12, n_seeds=4)
    assert rep.adopted, rep.reason  # the volatile campaign rewards relaxing the balances
    assert (
        res.policy_file.regimes[0].weights == rep.candidate and res.policy_file.regimes[0].source == "tuned"
    )
    assert rep.candidate_held_out_value < rep.held_out_preset_values[rep.incumbent]
    assert rep.held_out_improvement > 0
    assert res.verdicts[0].tuned_held_out == rep.candidate_held_out_value
    # the comparison table: the tuned candidate and every preset, on training and held-out campaigns
    assert set(res.baselines) == {"tuned", *PRESETS}
    assert res.baselines["tuned"]["regime 0 held-out"] < res.baselines[rep.incumbent]["regime 0 held-out"]


def test_the_incumbent_is_the_best_of_the_presets_and_the_current_weights() -> None:
    _, first = tune_volatile(12, n_seeds=4)
    good = Policy(regime_id=0, weights=first.candidate, source="operator")
    # on the same training campaigns, the weights found there beat every preset
    assert first.candidate_value < min(first.preset_values.values())
    res, rep = tune_volatile(4, n_seeds=4, current=PolicyFile(regimes={0: good}), min_gain=0.9)
    assert rep.incumbent == "current" and not rep.adopted
    assert res.policy_file.regimes[0] == good  # kept in force as it was
    bad = Policy(weights=PufferscaleWeights(w_load=1.0, w_data=1e-3, w_time=1e-3))
    _, rep = tune_volatile(4, seed=1, n_seeds=2, current=PolicyFile(regimes={0: bad}), min_gain=0.9)
    assert rep.incumbent in PRESETS  # current weights worse than a preset: the preset is the bar


def test_strong_shrinkage_holds_the_tuning_at_the_best_preset() -> None:
    _, loose = tune_volatile(12, n_seeds=2, holdout=0.0, shrinkage=0.0)
    _, tight = tune_volatile(12, n_seeds=2, holdout=0.0, shrinkage=1e6)
    anchor = params_from_weights(PRESETS[tight.incumbent])
    moved = params_from_weights(tight.candidate)
    assert moved == pytest.approx(anchor, abs=0.02)
    assert params_from_weights(loose.candidate) != pytest.approx(anchor, abs=0.02)
    assert tight.adopted and "without validation" in tight.reason


def test_a_warm_start_begins_at_the_last_tuned_weights_with_fewer_evaluations() -> None:
    """Re-tuning on new campaigns of the same workload starts from the weights found before
    (then the best of the earlier evaluations), with a quarter of the budget; it is never
    worse than the best preset there (the presets are told to the search)."""
    first, rep1 = tune_volatile(12, n_seeds=4, holdout=0.0)
    _, cold = tune_volatile(12, seed=1, n_seeds=4, holdout=0.0)
    config = RescaleConfig(budget=3, seed=1, n_seeds=4)
    warm = tune(
        VOLATILE, "rescale", config=config, validation=Validation(holdout=0.0), warm_start=first, workers=0
    )
    rep = warm.detail[0]
    after_presets = [e.params for e in rep.evaluations][len(PRESETS)]
    assert after_presets == pytest.approx(params_from_weights(rep1.candidate))
    assert warm.report["warm_started"] and rep.n_evaluations < cold.n_evaluations
    assert rep.candidate_value <= min(rep.preset_values.values())


def test_a_cache_result_cannot_warm_start_a_weight_tuning() -> None:
    from regimetune.tuner import CacheConfig, Workload

    run = generate(GeneratorConfig(duration_s=600, seed=1, preset="classic"))
    work = Workload.from_batches(run, detector=OnlineRegimeDetector(min_regime_s=300))
    cache = tune(work, "cache", config=CacheConfig(budget=3, sweep=()), workers=0)
    with pytest.raises(ConfigError, match="cannot warm-start"):
        tune(work, "rescale", warm_start=cache, workers=0)
    with pytest.raises(ConfigError, match="rescale objective only"):
        tune(VOLATILE, "cache")
    with pytest.raises(ConfigError, match="cannot resume"):
        tune(VOLATILE, "rescale", resume=cache.evaluations)
