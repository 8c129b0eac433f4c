"""Per-regime weight tuning on a trace's windows (``tune --objective rescale``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from regimetune.collectors import GeneratorConfig, generate, window_frame
from regimetune.models import InputError, PolicyFile
from regimetune.tuner.rescale.session import tune_rescale


def test_tune_rescale_on_generated_windows(tmp_path: Path) -> None:
    cfg = GeneratorConfig(duration_s=1800.0, n_buckets=24, seed=1)
    frame = window_frame(generate(cfg), window_s=30.0, n_buckets=24)
    out = tmp_path / "policy.json"
    res = tune_rescale(frame, budget=4, min_servers=2, max_servers=8, warmup=2, operations=6, out=out)
    pf = PolicyFile.model_validate(json.loads(out.read_text()))
    assert pf.regimes and set(pf.regimes) == set(res.reports)
    for r, pol in pf.regimes.items():
        rep = res.reports[r]
        assert pol.source == "tuned" and pol.weights == rep.weights
        assert rep.value <= min(rep.preset_values.values()) + 1e-12  # warm-started with the presets
        assert max(pol.weights.w_load, pol.weights.w_data) == pytest.approx(1.0)
    assert pf.default.regime_id is None


def test_tune_rescale_needs_bucket_statistics() -> None:
    frame = window_frame(generate(GeneratorConfig(duration_s=600.0, seed=1)), window_s=30.0)
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
