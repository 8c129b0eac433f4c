"""The detectors on the collectors' ParSplice-like generator (ground truth in ``label``)."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from regimetune.collectors import GeneratorConfig, generate, window_frame
from regimetune.models import WindowFrame
from regimetune.regimes import OnlineRegimeDetector, false_changes_per_hour, paper_kmeans, score


@functools.cache
def generated(growth: float, seed: int = 0, duration: float = 1500.0) -> WindowFrame:
    cfg = GeneratorConfig(duration_s=duration, growth=growth, timescale_s=700.0, workers=128, seed=seed)
    return window_frame(generate(cfg))


@pytest.mark.parametrize("growth", [0.6, 1.0, 1.5])
def test_paper_mode_finds_four_ordered_segments(growth: float) -> None:
    r = paper_kmeans(generated(growth))
    assert [s.regime_id for s in r.segments] == [0, 1, 2, 3]
    rates = [s.summary["mean_reads_per_s"] for s in r.segments]
    assert rates[0] == max(rates)  # the flash crowd comes first


@pytest.mark.slow
def test_third_regime_starts_later_when_growth_stretches_the_trace() -> None:
    # growth g stretches the time axis g times: record each run for g times as long
    runs = {g: paper_kmeans(generated(g, duration=1000.0 * g)) for g in (0.6, 1.0, 1.5)}
    starts = [runs[g].third_start_time for g in (0.6, 1.0, 1.5)]
    assert starts[0] < starts[1] < starts[2]
    # ... and the switch lands at about the same phase of the run
    phases = [runs[g].third_start_time / (1000.0 * g) for g in (0.6, 1.0, 1.5)]
    assert max(phases) - min(phases) < 0.1


@pytest.mark.parametrize("growth", [0.6, 1.5])
def test_online_detector_finds_the_four_regimes_with_the_decline_as_a_transition(growth: float) -> None:
    frame = generated(growth)
    det = OnlineRegimeDetector()
    h = det.detect(frame)
    s = score(h, frame)
    assert s.ari > 0.9
    assert s.f1 >= 0.8 and s.n_true == 3
    assert [seg.regime_id for seg in h.segments] == [0, 1, 2, 3]
    truth = frame["label"]
    decline = np.bincount(h.labels[truth == 1]).argmax()
    assert det.transitions == [decline]
    # the flash crowd and the last plateau are each (mostly) one regime of their own
    first = np.bincount(h.labels[truth == 0]).argmax()
    last = np.bincount(h.labels[truth == 3]).argmax()
    assert len({first, decline, last}) == 3
    assert np.mean(h.labels[truth == 3] == last) > 0.95


def test_no_false_changes_on_a_stationary_generated_trace() -> None:
    frame = generated(0.5, seed=4, duration=2400.0)
    start = int(np.flatnonzero(frame["label"] == 3)[0]) + 30
    plateau = frame.slice(start, len(frame))
    h = OnlineRegimeDetector().detect(plateau)
    assert false_changes_per_hour(h.changes, float(len(plateau))) == 0.0


@pytest.mark.parametrize("seed", [1, 7])
def test_the_last_plateau_is_one_regime_through_minute_windows(seed: int) -> None:
    # the demo's run (64 workers, 2.5 h, 60-s windows): the keyspace growth and entropy of the
    # last plateau drift slowly with little noise; a regime founded over the windows that
    # straddle the step to it must not split it in two
    cfg = GeneratorConfig(duration_s=9000, workers=64, seed=seed)
    frame = window_frame(generate(cfg), window_s=60.0)
    h = OnlineRegimeDetector().detect(frame)
    truth = frame["label"]
    last = np.bincount(h.labels[truth == 3]).argmax()
    assert np.mean(h.labels[truth == 3] == last) > 0.95
    assert h.segments[-1].regime_id == last and len(h.segments) == 4
