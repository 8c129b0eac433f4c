"""The cache cost model, hard memory constraint, key limits, miss-cost sweep, held-apart
validation and warm start of cache tuning (issue 14)."""

from __future__ import annotations

import numpy as np
import pytest

from regimetune.models import CacheMode, CachePolicy, InputError, Policy, PolicyFile
from regimetune.tuner import CacheConfig, Validation, Workload, tune
from regimetune.tuner.cache import CacheTrace, CostModel, simulate
from regimetune.tuner.cache.limits import KeyLimit
from regimetune.tuner.cache.session import holdout_windows, paper_baselines
from regimetune.tuner.objectives import CacheObjective, memory_fraction

RATE = 50


def scan_trace(seed: int = 0, n_scan: int = 200, n_hot: int = 10, span_s: int = 300):
    """Regime 0 scans ``n_scan`` keys (in a shuffled order, per ``seed``); regime 1 cycles
    over ``n_hot`` other keys."""
    rng = np.random.default_rng(seed)
    n = span_s * RATE
    scan = rng.permutation(n_scan)[np.arange(n) % n_scan]
    hot = 1000 + rng.permutation(n_hot)[np.arange(n) % n_hot]
    ts = np.arange(2 * n) / RATE
    trace = CacheTrace.from_arrays(ts=ts, keys=np.concatenate([scan, hot]), window_s=10.0)
    starts = np.arange(0, 2 * span_s, 10.0)
    return trace, starts, (starts >= span_s).astype(np.int64)


def scan_workload(seed: int = 0) -> Workload:
    trace, starts, labels = scan_trace(seed)
    return Workload(labels=labels, window_starts_s=starts, trace=trace)


def tune_cache(work: Workload, validation: Validation | None = None, **config) -> object:
    return tune(work, "cache", config=CacheConfig(**config), validation=validation, workers=0)


# --- the cost model -------------------------------------------------------------------------


def test_miss_latency_is_relative_to_compute_per_request():
    trace, _, _ = scan_trace()
    cost = CostModel(miss_cost=1.0, store_ops_s=1e9)
    never = simulate(trace, CachePolicy(mode="lru", limit_keys=1), cost=cost)
    # one key cannot hold a 200-key scan nor a 10-key cycle: every request misses and takes
    # twice its compute time
    assert never.hit_ratio == 0.0
    assert never.efficiency == pytest.approx(0.5)
    unl = simulate(trace, CachePolicy(), cost=cost)
    assert unl.efficiency == pytest.approx(1.0 / (1.0 + 210 / trace.n_requests), rel=1e-3)
    free = simulate(
        trace, CachePolicy(mode="lru", limit_keys=1), cost=CostModel(miss_cost=0.0, store_ops_s=1e9)
    )
    assert free.efficiency == 1.0


def test_default_store_keeps_up_with_the_unlimited_cache_only():
    trace, _, _ = scan_trace()
    unl = simulate(trace, CachePolicy())
    assert not np.any(unl.window_stall_s)
    tiny = simulate(trace, CachePolicy(mode="lru", limit_keys=1), cost=CostModel(miss_cost=0.0))
    assert tiny.window_stall_s.sum() > 0 and tiny.efficiency < 1.0


@pytest.mark.parametrize(
    "kwargs",
    [
        {"miss_cost": -0.1},
        {"store_headroom": 0.5},
        {"store_ops_s": 0.0},
        {"buffer_s": float("nan")},
        {"miss_cost": True},
    ],
)
def test_bad_cost_model_is_refused_with_a_reason(kwargs):
    with pytest.raises(InputError, match="cost model"):
        CostModel(**kwargs)


def test_key_limits_as_keys_or_keyspace_fraction():
    assert KeyLimit.parse("10000").resolve(50_000) == 10_000
    assert KeyLimit.parse("5%").resolve(50_000) == 2_500
    assert KeyLimit.of(0.01).resolve(10) == 1
    for bad in ("lots", "0%", "150%", "-3"):
        with pytest.raises(InputError):
            KeyLimit.parse(bad)


