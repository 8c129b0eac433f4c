"""Per-regime cache tuning on a trace whose regimes need different cache sizes."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from regimetune.models import CacheMode, ConfigError, InputError, PolicyFile
from regimetune.tuner.cache import CacheTrace, RegimePolicy, StoreModel, simulate
from regimetune.tuner.objectives import CacheObjective, memory_fraction
from regimetune.tuner.sessions import cache_space, paper_baselines, tune_cache

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


def check_tuning(res, trace, starts, labels):
    limits = {r: p.cache.limit_keys for r, p in res.policy_file.regimes.items()}
    assert set(limits) == {0, 1}
    assert limits[0] >= 200 > limits[1]
    assert res.best.efficiency >= 0.95
    assert memory_fraction(res.best, res.unlimited) <= 0.6
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
    assert again.efficiency == pytest.approx(res.best.efficiency)
    assert again.mean_keys == pytest.approx(res.best.mean_keys)
    # every static LRU is worse on the objective than the tuned regime policy
    for n in (10, 200, 210):
        from regimetune.models import CachePolicy

        static = simulate(trace, CachePolicy(mode="lru", limit_keys=n), store=STORE)
        assert OBJ.value(OBJ.of(static, res.unlimited)) > OBJ.value(OBJ.of(res.best, res.unlimited))


@pytest.mark.parametrize("optimizer", ["Pounders", "TwoPointsDE"])
def test_tuning_finds_a_limit_per_regime(optimizer):
    trace, starts, labels = two_regime_trace()
    res = tune_cache(
        trace,
        labels=labels,
        window_starts_s=starts,
        objective=OBJ,
        optimizer=optimizer,
        budget=40 if optimizer == "Pounders" else 150,
        workers=0,
        store=STORE,
        baselines=paper_baselines(),
    )
    check_tuning(res, trace, starts, labels)
    assert len(res.evaluations) <= (40 if optimizer == "Pounders" else 150)
    assert all(v == int(v) and v >= 1 for e in res.evaluations for v in e.params.values())
    assert set(res.report["baselines"]) == {"unlimited", "lru_100k", "two_phase_100k_10k"}


def test_tuning_runs_in_a_process_pool_and_in_any_executor():
    trace, starts, labels = two_regime_trace()
    kw = {"labels": labels, "window_starts_s": starts, "objective": OBJ, "store": STORE, "budget": 40}
    pooled = tune_cache(trace, workers=2, **kw)  # the default: a local process pool
    with ThreadPoolExecutor(2) as ex:
        threaded = tune_cache(trace, executor=ex, workers=2, **kw)
    for res in (pooled, threaded):
        assert len(res.evaluations) == 40 and not any(e.failed for e in res.evaluations)
        limits = {r: p.cache.limit_keys for r, p in res.policy_file.regimes.items()}
        assert limits[0] >= 200 > limits[1] and res.best.efficiency >= 0.95
        # better than any warm start (uniform limits, the paper's policy)
        assert res.report["best"]["objective"] < min(e.value for e in res.evaluations[:4])


def test_switch_at_a_time_is_tried():
    trace, starts, labels = two_regime_trace()
    res = tune_cache(
        trace, labels=labels, window_starts_s=starts, objective=OBJ, store=STORE, budget=20, workers=0,
        optimizer="OnePlusOne",
        switch_time_s=0.0,
    )  # fmt: skip
    modes = {p.cache.mode for p in res.policy_file.regimes.values()}
    assert modes <= {CacheMode.LRU, CacheMode.TWO_PHASE}
    assert res.best_params["switch"] in {"time", "high_watermark_keys"}


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
    kw = {"window_starts_s": starts, "store": STORE, "workers": 0}
    with pytest.raises(ConfigError, match="budget"):
        tune_cache(trace, labels=labels, budget=0, **kw)
    with pytest.raises(ConfigError, match="unknown optimizer"):
        tune_cache(trace, labels=labels, optimizer="NoSuchThing", budget=2, **kw)
    with pytest.raises(InputError, match="no regime"):
        tune_cache(trace, labels=np.full(len(starts), -1), budget=2, **kw)
    with pytest.raises(InputError, match="equally long"):
        tune_cache(trace, labels=labels[:3], budget=2, **kw)
