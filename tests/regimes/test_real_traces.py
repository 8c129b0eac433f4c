"""Real ParSplice runs against a person's reading (``../shared/data/parsplice/labels.json``):
every change a person sees found, none where a person sees none, plateaus called levels, and
the same answer at 10-, 30- and 60-s windows. Skipped where ``../shared`` is absent."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

from regimetune.collectors import window_frame
from regimetune.collectors.readers import read_trace
from regimetune.collectors.spec import TraceSpec
from regimetune.models import RegimeChange
from regimetune.regimes import OnlineRegimeDetector, regimes_entered, reversals
from regimetune.regimes.metrics import PersonReading, agreement_f1, check_reading

pytestmark = pytest.mark.shared_data
SPEC = TraceSpec(
    columns="ts,op,-,key", read_ops=frozenset({"DBMemoryGet"}), write_ops=frozenset({"DBMemoryPut"})
)
RUNS = ("scale-workers-1M-1-71684.kv.csv.gz", "scale-workers-4-71689.kv.csv.gz")


@functools.cache
def _replay(
    path: Path, window_s: float
) -> tuple[list[float], list[tuple[float, float, str]], list[int], float]:
    frame = window_frame(read_trace(path, spec=SPEC), window_s=window_s)
    h = OnlineRegimeDetector().detect(frame)
    t0 = float(frame["start"][0])
    kinds = [(s.start - t0, s.end - t0, s.kind) for s in h.segments]
    return [s.start - t0 for s in h.segments[1:]], kinds, regimes_entered(h.labels), t0


@pytest.mark.parametrize("name", RUNS)
def test_a_replay_reads_a_real_run_as_a_person_does_at_every_window_length(
    shared_data: Path, name: str
) -> None:
    path = shared_data / "parsplice" / name
    reading = PersonReading.from_dict(json.loads((path.parent / "labels.json").read_text())["traces"][name])
    answers = {}
    for w in (10.0, 30.0, 60.0):
        changes, kinds, entered, _ = _replay(path, w)
        c = check_reading(changes, kinds, reading)
        assert all(c.needs_found) and not any(c.quiet_broken), (w, c)
        assert min(c.level_share) >= 0.9, (w, c)
        assert reversals(entered) == 0
        answers[w] = changes
    assert agreement_f1(answers[10.0], answers[60.0]) >= 0.9
    assert agreement_f1(answers[30.0], answers[60.0]) >= 0.9


def test_live_the_steps_are_found_and_dated_within_five_minutes(shared_data: Path) -> None:
    # what the service knew, window by window: each step a person sees (1M-1 near 2,970 s,
    # 3,750 s and 5,700 s) confirmed once, dated within five minutes of where the replay
    # puts it (live, the block a step falls in can read as a short piece of its own)
    path = shared_data / "parsplice" / RUNS[0]
    frame = window_frame(read_trace(path, spec=SPEC), window_s=10.0)
    det = OnlineRegimeDetector()
    live: list[RegimeChange] = [c for w in frame.records() if (c := det.update(w)) is not None]
    replayed, _, _, t0 = _replay(path, 10.0)
    dated = [c.at_time - t0 for c in live if c.from_id is not None]
    for at in replayed:
        assert min(abs(at - d) for d in dated) <= 300.0, (at, dated)
    assert reversals([c.to_id for c in live]) == 0


@pytest.mark.parametrize("name", [*RUNS, "scale-workers-1M-1-71688.kv.csv.gz"])
def test_live_a_real_run_is_read_as_a_person_does(shared_data: Path, name: str) -> None:
    # what the service pushes on: every change a person sees confirmed, none in an interval
    # the person reads as quiet (a plateau easing in short pieces, a level settling after
    # its step), no regime entered twice in a row
    path = shared_data / "parsplice" / name
    reading = PersonReading.from_dict(json.loads((path.parent / "labels.json").read_text())["traces"][name])
    frame = window_frame(read_trace(path, spec=SPEC), window_s=10.0)
    det = OnlineRegimeDetector()
    live = [c for w in frame.records() if (c := det.update(w)) is not None]
    t0 = float(frame["start"][0])
    c = check_reading([x.at_time - t0 for x in live if x.from_id is not None], [], reading)
    assert all(c.needs_found) and not any(c.quiet_broken), c
    assert reversals([x.to_id for x in live]) == 0
