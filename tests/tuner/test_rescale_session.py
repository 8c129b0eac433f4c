"""Per-regime weight tuning on a trace's windows (``tune(..., "rescale")``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from regimetune.collectors import GeneratorConfig, generate, window_frame
from regimetune.models import InputError, PolicyFile
from regimetune.models.regimes import RegimeHistory
from regimetune.models.windows import WindowFrame
from regimetune.tuner import RescaleConfig, Validation, Workload, tune

SMALL = dict(min_servers=2, max_servers=8, warmup=2, operations=6)


def test_tune_rescale_on_generated_windows() -> None:
    cfg = GeneratorConfig(duration_s=1800.0, n_buckets=24, seed=1, preset="classic")
    frame = window_frame(generate(cfg), window_s=30.0, n_buckets=24)
    res = tune(frame, "rescale", config=RescaleConfig(budget=4, **SMALL), workers=0)
    pf = PolicyFile.model_validate_json(res.policy_file.model_dump_json())
    reps = res.detail
    assert pf.regimes and set(pf.regimes) | {-1} >= set(reps) >= set(pf.regimes)
    for r, pol in pf.regimes.items():
        rep = reps[r]
        assert pol.weights == rep.weights
        assert pol.source == ("tuned" if rep.adopted else "default")
        assert rep.value <= min(rep.preset_values.values()) + 1e-12  # warm-started with the presets
        assert rep.reason and res.report["regimes"][r]["reason"] == rep.reason
        assert max(pol.weights.w_load, pol.weights.w_data) == pytest.approx(1.0)
        assert res.verdicts[r].adopted is rep.adopted
    assert pf.default.regime_id is None
    # the convergence history of each regime's search, and every evaluation counted
    assert {s.regimes for s in res.searches} == {(r,) for r in reps}
    assert res.report["n_evaluations"] == sum(len(s.evaluations) for s in res.searches)
    json.dumps(res.report, allow_nan=False)


def test_tune_rescale_needs_bucket_statistics() -> None:
    frame = window_frame(generate(GeneratorConfig(duration_s=600.0, seed=1, preset="classic")), window_s=30.0)
    with pytest.raises(InputError, match="per-bucket"):
        tune(frame, "rescale", config=RescaleConfig(budget=2))


@pytest.mark.slow
@pytest.mark.shared_data
def test_tune_rescale_on_the_cloudphysics_trace(shared_data: Path) -> None:
    trace = shared_data / "cloudphysics" / "cloudPhysicsIO.oracleGeneral.bin"
    res = tune(trace, "rescale", config=RescaleConfig(budget=3, warmup=2, operations=6), workers=0)
    assert res.policy_file.trace == str(trace)
    assert res.detail
    for rep in res.detail.values():
        assert rep.value <= min(rep.preset_values.values()) + 1e-12


class _FakeDetector:
    """A detector whose back-dated labels and online labels disagree."""

    def __init__(self, labels: list[int], online: list[int]) -> None:
        self.labels, self.online = labels, online

    def detect(self, frame: object) -> RegimeHistory:
        return RegimeHistory(
            labels=np.asarray(self.labels, np.int64),
            segments=[],
            changes=[],
            online_labels=np.asarray(self.online, np.int64),
        )


def _frame(n_windows: int) -> WindowFrame:
    cfg = GeneratorConfig(duration_s=30.0 * n_windows, n_buckets=16, seed=2, preset="classic")
    return window_frame(generate(cfg), window_s=30.0, n_buckets=16)


def test_a_regime_confirmed_only_in_hindsight_gets_no_policy() -> None:
    frame = _frame(20)
    n = len(frame)
    back = [0] * (n // 2) + [1] * (n - n // 2)
    det = _FakeDetector(back, [0] * n)  # online, the service never switched to regime 1
    work = Workload.from_frame(frame, detector=det)
    res = tune(
        work,
        "rescale",
        config=RescaleConfig(budget=2, n_seeds=1, min_servers=2, max_servers=6, warmup=1, operations=3),
        workers=0,
    )
    assert set(res.detail) == {0} and set(res.policy_file.regimes) == {0}


def test_the_default_is_tuned_on_the_windows_before_the_first_regime() -> None:
    frame = _frame(16)
    n = len(frame)
    online = [-1] * 6 + [0] * (n - 6)  # the first regime confirmed at window 6
    work = Workload.from_frame(frame, detector=_FakeDetector([0] * n, online))
    res = tune(work, "rescale", config=RescaleConfig(budget=2, n_seeds=1, **SMALL), workers=0)
    assert set(res.detail) == {-1, 0} and res.report["regimes"][-1]["windows"] == 6
    assert res.policy_file.default.weights == res.detail[-1].weights
    assert res.policy_file.default.regime_id is None and set(res.policy_file.regimes) == {0}


def test_report_is_strict_json_without_held_out_campaigns() -> None:
    res = tune(
        _frame(12),
        "rescale",
        config=RescaleConfig(budget=2, n_seeds=1, min_servers=2, max_servers=6, warmup=1, operations=3),
        validation=Validation(holdout=0.0),
        workers=0,
    )
    text = json.dumps(res.report, allow_nan=False)
    assert all(rep["held_out_value"] is None for rep in json.loads(text)["regimes"].values())
