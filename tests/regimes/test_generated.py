"""The detectors on the collectors' realistic generator (ground truth in ``label``): what a
person sees in these runs, as properties with tolerances."""

from __future__ import annotations

import functools

import pytest

from regimetune.collectors import GeneratorConfig, generate, window_frame
from regimetune.models import WindowFrame
from regimetune.regimes import (
    OnlineRegimeDetector,
    ari,
    change_points,
    false_changes_per_hour,
    paper_kmeans,
    regimes_entered,
    reversals,
)


@functools.cache
def run(preset: str, seed: int, window_s: float, hours: float = 3.0) -> WindowFrame:
    cfg = GeneratorConfig(duration_s=3600.0 * hours, workers=192, seed=seed, preset=preset)
    return window_frame(generate(cfg), window_s=window_s)


@pytest.mark.parametrize("window_s", [10.0, 60.0])
@pytest.mark.parametrize("seed", [6, 7, 29])
def test_no_change_on_a_stationary_run(seed: int, window_s: float) -> None:
    frame = run("stationary", seed, window_s)
    h = OnlineRegimeDetector().detect(frame)
    assert false_changes_per_hour(h.changes, float(len(frame)) * window_s) == 0.0
    assert h.n_regimes == 1
    assert h.online_labels is not None and regimes_entered(h.online_labels) == [0]


@pytest.mark.parametrize("seed", [6, 7])
def test_a_parsplice_run_is_found_without_reversals(seed: int) -> None:
    frame = run("parsplice", seed, 60.0)
    h = OnlineRegimeDetector().detect(frame)
    assert reversals([c.to_id for c in h.changes]) == 0
    assert h.online_labels is not None and reversals(regimes_entered(h.online_labels)) == 0
    assert 3 <= h.n_regimes <= 5  # the four regimes a person sees, +-1
    assert ari(frame["label"], h.labels) >= 0.7
    # the flash crowd's end is dated within 2 % of the run
    truth = change_points(frame["label"])
    first = next(c.at_window for c in h.changes if c.from_id is not None)
    assert abs(first - truth[0]) <= 0.02 * len(frame)


@pytest.mark.parametrize("preset", ["parsplice", "fast-decay", "stationary"])
def test_10_and_60_second_windows_give_the_same_regimes(preset: str) -> None:
    a = OnlineRegimeDetector().detect(run(preset, 8, 10.0))
    b = OnlineRegimeDetector().detect(run(preset, 8, 60.0))
    assert [(c.to_id, c.at_time) for c in a.changes] == [(c.to_id, c.at_time) for c in b.changes]
    assert [s.kind for s in a.segments] == [s.kind for s in b.segments]


def test_a_fast_decay_is_a_transition_then_one_level() -> None:
    # the preset's fast fall (about 20 minutes) is a decline; the two hours of slow drift
    # after it move less than a level may wander (drift_per_h): they are part of the plateau
    for seed in (6, 7, 8):
        frame = run("fast-decay", seed, 10.0)
        h = OnlineRegimeDetector().detect(frame)
        assert [s.kind for s in h.segments] == ["transition", "level"]
        assert ari(frame["label"], h.labels) >= 0.8
        assert reversals([c.to_id for c in h.changes]) == 0


def test_paper_mode_finds_four_ordered_segments() -> None:
    cfg = GeneratorConfig(
        duration_s=1500, growth=1.0, timescale_s=700.0, workers=128, seed=0, preset="classic"
    )
    r = paper_kmeans(window_frame(generate(cfg)))
    assert [s.regime_id for s in r.segments] == [0, 1, 2, 3]
    rates = [s.summary["mean_reads_per_s"] for s in r.segments]
    assert rates[0] == max(rates)  # the flash crowd comes first


def test_paper_mode_on_minute_windows_keeps_the_edge_window_in_its_regime() -> None:
    # a realistic run starts off a window boundary: its first window covers part of a
    # minute, rated by the time it covers, so it is not a regime of its own
    frame = run("parsplice", 5, 60.0)
    assert frame["length"][0] < 60.0
    r = paper_kmeans(frame)
    assert r.labels[0] == r.labels[1]
