"""TCPD series (river's files, rows cut as TCPD cuts them) and TCPD's F1 / covering."""

from __future__ import annotations

import socket

import numpy as np
import pytest

from regimetune.models import InputError
from regimetune.regimes.metrics import tcpd_cover, tcpd_f1
from regimetune.regimes.tcpd import SERIES, TcpdSeries, load_all, load_series

SHAPES = {
    "airline_passengers": ((468, 1), ("Total Passengers",)),
    "apple": ((622, 2), ("Close", "Volume")),
    "bitcoin": ((822, 1), ("price",)),
    "brent": ((500, 1), ("DPB",)),
    "occupancy": ((509, 4), ("V1", "V2", "V3", "V4")),
    "run_log": ((376, 2), ("Pace", "Distance")),
    "uk_coal_employ": ((105, 1), ("Employment",)),
}


@pytest.fixture(scope="module")
def series() -> dict[str, TcpdSeries]:
    return {s.name: s for s in load_all()}


# --- loaders -------------------------------------------------------------------------------


def test_seven_series_with_their_shapes_and_columns(series: dict[str, TcpdSeries]) -> None:
    assert set(SERIES) == set(SHAPES) == set(series)
    for name, (shape, columns) in SHAPES.items():
        s = series[name]
        assert s.values.shape == shape, name
        assert s.values.dtype == np.float64
        assert s.columns == columns
        assert s.times.shape == (shape[0],)
        assert np.issubdtype(s.times.dtype, np.datetime64)
        assert np.all(np.diff(s.times) > np.timedelta64(0, "s")), name
        assert np.isfinite(s.values).all()


def test_every_annotation_is_a_sorted_row_of_its_series(series: dict[str, TcpdSeries]) -> None:
    for s in series.values():
        assert len(s.annotations) == 5
        for points in s.annotations.values():
            assert list(points) == sorted(points)
            assert all(0 <= p < s.n for p in points)


def test_apple_drops_the_first_row_then_keeps_every_third(series: dict[str, TcpdSeries]) -> None:
    apple = series["apple"]
    # river's file starts on 1996-12-12: TCPD's first row is the file's second
    assert str(apple.times[0])[:10] == "1996-12-13"
    # the crash of 2000-09-29 (half the price in a day) is row 319, where all five mark it
    assert str(apple.times[319])[:10] == "2000-09-29"
    assert apple.values[319, 0] < 0.6 * apple.values[318, 0]
    assert all(319 in points for points in apple.annotations.values())


def test_brent_keeps_every_tenth_row_from_the_first_in_2000(series: dict[str, TcpdSeries]) -> None:
    brent = series["brent"]
    assert str(brent.times[0])[:10] == "2000-01-04"
    gaps = np.diff(brent.times).astype("timedelta64[D]").astype(int)
    assert 12 <= np.median(gaps) <= 16  # ten trading days are two calendar weeks
    # the 2008 peak and crash, and the 2014-15 fall, sit on the annotations
    assert str(brent.times[219])[:7] == "2008-07"
    assert brent.values[219:231, 0].max() > 2.5 * brent.values[230, 0]
    assert brent.values[375, 0] > 1.5 * brent.values[381, 0]


def test_loaders_need_no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the loader opened a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    assert load_series("uk_coal_employ").n == 105


def test_unknown_series_is_a_clear_error() -> None:
    with pytest.raises(InputError, match=r"unknown TCPD series 'nile'.*apple"):
        load_series("nile")


# --- metrics -------------------------------------------------------------------------------


def test_f1_averages_recall_over_annotators_not_pooled() -> None:
    # with row 0: a = {0, 10}, b = {0, 10, 20, 30}; predicted {0, 10}
    # precision 2/2 against the union; recall (2/2 + 2/4) / 2 = 0.75 -> F1 = 6/7
    # (pooled recall 4/6 would give 0.8, recall against the union 2/4 would give 2/3)
    ann = {"a": [10], "b": [10, 20, 30]}
    assert tcpd_f1(ann, [10], 50) == pytest.approx(6 / 7)


def test_f1_matches_each_annotated_point_at_most_once() -> None:
    # one prediction between two annotated points covers only one of them: recall 2/3
    assert tcpd_f1({"a": [10, 12]}, [11], 50) == pytest.approx(2 * 1 * (2 / 3) / (1 + 2 / 3))
    # and one annotated point is not matched twice: precision 2/3 (0 and one of 9, 11)
    assert tcpd_f1({"a": [10]}, [9, 11], 50) == pytest.approx(2 * (2 / 3) / (2 / 3 + 1))


