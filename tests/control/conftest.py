"""What the engine's tests replay."""

from __future__ import annotations

import pytest

from regimetune.client.ingest import WindowCounts, count_windows
from regimetune.collectors import GeneratorConfig, generate


@pytest.fixture(scope="module")
def workload() -> list[WindowCounts]:
    """100 minutes of the classic workload in 60 s windows."""
    return list(
        count_windows(generate(GeneratorConfig(duration_s=6000, workers=64, seed=1, preset="classic")), 60.0)
    )
