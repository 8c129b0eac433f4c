"""Per-regime cache tuning on a trace whose regimes need different cache sizes."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from regimetune.models import CacheMode, ConfigError, InputError, PolicyFile
from regimetune.tuner import CacheConfig, CostModel, Workload, tune
from regimetune.tuner.cache import CacheTrace, RegimePolicy, StoreModel, simulate
from regimetune.tuner.cache.session import cache_space
from regimetune.tuner.objectives import CacheObjective, memory_fraction

RATE = 50  # requests per second


def two_regime_trace():
    """Regime 0 (first 300 s) scans 200 keys cyclically: an LRU below 200 keys misses every
    request. Regime 1 (next 300 s) cycles over 10 other keys."""
    n = 300 * RATE
    keys = np.concatenate([np.arange(n) % 200, 1000 + np.arange(n) % 10])
    ts = np.arange(2 * n) / RATE
    trace = CacheTrace.from_arrays(ts=ts, keys=keys, window_s=10.0)
    starts = np.arange(0, 600, 10.0)
    labels = (starts >= 300).astype(np.int64)
    return trace, starts, labels


STORE = StoreModel(capacity_ops_s=10.0, buffer_s=0.0)
OBJ = CacheObjective(efficiency_target=0.95, memory_budget=0.6)


def config(**kw) -> CacheConfig:
    return CacheConfig(objective=OBJ, cost=CostModel.from_store(STORE), **kw)


def workload(switch_time_s: float | None = None) -> Workload:
    trace, starts, labels = two_regime_trace()
    return Workload(labels=labels, window_starts_s=starts, trace=trace, switch_time_s=switch_time_s)


def check_tuning(res, trace, starts, labels):
    limits = {r: p.cache.limit_keys for r, p in res.policy_file.regimes.items()}
    assert set(limits) == {0, 1}
    assert limits[0] >= 200 > limits[1]
    best, unlimited = res.detail.best, res.detail.unlimited
    assert best.efficiency >= 0.95
    assert memory_fraction(best, unlimited) <= 0.6
    assert res.report["best"]["feasible"] == 1.0
    # the policy file, loaded back, reproduces the reported simulation
    pf = PolicyFile.model_validate_json(res.policy_file.model_dump_json())
    again = simulate(
        trace,
        RegimePolicy(
            policies={r: p.cache for r, p in pf.regimes.items()},
            window_starts_s=starts,
            labels=labels,
            default=pf.default.cache,
        ),
        store=STORE,
    )
    assert again.efficiency == pytest.approx(best.efficiency)
    assert again.mean_keys == pytest.approx(best.mean_keys)
    # every static LRU is worse on the objective than the tuned regime policy
    for n in (10, 200, 210):
        from regimetune.models import CachePolicy

        static = simulate(trace, CachePolicy(mode="lru", limit_keys=n), store=STORE)
        assert OBJ.value(OBJ.of(static, unlimited)) > OBJ.value(OBJ.of(best, unlimited))


@pytest.mark.parametrize("optimizer", ["Pounders", "TwoPointsDE"])
def test_tuning_finds_a_limit_per_regime(optimizer):
    budget = 40 if optimizer == "Pounders" else 150
    res = tune(workload(), "cache", config=config(optimizer=optimizer, budget=budget), workers=0)
    check_tuning(res, *two_regime_trace())
    assert len(res.evaluations) <= budget and res.searches[0].regimes == (0, 1)
    assert all(v == int(v) and v >= 1 for e in res.evaluations for v in e.params.values())
    assert set(res.report["baselines"]) == {
        "unlimited", "lru_100k", "two_phase_100k_10k", "lru_scaled", "two_phase_scaled", "lru_budget"
    }  # fmt: skip
    history = res.searches[0].best_so_far()  # the convergence history
    assert len(history) == len(res.evaluations) and history == sorted(history, reverse=True)


def test_tuning_runs_in_a_process_pool_and_in_any_executor():
    cfg = config(budget=40)
    pooled = tune(workload(), "cache", config=cfg, workers=2)  # the default: a local process pool
    with ThreadPoolExecutor(2) as ex:
        threaded = tune(workload(), "cache", config=cfg, executor=ex, workers=2)
    for res in (pooled, threaded):
        assert len(res.evaluations) == 40 and not any(e.failed for e in res.evaluations)
        limits = {r: p.cache.limit_keys for r, p in res.policy_file.regimes.items()}
        assert limits[0] >= 200 > limits[1] and res.detail.best.efficiency >= 0.95
        # better than any warm start (uniform limits, the paper's policy)
        assert res.report["best"]["objective"] < min(e.value for e in res.evaluations[:4])


def test_switch_at_a_time_is_tried():
    res = tune(
        workload(switch_time_s=0.0), "cache", config=config(budget=20, optimizer="OnePlusOne"), workers=0
    )
    modes = {p.cache.mode for p in res.policy_file.regimes.values()}
    assert modes <= {CacheMode.LRU, CacheMode.TWO_PHASE}
    assert res.detail.best_params["switch"] in {"time", "high_watermark_keys"}


def test_space_is_integer_key_counts_on_a_log_scale():
    space = cache_space([0, 3], 150_000, init={"limit_3": 55_000})
    assert space.names == ("high_watermark_keys", "limit_0", "limit_3")
    assert all(p.integer and p.log and p.low == 1 and p.high == 150_000 for p in space.params)
    assert space.params[2].init == 55_000
    assert space.cast({"high_watermark_keys": 99.6, "limit_0": 1.2, "limit_3": 2e5}) == {
        "high_watermark_keys": 100,
        "limit_0": 1,
        "limit_3": 150_000,
    }


def test_bad_session_inputs():
    trace, starts, labels = two_regime_trace()
    with pytest.raises(ConfigError, match="budget"):
        config(budget=0)
    with pytest.raises(ConfigError, match="unknown optimizer"):
        config(optimizer="NoSuchThing")
    with pytest.raises(ConfigError, match="takes a CacheConfig"):
        tune(workload(), "cache", config=object())  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="objective is 'cache' or 'rescale'"):
        tune(workload(), "latency")
    with pytest.raises(InputError, match="no regime"):
        tune(
            Workload(labels=np.full(len(starts), -1), window_starts_s=starts, trace=trace),
            config=config(budget=2),
        )
    with pytest.raises(InputError, match="equally long"):
        Workload(labels=labels[:3], window_starts_s=starts, trace=trace)
    with pytest.raises(InputError, match="not only its windows"):
        tune(Workload(labels=labels, window_starts_s=starts), config=config(budget=2), workers=0)
