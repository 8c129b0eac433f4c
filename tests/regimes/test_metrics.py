from __future__ import annotations

import math

import numpy as np
import pytest

from regimetune.models import InputError, RegimeChange
from regimetune.models.regimes import RegimeHistory
from regimetune.regimes import OnlineRegimeDetector, metrics
from regimetune.regimes.metrics import (
    ari,
    change_points,
    detection_delays,
    false_changes_per_hour,
    precision_recall_f1,
    regimes_entered,
    reversals,
)

from .helpers import steps


def _change(frm: int | None, to: int, at: int, conf: int) -> RegimeChange:
    return RegimeChange(
        from_id=frm,
        to_id=to,
        at_window=at,
        at_time=float(at),
        confirmed_window=conf,
        confirmed_time=float(conf),
    )


def test_each_true_change_is_matched_at_most_once() -> None:
    # two predictions near one true change: one hit, one false alarm
    assert precision_recall_f1([100], [98, 101], margin=5) == (0.5, 1.0, pytest.approx(2 / 3))
    # a prediction between two true changes can serve only one of them
    p, r, _ = precision_recall_f1([100, 108], [104], margin=5)
    assert (p, r) == (1.0, 0.5)
    assert precision_recall_f1([100], [120], margin=5) == (0.0, 0.0, 0.0)
    assert precision_recall_f1([], [], margin=5) == (1.0, 1.0, 1.0)
    with pytest.raises(InputError):
        precision_recall_f1([1], [1], margin=-1)


def test_regimes_entered_skip_the_windows_before_the_first_and_count_reversals() -> None:
    assert regimes_entered(np.array([-1, -1, 3, 3, 1, 1, 3, 0])) == [3, 1, 3, 0]
    assert regimes_entered([-1, -1]) == [] and regimes_entered([]) == []
    assert reversals([3, 1, 3, 0]) == 1  # 3 -> 1 -> 3
    assert reversals([0, 1, 2, 1, 0]) == 1 and reversals([0, 1, 2, 3]) == 0


def test_ari_ignores_unlabelled_windows_and_is_permutation_invariant() -> None:
    truth = np.array([-1, 0, 0, 1, 1, 2])
    assert ari(truth, [7, 5, 5, 3, 3, 9]) == 1.0
    assert ari(truth, [0, 0, 0, 0, 0, 0]) == 0.0
    with pytest.raises(InputError):
        ari([0, 1], [0])


def test_delays_count_from_the_true_change_to_the_confirmation() -> None:
    changes = [_change(None, 0, 0, 1), _change(0, 1, 101, 103), _change(1, 2, 300, 302)]
    assert detection_delays([100, 200], changes, margin=5) == [3]
    assert change_points([0, 0, 1, 1, 1, 0]).tolist() == [2, 5]


def test_false_changes_per_hour_ignore_the_founding() -> None:
    changes = [_change(None, 0, 0, 1), _change(0, 1, 10, 12)]
    assert false_changes_per_hour(changes, 1800.0) == 2.0
    with pytest.raises(InputError):
        false_changes_per_hour(changes, 0.0)


def test_score_of_a_detector_run() -> None:
    frame = steps((0, 300), (2, 300), (3, 300), seed=11)
    det = OnlineRegimeDetector()
    s = metrics.score(det.detect(frame), frame)
    assert s.n_true == 2 and s.f1 == 1.0 and s.ari > 0.95
    # a new level is a regime once it has held min_regime_s (60 windows of 10 s), read a
    # block (6 windows) late, the block it began in counted
    assert 0 <= s.median_delay <= 60 + 2 * 6 and not math.isnan(s.median_delay)


def test_score_places_a_change_where_it_is_dated_and_delays_it_until_confirmed() -> None:
    # a change dated exactly at the true boundary but confirmed 40 windows later: a hit for
    # F1 (its segment boundary is right), a 40-window delay (that is when it was known)
    frame = steps((0, 300), (3, 300), seed=12)
    labels = np.repeat([0, 1], 300)
    h = RegimeHistory(labels=labels, segments=[], changes=[_change(None, 0, 0, 20), _change(0, 1, 300, 340)])
    s = metrics.score(h, frame)
    assert (s.f1, s.median_delay, s.ari) == (1.0, 40.0, 1.0)
    # dated 30 windows off (margin: 2 % of 600 = 12 windows): a miss and a false change
    h = RegimeHistory(labels=labels, segments=[], changes=[_change(None, 0, 0, 20), _change(0, 1, 330, 340)])
    s = metrics.score(h, frame)
    assert s.f1 == 0.0 and math.isnan(s.median_delay)