def test_paper_policy_scaled_to_the_keyspace():
    base = paper_baselines(n_keys=15_000)
    assert base["two_phase_100k_10k"].high_watermark_keys == 100_000
    assert base["two_phase_scaled"].high_watermark_keys == 10_000
    assert base["two_phase_scaled"].limit_keys == 1_000
    assert "two_phase_scaled" not in paper_baselines()


# --- tuning ------------------------------------------------------------------------------------


@pytest.mark.parametrize("budget_frac", [0.02, 0.1, 0.5])
@pytest.mark.parametrize("optimizer", ["Pounders", "OnePlusOne"])
def test_returned_policy_never_exceeds_the_memory_budget(budget_frac, optimizer):
    obj = CacheObjective(efficiency_target=0.99, memory_budget=budget_frac)
    res = tune_cache(
        scan_workload(),
        objective=obj,
        budget=12,
        optimizer=optimizer,
        cost=CostModel(miss_cost=1.0),
        sweep=(),
    )
    assert memory_fraction(res.detail.best, res.detail.unlimited) <= budget_frac
    assert res.report["best"]["fits_memory"] == 1.0


def test_limits_stay_within_max_limit():
    work = scan_workload()
    res = tune_cache(work, budget=15, max_limit="2%", sweep=(), objective=CacheObjective(memory_budget=1.0))
    cap = KeyLimit.parse("2%").resolve(work.cache_trace.n_keys)
    assert all(p.cache.limit_keys <= cap for p in res.policy_file.regimes.values())
    assert res.report["max_limit_keys"] == cap


def test_sweep_and_binding_report():
    res = tune_cache(
        scan_workload(), budget=15, objective=CacheObjective(efficiency_target=0.95, memory_budget=0.6),
        cost=CostModel(miss_cost=0.5), sweep=(0.0, 0.5, 2.0),
    )  # fmt: skip
    sw = res.report["sweep"]
    assert list(sw) == ["0", "0.5", "2"]
    assert sw["0.5"]["tuned"] == pytest.approx(res.detail.best.efficiency)
    effs = [sw[m]["tuned"] for m in sw]
    assert effs == sorted(effs, reverse=True) and effs[-1] < effs[0]
    for m in sw:  # the tuned policy is no better than the unlimited cache at any miss cost
        assert sw[m]["tuned"] <= sw[m]["unlimited"] + 1e-12
    assert res.report["binds"]["efficiency"] is True and res.binds["efficiency"] is True
    row = res.report["baselines"]["unlimited"]
    assert row["hit_ratio_vs_unlimited"] == 1.0 and row["memory_fraction"] == 1.0
    assert set(res.baselines) == {"tuned", *res.report["baselines"]}
    assert res.baselines["tuned"]["efficiency"] == res.report["best"]["efficiency"]
    # the static LRU sized to the memory budget is a baseline, and fits it
    assert res.report["baselines"]["lru_budget"]["fits_memory"] == 1.0


def test_report_says_when_the_efficiency_target_never_binds():
    res = tune_cache(scan_workload(), budget=10, sweep=(), cost=CostModel(miss_cost=0.0, store_ops_s=1e9))
    assert res.detail.best.efficiency == 1.0
    assert res.report["binds"]["efficiency"] is False
    assert any("never binds" in n for n in res.report["binds"]["notes"])


def test_holdout_windows_are_blocks_apart_from_tuning():
    held = holdout_windows(600, 0.25)
    assert 0.2 <= held.mean() <= 0.3 and not held[:30].any()
    assert not holdout_windows(100, 0.0).any()


def _lru(n: int) -> PolicyFile:
    """A current policy file: an ``n``-key LRU for regime 0 and by default."""
    pol = Policy(cache=CachePolicy(mode=CacheMode.LRU, limit_keys=n), source="operator")
    return PolicyFile(default=pol, regimes={0: pol.model_copy(update={"regime_id": 0})})


