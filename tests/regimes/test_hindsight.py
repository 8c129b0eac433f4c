"""Re-dating the end of a transition with the windows that followed it."""

from __future__ import annotations

import numpy as np
import pytest

from regimetune.regimes import OnlineRegimeDetector
from regimetune.regimes.hindsight import redate_transition_ends
from regimetune.regimes.synthetic import PARSPLICE, frame_from_profiles


def _case(shape: str, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """2000 reads/s until window 200, a decline to 900 (exponential with a time constant of
    100 windows, settled to 5 % at window 500; or linear, ending at window 500), a plateau
    to window 1200. The online detector dated the plateau at 560 and confirmed it at 640."""
    rng = np.random.default_rng(seed)
    s = np.arange(1200.0)
    if shape == "exponential":
        mean = np.where(s < 200, 2000.0, 900.0 + 1100.0 * np.exp(-(s - 200) / 100.0))
    else:
        mean = np.where(s < 200, 2000.0, np.maximum(900.0, 2000.0 - 1100.0 * (s - 200) / 300.0))
    rate = mean * rng.lognormal(-(0.08**2) / 2, 0.08, len(s))
    labels = np.repeat([0, 1, 2], [200, 360, 640])
    changes = np.array([[-1, 0, 0, 20], [0, 1, 200, 204], [1, 2, 560, 640]])
    return rate, labels, changes


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_an_exponential_decline_ends_at_its_settling_time(seed: int) -> None:
    rate, labels, changes = _case("exponential", seed)
    redate_transition_ends(rate, labels, changes, {1}, 0, min_seg=3)
    at = int(changes[2, 2])
    assert abs(at - 500) <= 30, at
    assert (labels[at:] == 2).all() and (labels[200:at] == 1).all()
    assert changes[2, 3] == 640  # the confirmation does not move


def test_a_linear_decline_keeps_its_date_and_no_date_moves_later() -> None:
    rate, labels, changes = _case("linear", 0)
    before = (labels.copy(), changes.copy())
    redate_transition_ends(rate, labels, changes, {1}, 0, min_seg=3)
    assert (labels == before[0]).all() and (changes == before[1]).all()
    # a change that does not end a transition is never re-dated
    rate, labels, changes = _case("exponential", 0)
    redate_transition_ends(rate, labels, changes, set(), 0, min_seg=3)
    assert changes[2, 2] == 560
    # nor moved later than where it was dated online (it was flat from there on)
    rate, labels, changes = _case("exponential", 0)
    changes[2, 2] = 440
    labels[440:] = 2
    redate_transition_ends(rate, labels, changes, {1}, 0, min_seg=3)
    assert changes[2, 2] == 440 and (labels[440:] == 2).all()


def test_hindsight_moves_only_dates_and_back_dated_labels() -> None:
    frame = frame_from_profiles(PARSPLICE, [200, 300, 400, 400], seed=3, ramps=(1,))
    a = OnlineRegimeDetector().detect(frame)
    b = OnlineRegimeDetector().detect(frame, hindsight=False)
    assert (a.online_labels == b.online_labels).all()
    assert [(c.from_id, c.to_id, c.confirmed_window) for c in a.changes] == [
        (c.from_id, c.to_id, c.confirmed_window) for c in b.changes
    ]
