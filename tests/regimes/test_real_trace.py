"""The detector on the real CloudPhysics block trace (no labels): steady writes, two bursts
of reads of 3-4 minutes. A person sees no regime flapping there."""

from __future__ import annotations

from pathlib import Path

import pytest

from regimetune.collectors import TraceSpec, read_trace, window_frame
from regimetune.regimes import OnlineRegimeDetector

pytestmark = pytest.mark.shared_data

SPEC = TraceSpec(
    columns="ts=time,op=op,size=size,key=lbn", read_ops=frozenset({"28"}), write_ops=frozenset({"2a"})
)


def _changes(shared_data: Path, window_s: float) -> list[int]:
    frame = window_frame(
        read_trace(shared_data / "cloudphysics" / "cloudPhysicsIO.csv", spec=SPEC), window_s=window_s
    )
    return [c.to_id for c in OnlineRegimeDetector().detect(frame).changes]


def test_no_change_at_10_second_windows(shared_data: Path) -> None:
    assert _changes(shared_data, 10.0) == [0]


def test_no_flapping_at_minute_windows(shared_data: Path) -> None:
    ids = _changes(shared_data, 60.0)
    # at most the first burst, seen as a regime and left once: never A -> B -> A -> B
    assert len(ids) <= 3
    assert not any(ids[i] == ids[i - 2] and ids[i + 1] == ids[i - 1] for i in range(2, len(ids) - 1))