def test_policy_that_loses_on_held_apart_windows_is_kept_back():
    """Tuning windows cycle 10 keys; held-apart windows scan 200: the small limit (at most 50
    keys) the tuning windows call for loses there to a current 200-key LRU, so it is not
    adopted and the current policy stays in the policy file."""
    n_win = 240
    held = holdout_windows(n_win, 0.25)
    keys = []
    for w in range(n_win):
        keys.append(np.arange(w * 500, (w + 1) * 500) % 200 if held[w] else 1000 + np.arange(500) % 10)
    ts = np.arange(n_win * 500) / RATE
    trace = CacheTrace.from_arrays(ts=ts, keys=np.concatenate(keys), window_s=10.0)
    work = Workload(
        labels=np.zeros(n_win, dtype=np.int64), window_starts_s=np.arange(n_win) * 10.0, trace=trace
    )
    kw = dict(
        budget=12, sweep=(), max_limit=50, objective=CacheObjective(efficiency_target=0.9, memory_budget=1.0),
        cost=CostModel(miss_cost=1.0),
    )  # fmt: skip
    res = tune_cache(work, Validation(current=_lru(200)), **kw)
    assert res.candidates[0].cache.limit_keys < 200
    assert res.push is False and "kept back" in res.report["decision"]["reason"]
    assert not res.verdicts[0].adopted and res.verdicts[0].tuned_held_out > res.verdicts[0].current_held_out
    assert (
        res.policy_file.regimes[0].cache.limit_keys == 200 and res.policy_file.regimes[0].source == "operator"
    )
    # against a current policy that is worse everywhere, the tuned one is adopted
    res2 = tune_cache(work, Validation(current=_lru(1)), **kw)
    assert res2.push is True and res2.policy_file.regimes[0] == res2.candidates[0]
    # a gain asked for beyond reach keeps the current policy
    res3 = tune_cache(work, Validation(current=_lru(1), min_gain=0.999), **kw)
    assert res3.push is False and res3.policy_file.regimes[0].cache.limit_keys == 1


def test_warm_start_needs_fewer_evaluations_on_a_second_trace():
    kw = dict(
        objective=CacheObjective(efficiency_target=0.95, memory_budget=0.6), cost=CostModel(miss_cost=0.5)
    )
    first = tune_cache(scan_workload(seed=1), budget=30, sweep=(), **kw)
    second = scan_workload(seed=2)
    cold = tune_cache(second, budget=30, sweep=(), **kw)
    warm = tune(second, "cache", config=CacheConfig(budget=8, sweep=(), **kw), warm_start=first, workers=0)
    assert warm.report["warm_started"] and len(warm.evaluations) < len(cold.evaluations)
    assert warm.report["best_value"] <= cold.report["best_value"] * 1.01
    # the warm start began where the first tuning ended
    for r in (0, 1):
        assert warm.evaluations[0].params[f"limit_{r}"] == first.candidates[r].cache.limit_keys


def test_byte_hit_ratio_weighs_requests_by_size():
    from regimetune.tuner.cache.sim import byte_hit_ratio

    # keys 1 (small) and 2 (large) alternate, then key 1 repeats: a 1-key LRU hits only the
    # repeats of the small key
    keys = [1, 2, 1, 2, 1, 1, 1]
    sizes = [10, 1000, 10, 1000, 10, 10, 10]
    t = CacheTrace.from_arrays(ts=np.arange(7) / 10, keys=keys, sizes=sizes)
    one = CachePolicy(mode="lru", limit_keys=1)
    assert byte_hit_ratio(t, one) == pytest.approx(20 / 2050)
    assert byte_hit_ratio(t, CachePolicy()) == pytest.approx(1040 / 2050)
    assert simulate(t, one).hit_ratio == pytest.approx(2 / 7)
    assert byte_hit_ratio(CacheTrace.from_arrays(ts=[0.0], keys=[1]), one) is None
    with pytest.raises(InputError, match="sizes"):
        CacheTrace.from_arrays(ts=[0.0, 1.0], keys=[1, 2], sizes=[1])
