"""The one tuning API (issue 14, item 6): one entry point and one result type for both
objectives, one labelling rule, usable from a notebook without the command line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from regimetune.collectors import GeneratorConfig, generate, write_events
from regimetune.models import EventBatch
from regimetune.models.regimes import RegimeHistory
from regimetune.regimes import OnlineRegimeDetector
from regimetune.tuner import (
    CacheConfig,
    CacheObjective,
    CostModel,
    RescaleConfig,
    StoreModel,
    TuningResult,
    Validation,
    Workload,
    tune,
)

RATE = 50  # requests per second
WINDOW_S = 10.0


def test_a_notebook_tunes_both_objectives_without_the_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """What a notebook does: read a trace, tune both halves of the policy, look at the
    results, re-tune a second trace of the same workload from the first; nothing is printed
    and no file is written."""
    for seed in (1, 2):
        write_events(
            generate(GeneratorConfig(duration_s=1500, workers=16, seed=seed)), tmp_path / f"run{seed}.csv"
        )
    monkeypatch.chdir(tmp_path)
    capfd.readouterr()

    # 25-minute runs: regimes of 5 minutes (the default 15 would leave one or none)
    work = Workload.read(tmp_path / "run1.csv", detector=OnlineRegimeDetector(min_regime_s=300))
    cache = tune(work, "cache", config=CacheConfig(budget=8), workers=0)
    weights = tune(work, "rescale", config=RescaleConfig(budget=3, n_seeds=2), workers=0)
    for res, part in ((cache, "cache"), (weights, "weights")):
        assert isinstance(res, TuningResult) and res.objective.value == res.report["objective"]
        assert set(res.policy_file.regimes) == set(work.regime_ids) <= set(res.verdicts)
        assert all(v.reason for v in res.verdicts.values())
        assert res.report["n_evaluations"] == len(res.evaluations) > 0
        assert all(len(s.best_so_far()) == len(s.evaluations) for s in res.searches)
        assert "tuned" in res.baselines and len(res.baselines) > 1
        assert "notes" in res.binds
        json.dumps(res.report, default=float)
        # each objective tunes its half of the policy
        tuned = {getattr(p, part) for p in res.candidates.values()}
        assert tuned != {type(next(iter(res.candidates.values()))).model_fields[part].default}
    again = tune(
        Workload.read(tmp_path / "run2.csv", detector=OnlineRegimeDetector(min_regime_s=300)),
        "cache",
        config=CacheConfig(budget=4),
        warm_start=cache,
        validation=Validation(current=cache.policy_file),
        workers=0,
    )
    assert again.report["warm_started"] and "current_held_out" in again.report["decision"]
    out, err = capfd.readouterr()
    assert out == "" and err == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run1.csv", "run2.csv"]


# --- one labelling rule -----------------------------------------------------------------------

CHANGE, LATE, N_WINDOWS = 30, 5, 60


class _LateDetector:
    """Sees the change from regime 0 to 1 at window ``CHANGE`` (its back-dated start) but
    confirms it ``LATE`` windows later: the service switches policy at the confirmation."""

    def detect(self, frame: object) -> RegimeHistory:
        n = len(frame)  # type: ignore[arg-type]
        w = np.arange(n)
        return RegimeHistory(
            labels=(w >= CHANGE).astype(np.int64),
            segments=[],
            changes=[],
            online_labels=(w >= CHANGE + LATE).astype(np.int64),
        )


def _two_regime_events() -> EventBatch:
    """Regime 0 scans 200 keys cyclically (an LRU below 200 keys misses every request);
    regime 1 cycles over 10 other keys. Keys fall in 16 buckets."""
    n = CHANGE * int(WINDOW_S) * RATE
    m = (N_WINDOWS - CHANGE) * int(WINDOW_S) * RATE
    keys = np.concatenate([np.arange(n) % 200, 1000 + np.arange(m) % 10])
    return EventBatch.from_columns(ts=np.arange(n + m) / RATE, key=keys, bucket=keys % 16)


def test_a_change_confirmed_late_keeps_the_old_regimes_policy_until_then_in_both_objectives() -> None:
    work = Workload.from_batches(
        [_two_regime_events()], window_s=WINDOW_S, n_buckets=16, detector=_LateDetector()
    )
    assert work.labels.tolist() == [0] * (CHANGE + LATE) + [1] * (N_WINDOWS - CHANGE - LATE)

    cache = tune(
        work,
        "cache",
        config=CacheConfig(
            objective=CacheObjective(efficiency_target=0.95, memory_budget=0.8),
            cost=CostModel.from_store(StoreModel(capacity_ops_s=10.0, buffer_s=0.0)),
            budget=40,
            sweep=(),
        ),
        workers=0,
    )
    weights = tune(work, "rescale", config=RescaleConfig(budget=2, n_seeds=1), workers=0)
    for res in (cache, weights):
        assert res.report["trace"]["regime_windows"] == {0: CHANGE + LATE, 1: N_WINDOWS - CHANGE - LATE}
        assert res.report["regimes"][0]["windows"] == CHANGE + LATE
    # the cache: regime 0's limit holds the scan (>= 200 keys), regime 1's only the hot keys;
    # during the late windows the cache still holds the scan's keys under regime 0's limit,
    # and drops to regime 1's limit once the change is confirmed
    limit = {r: p.cache.limit_keys for r, p in cache.policy_file.regimes.items()}
    assert limit[0] >= 200 > limit[1]
    held = cache.detail.best.window_keys  # type: ignore[union-attr]
    assert np.all(held[CHANGE : CHANGE + LATE] > limit[1])
    assert np.all(held[CHANGE + LATE + 1 :] <= limit[1])
