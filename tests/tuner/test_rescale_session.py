"""Per-regime weight tuning on a trace's windows (``tune --objective rescale``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from regimetune.collectors import GeneratorConfig, generate, window_frame
from regimetune.models import InputError, PolicyFile
from regimetune.models.regimes import RegimeHistory
from regimetune.models.windows import WindowFrame
from regimetune.tuner.rescale.session import _labels, tune_rescale


def test_tune_rescale_on_generated_windows(tmp_path: Path) -> None:
    cfg = GeneratorConfig(duration_s=1800.0, n_buckets=24, seed=1, preset="classic")
    frame = window_frame(generate(cfg), window_s=30.0, n_buckets=24)
    out = tmp_path / "policy.json"
    res = tune_rescale(frame, budget=4, min_servers=2, max_servers=8, warmup=2, operations=6, out=out)
    pf = PolicyFile.model_validate(json.loads(out.read_text()))
    assert pf.regimes and set(pf.regimes) == set(res.reports)
    for r, pol in pf.regimes.items():
        rep = res.reports[r]
        assert pol.weights == rep.weights
        assert pol.source == ("tuned" if rep.adopted else "default")
        assert rep.value <= min(rep.preset_values.values()) + 1e-12  # warm-started with the presets
        assert rep.reason and res.report_json()[str(r)]["reason"] == rep.reason
        assert max(pol.weights.w_load, pol.weights.w_data) == pytest.approx(1.0)
    assert pf.default.regime_id is None


def test_tune_rescale_needs_bucket_statistics() -> None:
    frame = window_frame(generate(GeneratorConfig(duration_s=600.0, seed=1, preset="classic")), window_s=30.0)
    with pytest.raises(InputError, match="per-bucket"):
        tune_rescale(frame, budget=2)


@pytest.mark.slow
@pytest.mark.shared_data
def test_tune_rescale_on_the_cloudphysics_trace(shared_data: Path, tmp_path: Path) -> None:
    trace = shared_data / "cloudphysics" / "cloudPhysicsIO.oracleGeneral.bin"
    res = tune_rescale(trace, budget=3, warmup=2, operations=6, out=tmp_path / "p.json")
    assert res.policy_file.trace == str(trace)
    assert res.reports
    for rep in res.reports.values():
        assert rep.value <= min(rep.preset_values.values()) + 1e-12


class _FakeDetector:
    """A detector whose back-dated labels and online labels disagree, as after a change
    confirmed two windows after its start."""

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


def test_windows_are_labelled_when_the_change_is_confirmed() -> None:
    frame = _frame(12)
    n = len(frame)
    back = [0] * 4 + [1] * (n - 4)
    online = [-1] + [0] * 5 + [1] * (n - 6)  # the change to 1 confirmed two windows late
    got = _labels(frame, _FakeDetector(back, online))  # type: ignore[arg-type]
    assert got.tolist() == [0] * 6 + [1] * (n - 6)


def test_a_regime_confirmed_only_in_hindsight_gets_no_policy() -> None:
    frame = _frame(20)
    n = len(frame)
    back = [0] * (n // 2) + [1] * (n - n // 2)
    det = _FakeDetector(back, [0] * n)  # online, the service never switched to regime 1
    res = tune_rescale(
        frame,
        budget=2,
        min_servers=2,
        max_servers=6,
        warmup=1,
        operations=3,
        detector=det,
        n_seeds=1,
        n_held_out=1,
    )  # type: ignore[arg-type]
    assert set(res.reports) == {0}


def test_report_is_strict_json_without_held_out_campaigns() -> None:
    frame = _frame(12)
    res = tune_rescale(
        frame, budget=2, min_servers=2, max_servers=6, warmup=1, operations=3, n_seeds=1, n_held_out=0
    )
    text = json.dumps(res.report_json(), allow_nan=False)
    assert all(rep["held_out_value"] is None for rep in json.loads(text).values())
