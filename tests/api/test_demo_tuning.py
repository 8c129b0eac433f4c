"""``regimetune demo`` tunes both halves of each regime's policy: it uploads its recorded run,
which carries a bucket column, as a cache job and a rescale job that both apply."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from regimetune.cli import demo
from regimetune.collectors import GeneratorConfig, read_trace


def test_the_demo_starts_a_cache_and_a_rescale_job_on_a_run_with_buckets(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    calls: list[tuple[str, int, Path]] = []

    def upload(base: str, headers: dict[str, str], trace: Path, objective: str, budget: int) -> str:
        calls.append((objective, budget, trace))
        return f"{objective}-job-id"

    monkeypatch.setattr(demo, "_upload_job", upload)
    cfg = GeneratorConfig(duration_s=600, workers=8, seed=1, preset="classic")
    ids = demo._start_tuning(tmp_path, "http://127.0.0.1:1", {}, cfg)
    assert ids == ["cache-job-id", "rescale-job-id"]
    assert [c[0] for c in calls] == ["cache", "rescale"] and all(c[1] >= 1 for c in calls)
    buckets = {int(b) for batch in read_trace(str(calls[1][2])) for b in batch.bucket.tolist()}
    assert buckets and all(0 <= b < demo.DEMO_BUCKETS for b in buckets) and len(buckets) > 1


def test_the_demo_prints_tuned_weights_of_a_finished_rescale_job(capsys: pytest.CaptureFixture[str]) -> None:
    class Http:
        def get(self, url: str, headers: Any = None) -> Any:
            job = {"id": "r", "objective": "rescale", "status": "succeeded", "error": None,
                   "policies": {"0": {"weights": {"w_load": 1.0, "w_data": 0.25, "w_time": 2.5}}}}  # fmt: skip
            return type("R", (), {"json": lambda self: job})()

    assert demo._job_report(Http(), "http://x", {}, ["r"]) == []
    assert "regime 0: W_L 1.00 W_D 0.25 W_T 2.50" in capsys.readouterr().out.replace("\n", " ")
