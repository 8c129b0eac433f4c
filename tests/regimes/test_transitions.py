"""Transitions (a decline between two levels), the change test's margins and dating, and
format-1 detector states."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from regimetune.models import InputError, WindowFrame
from regimetune.regimes import OnlineRegimeDetector, ari
from regimetune.regimes.synthetic import PARSPLICE, frame_from_profiles

from .helpers import steps

DATA = Path(__file__).parent / "data"
FLASH, DECLINE, PLATEAU_A, PLATEAU_B = PARSPLICE


def _declining(seed: int) -> WindowFrame:
    """Flash crowd (200 windows), a 300-window decline that levels off at window 500 into
    plateau A, then plateau B from window 900."""
    return frame_from_profiles(PARSPLICE, [200, 300, 400, 400], seed=seed, ramps=(1,))


def _scaled(frame: WindowFrame, column: str, rows: slice, factor: float) -> WindowFrame:
    cols = {k: v.copy() for k, v in frame.columns.items()}
    cols[column][rows] = (cols[column][rows] * factor).astype(cols[column].dtype)
    return WindowFrame(columns=cols, bucket_load=frame.bucket_load, bucket_bytes=frame.bucket_bytes)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_decline_is_one_transition_regime_between_two_levels(seed: int) -> None:
    frame = _declining(seed)
    det = OnlineRegimeDetector()
    h = det.detect(frame)
    assert [s.regime_id for s in h.segments] == [0, 1, 2, 3]
    assert det.transitions == [1]  # the decline, and only the decline
    assert ari(frame["label"], h.labels) > 0.85
    real = [c for c in h.changes if c.from_id is not None]
    # the plateau is dated back to where the rate levelled off, though it takes many more
    # windows to be sure that it did
    end = real[1]
    assert (end.from_id, end.to_id) == (1, 2)
    assert abs(end.at_window - 500) <= 10
    assert end.confirmed_window - end.at_window >= 30
    assert real[2].at_window == pytest.approx(900, abs=2) and real[2].delay_windows <= 2


def test_a_step_right_after_a_decline_ends_the_transition_at_once() -> None:
    # the decline runs straight into a step down to plateau B: no flat stretch to wait for
    frame = frame_from_profiles(
        [FLASH, DECLINE, PLATEAU_A, PLATEAU_B], [200, 300, 1, 500], seed=3, ramps=(1,)
    )
    det = OnlineRegimeDetector()
    h = det.detect(frame)
    real = [c for c in h.changes if c.from_id is not None]
    assert det.transitions == [real[0].to_id]
    assert real[-1].from_id == real[0].to_id
    assert real[-1].at_window == pytest.approx(501, abs=2) and real[-1].delay_windows <= 3


def test_without_a_trend_feature_there_are_no_transitions() -> None:
    det = OnlineRegimeDetector(trend_feature=None)
    det.detect(_declining(0))
    assert det.transitions == []
    # nor with a trend feature the detector does not use
    det = OnlineRegimeDetector(features=("topk_share", "entropy"))
    det.detect(_declining(0))
    assert det.transitions == []


def test_a_large_step_is_confirmed_as_soon_as_dwell_windows_show_it() -> None:
    frame = steps((3, 400), (2, 400), (0, 400), seed=4)
    for dwell in (2, 3, 4):
        h = OnlineRegimeDetector(dwell=dwell).detect(frame)
        real = [c for c in h.changes if c.from_id is not None]
        assert [c.at_window for c in real] == pytest.approx([400, 800], abs=1)
        assert all(c.delay_windows <= dwell - 1 for c in real), [c.delay_windows for c in real]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_small_lasting_shift_is_a_change_a_tiny_one_is_not(seed: int) -> None:
    plateau = steps((3, 1200), seed=seed)
    # 0.03 feature units (3 % more reads): below min_shift, however long it lasts
    h = OnlineRegimeDetector().detect(_scaled(plateau, "reads", slice(600, None), np.exp(0.03)))
    assert [c.from_id for c in h.changes] == [None]
    # 0.2 units, half the novelty radius: found by the change test within a few windows
    h = OnlineRegimeDetector().detect(_scaled(plateau, "reads", slice(600, None), np.exp(0.2)))
    real = [c for c in h.changes if c.from_id is not None]
    assert len(real) == 1 and real[0].at_window == pytest.approx(600, abs=2)
    assert real[0].confirmed_window - 600 <= 6


def test_a_step_in_two_statistics_at_once_is_confirmed_sooner_than_in_one() -> None:
    # top-k share down and entropy up by 4 times their noise (5 %) each: one of them alone
    # is below the single-feature bar of the change test, both together are beyond it
    def delays(columns: tuple[str, ...]) -> list[int | None]:
        out: list[int | None] = []
        for seed in range(8):
            f = steps((3, 1200), seed=seed)
            for column, factor in (("topk_share", 0.8), ("entropy", 1.2)):
                if column in columns:
                    f = _scaled(f, column, slice(600, None), factor)
            real = [c for c in OnlineRegimeDetector().detect(f).changes if c.from_id is not None]
            assert len(real) <= 1, real
            out.append(real[0].confirmed_window - 600 if real else None)
        return out

    both = delays(("topk_share", "entropy"))
    assert all(d is not None and d <= 2 for d in both), both
    alone = delays(("topk_share",))
    assert sum(d is not None and d <= 2 for d in alone) <= 2, alone


@pytest.mark.parametrize("column", ["reads", "writes", "topk_share"])
def test_a_short_run_of_odd_windows_in_one_statistic_is_not_a_change(column: str) -> None:
    plateau = steps((3, 1200), seed=5)
    factor = np.exp(-0.15) if column == "reads" else np.exp(-0.3)
    h = OnlineRegimeDetector().detect(_scaled(plateau, column, slice(600, 604), factor))
    assert [c.from_id for c in h.changes] == [None]


def test_a_regime_that_held_dwell_windows_is_a_change_and_the_old_one_returns() -> None:
    # a 4-window run far from the plateau held dwell (3) windows: a change, then back to the
    # plateau's own id (never a duplicate of it)
    plateau = steps((3, 1200), seed=6)
    det = OnlineRegimeDetector()
    h = det.detect(_scaled(plateau, "topk_share", slice(600, 604), np.exp(-0.7)))
    assert [(c.from_id, c.to_id) for c in h.changes] == [(None, 0), (0, 1), (1, 0)]
    assert det.current == 0


def test_detect_equals_update_and_state_round_trips_in_the_middle_of_a_transition(tmp_path: Path) -> None:
    frame = _declining(7)
    whole = OnlineRegimeDetector().detect(frame)
    first = OnlineRegimeDetector()
    first.detect(frame.slice(0, 350))  # the decline is under way
    assert first.current in first.transitions
    path = tmp_path / "det.json"
    first.save(path)
    restored = OnlineRegimeDetector.load(path)
    assert restored.to_state() == first.to_state()
    rest = frame.slice(350, len(frame))
    online = [c for c in (restored.update(w) for w in rest.records()) if c is not None]
    assert online == [c for c in whole.changes if c.confirmed_window >= 350]
    a = first.detect(rest)
    assert a.changes == online
    np.testing.assert_array_equal(a.online_labels, whole.online_labels[350:])


def test_a_format_1_state_is_upgraded_and_keeps_its_regimes() -> None:
    # saved by the previous detector after a flash crowd (60 windows) and 40 plateau windows
    old = json.loads((DATA / "detector_v1.json").read_text())
    assert old["format_version"] == 1
    det = OnlineRegimeDetector.from_state(old)
    assert det.current == 1 and det.n_seen == 100
    assert [r.id for r in det.regimes] == [0, 1]
    np.testing.assert_allclose(
        [r.centroid for r in det.regimes], np.asarray(old["kernel"]["centroids"])[:2], rtol=0, atol=0
    )
    assert det.to_state()["format_version"] == 2
    # it goes on (the keyspace too): more of the plateau is no change, the flash crowd returns
    # with its old id
    more = frame_from_profiles([PLATEAU_B, FLASH, PLATEAU_B], [200, 100, 100], seed=9)
    cols = dict(more.columns)
    ks = cols["keyspace_size"]
    cols["keyspace_size"] = ks - ks[0] + int(old["extractor"]["ring"][-1]) + 4
    more = WindowFrame(columns=cols, bucket_load=more.bucket_load, bucket_bytes=more.bucket_bytes)
    h = det.detect(more)
    assert [(c.from_id, c.to_id) for c in h.changes] == [(1, 0), (0, 1)]
    with pytest.raises(InputError, match="format"):
        OnlineRegimeDetector.from_state({**old, "format_version": 0})


def test_predict_one_never_returns_a_finished_transition() -> None:
    det = OnlineRegimeDetector()
    det.detect(_declining(0))
    assert det.current not in det.transitions
    for r in det.regimes:
        x = dict(zip(det.feature_names, r.centroid, strict=True))
        assert det.predict_one(x) not in det.transitions


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"span": 10}, "span"),
        ({"z": 0.0}, "z"),
        ({"min_shift": -1.0}, "min_shift"),
        ({"trend_feature": 3}, "trend_feature"),
    ],
)
def test_bad_transition_settings_are_refused(kwargs: dict, match: str) -> None:
    with pytest.raises(InputError, match=match):
        OnlineRegimeDetector(**kwargs).detect(steps((0, 30)))