def test_f1_matches_greedily_nearest_first_as_tcpdbench() -> None:
    # truth {0, 5, 10}, predicted {0, 1, 8}: 5 takes its nearest, 8, and 10 is left
    # unmatched (a maximum matching would pair 5-1 and 10-8 and score 1.0)
    assert tcpd_f1({"a": [5, 10]}, [1, 8], 50) == pytest.approx(2 / 3)


def test_f1_margin_is_inclusive() -> None:
    assert tcpd_f1({"a": [10]}, [15], 50) == 1.0
    assert tcpd_f1({"a": [10]}, [16], 50, margin=5) < 1.0
    assert tcpd_f1({"a": [10]}, [16], 50, margin=6) == 1.0


def test_f1_counts_row_zero_on_both_sides() -> None:
    # nothing annotated, nothing predicted: both sides hold only row 0
    assert tcpd_f1({"a": []}, [], 50) == 1.0
    # a prediction at 0 is the same as none
    assert tcpd_f1({"a": [10]}, [0], 50) == tcpd_f1({"a": [10]}, [], 50) == pytest.approx(2 / 3)


def test_cover_is_of_the_annotation_by_the_prediction_averaged_over_annotators() -> None:
    # n = 10, annotated [0, 2) [2, 10), predicted [0, 10): (2 * 0.2 + 8 * 0.8) / 10
    # (the reverse direction, the prediction covered by the annotation, would be 0.8)
    assert tcpd_cover({"a": [2]}, [], 10) == pytest.approx(0.68)
    assert tcpd_cover({"a": [2]}, [2], 10) == 1.0
    # averaged: annotator b (no change) is covered exactly by no change
    assert tcpd_cover({"a": [2], "b": []}, [], 10) == pytest.approx((0.68 + 1.0) / 2)


def test_cover_of_a_finer_prediction() -> None:
    # annotated [0, 10), predicted [0, 5) [5, 10): the true segment's best overlap is 1/2
    assert tcpd_cover({"a": []}, [5], 10) == pytest.approx(0.5)
    assert tcpd_cover({"a": [5]}, [0, 5], 10) == 1.0


@pytest.mark.parametrize("metric", [tcpd_f1, tcpd_cover])
def test_metrics_reject_bad_input(metric) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InputError, match=r"0\.\.9"):
        metric({"a": [2]}, [10], 10)
    with pytest.raises(InputError, match=r"0\.\.9"):
        metric({"a": [2]}, [-1], 10)
    with pytest.raises(InputError, match="annotator"):
        metric({}, [2], 10)


def test_zero_baseline_on_uk_coal(series: dict[str, TcpdSeries]) -> None:
    s = series["uk_coal_employ"]
    # no prediction but row 0: precision 1, recall the mean of 1 / (points + 1)
    recall = np.mean([1 / (len(p) + 1) for p in s.annotations.values()])
    assert tcpd_f1(s.annotations, [], s.n) == pytest.approx(2 * recall / (1 + recall))
    assert tcpd_f1(s.annotations, [], s.n) == pytest.approx(0.5133, abs=1e-4)
    assert tcpd_cover(s.annotations, [], s.n) == pytest.approx(0.3565, abs=1e-4)
    # marking the annotated points beats it on both scores
    marked = sorted({p for points in s.annotations.values() for p in points})
    assert tcpd_f1(s.annotations, marked, s.n) == 1.0
    assert tcpd_cover(s.annotations, marked, s.n) > tcpd_cover(s.annotations, [], s.n)


# --- the detector on series that keep moving ---------------------------------------------------


@pytest.mark.parametrize("name", ["run_log", "occupancy"])
def test_the_detector_is_not_stuck_on_series_that_never_level_off(
    series: dict[str, TcpdSeries], name: str
) -> None:
    # RunLog's distance is a counter (read as distance per row); Occupancy's humidity and CO2
    # drift while its light switches. Stuck in one transition, the detector would report
    # nothing and score exactly the "no change" baseline.
    from regimetune.regimes import counter_columns, detect_series

    s = series[name]
    assert counter_columns(s.values) == ((1,) if name == "run_log" else ())
    rows = [c.at_window for c in detect_series(s.values).changes if c.from_id is not None]
    assert len(rows) >= 3
    assert tcpd_f1(s.annotations, rows, s.n) > tcpd_f1(s.annotations, [], s.n)
    assert tcpd_cover(s.annotations, rows, s.n) > tcpd_cover(s.annotations, [], s.n)
