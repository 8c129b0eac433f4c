"""The online detector: behaviour a user relies on, on frames whose truth is known."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from river import checks as river_checks
from river import compose

from regimetune.models import InputError, WindowFrame
from regimetune.regimes import (
    FORMAT_VERSION,
    DetectorParams,
    OnlineRegimeDetector,
    ari,
    detect_series,
    regimes_entered,
    reversals,
)
from regimetune.regimes.checks import CHECKS, check_detector, labelled_series
from regimetune.regimes.synthetic import Profile, frame_from_profiles, parsplice_like_frame, stationary_frame

from .helpers import empty_frame, steps

DATA = Path(__file__).parent / "data"
#: Every detector the package ships, in the variants the service and the CLI create.
DETECTORS = [OnlineRegimeDetector(), OnlineRegimeDetector(window_s=60.0, min_regime_s=300.0)]


@pytest.mark.parametrize("det", DETECTORS, ids=["default", "60s-windows"])
@pytest.mark.parametrize("check", CHECKS, ids=[c.__name__ for c in CHECKS])
def test_conformance(det: OnlineRegimeDetector, check) -> None:  # type: ignore[no-untyped-def]
    check(det.clone())


class _Leaky(OnlineRegimeDetector):
    """A detector that breaks the contract: predicting learns."""

    def predict_one(self, x):  # type: ignore[no-untyped-def]
        self.learn_one(x)
        return 0


def test_check_detector_catches_a_detector_whose_predict_one_learns() -> None:
    with pytest.raises(AssertionError, match="predict_one"):
        check_detector(_Leaky())


def test_a_genuine_river_clusterer() -> None:
    river_checks.check_estimator(OnlineRegimeDetector())
    # it composes in a river pipeline: scaled features in, regime ids out
    model = compose.Pipeline(
        compose.FuncTransformer(lambda x: {"load": x["load"] / 10.0}),
        OnlineRegimeDetector(window_s=60.0),
    )
    for v in np.r_[np.zeros(60), np.full(60, 8.0)] + np.tile([0.5, -0.5], 60):
        model.learn_one({"load": float(v)})
    assert model["OnlineRegimeDetector"].current == 1


def test_get_params_is_every_detector_param() -> None:
    p = OnlineRegimeDetector(min_step=0.2).get_params()
    assert p == DetectorParams(min_step=0.2).as_dict()
    assert OnlineRegimeDetector.from_params(DetectorParams.from_dict(p)).min_step == 0.2
    with pytest.raises(InputError, match="unknown detector parameters"):
        DetectorParams.from_dict({"z": 5})


def test_abrupt_regimes_are_found_and_dated() -> None:
    frame = steps((0, 300), (2, 400), (3, 500), seed=1)  # 10-s windows
    h = OnlineRegimeDetector().detect(frame)
    assert ari(frame["label"], h.labels) > 0.97
    assert [s.regime_id for s in h.segments] == [0, 1, 2]
    real = [c for c in h.changes if c.from_id is not None]
    assert [c.at_window for c in real] == pytest.approx([300, 700], abs=6)  # a block is 6 windows


def test_a_returning_regime_gets_its_old_id_back() -> None:
    frame = steps((0, 200), (3, 200), (0, 200), (3, 200), seed=2)
    h = OnlineRegimeDetector().detect(frame)
    assert [s.regime_id for s in h.segments] == [0, 1, 0, 1]
    assert len(h.regimes) == 2


@pytest.mark.parametrize("seed", [3, 4])
def test_every_window_length_gives_the_same_regimes(seed: int) -> None:
    # the same 4-hour trace windowed at 10, 30 and 60 s: the same changes at the same times
    # (blocks of 60 s pool exactly), so the window length only changes how soon they are known
    one_s = parsplice_like_frame(n_windows=4 * 3600, seed=seed)
    answers = {}
    for w in (10, 30, 60):
        frame = _coarsen(one_s, w)
        h = OnlineRegimeDetector().detect(frame)
        answers[w] = [(c.to_id, c.at_time) for c in h.changes], [s.kind for s in h.segments]
    assert answers[10] == answers[30] == answers[60]
    assert len(answers[10][0]) == 4


def _coarsen(frame: WindowFrame, w: int) -> WindowFrame:
    """1-s windows summed into windows of ``w`` seconds."""
    n = len(frame) // w
    cols = {}
    for name, v in frame.columns.items():
        v = v[: n * w].reshape(n, w)
        if name in ("reads", "writes"):
            cols[name] = v.sum(axis=1)
        elif name == "keyspace_size":
            cols[name] = v[:, -1]
        elif name == "start":
            cols[name] = v[:, 0]
        elif name == "length":
            cols[name] = v.sum(axis=1)
        elif name == "index":
            cols[name] = np.arange(n)
        elif v.dtype == bool or name == "label":
            cols[name] = v[:, 0]
        else:
            cols[name] = v.mean(axis=1)
    return WindowFrame(columns=cols, bucket_load=np.zeros((n, 0)), bucket_bytes=np.zeros((n, 0)))


def test_a_stationary_trace_is_one_regime_live_and_in_a_replay() -> None:
    for seed in range(3):
        det = OnlineRegimeDetector()
        h = det.detect(stationary_frame(1440, seed=seed, window_s=10.0))
        assert h.n_regimes == 1 and [c.from_id for c in h.changes] == [None]
        assert h.online_labels is not None and set(h.online_labels.tolist()) - {-1} == {0}
        # live, the regime has absorbed every window since it was founded (10 minutes in; the
        # last block waits for the median)
        assert 1440 - 60 - 2 * 6 <= det.regimes[0].n_windows <= 1440 - 60


def test_a_one_block_burst_is_no_change() -> None:
    frame = steps((3, 600), seed=5)
    cols = {k: v.copy() for k, v in frame.columns.items()}
    cols["reads"][300:306] *= 4  # a minute of four times the reads
    h = OnlineRegimeDetector().detect(
        WindowFrame(columns=cols, bucket_load=frame.bucket_load, bucket_bytes=frame.bucket_bytes)
    )
    assert h.n_regimes == 1


@pytest.mark.parametrize("seed", [0, 1])
def test_a_writes_step_counts_at_a_factor_of_two_in_one_plus_the_rate(seed: int) -> None:
    """Writes are small counts: a 20-minute burst of half a write a second beside 100
    reads/s is no change (at the read rate's least step it would found a regime), and a
    five-fold fall of 15 writes/s is one, with the reads barely moving."""

    def at(reads: float, writes: float, growth: float) -> Profile:
        return Profile(reads=reads, writes=writes, active=50, topk=0.5, entropy=5.0, growth=growth)

    burst = frame_from_profiles(
        [at(100, 0.1, 0.5), at(100, 0.5, 0.5), at(100, 0.1, 0.5)], [40, 20, 40], seed=seed, window_s=60.0
    )
    assert [s.regime_id for s in OnlineRegimeDetector().detect(burst).segments] == [0]
    assert len(OnlineRegimeDetector(min_count_step=0.12).detect(burst).segments) > 1
    fall = frame_from_profiles([at(230, 15, 1.0), at(215, 3, 0.5)], [60, 60], seed=seed, window_s=60.0)
    assert [(s.regime_id, s.start_window) for s in OnlineRegimeDetector().detect(fall).segments] == [
        (0, 0),
        (1, 60),
    ]


def test_a_series_row_is_read_as_it_is() -> None:
    # a row of a series has no known length, so nothing is a burst: a row far off is read
    # (the change test's least segment, two rows, around it), where a trace's one-block burst
    # is filtered out (above)
    x = np.r_[np.zeros(40), 50.0, np.zeros(40)] + np.tile([0.1, -0.1], 81)[:81]
    cuts = [c.at_window for c in detect_series(x).changes if c.from_id is not None]
    assert len(cuts) == 2 and 39 <= cuts[0] <= 40 and cuts[1] == cuts[0] + 2


def test_online_changes_are_dated_where_they_began_and_known_after_min_regime() -> None:
    frame = steps((0, 300), (2, 400), seed=7)
    det = OnlineRegimeDetector()
    changes = [c for c in (det.update(w) for w in frame.records()) if c is not None]
    assert [c.to_id for c in changes] == [0, 1]
    step = changes[1]
    assert abs(step.at_window - 300) <= 6
    # known once the new level has held min_regime_s (600 s = 60 windows), and a block later
    assert 60 <= step.delay_windows <= 60 + 18
    assert reversals(regimes_entered([c.to_id for c in changes])) == 0


def test_online_a_partial_first_window_dates_like_the_others() -> None:
    # 10-s windows, the first covering 3 s: blocks are on the clock, so nothing moves
    base = steps((0, 300), (2, 400), seed=7)
    cols = {k: v.copy() for k, v in base.columns.items()}
    cols["length"] = np.full(len(base), 10.0)
    cols["length"][0] = 3.0
    cols["start"] = np.r_[7.0, 10.0 + 10.0 * np.arange(len(base) - 1)]
    for name in ("reads", "writes"):
        cols[name][0] = cols[name][0] * 3 // 10
    frame = WindowFrame(columns=cols, bucket_load=base.bucket_load, bucket_bytes=base.bucket_bytes)
    h = OnlineRegimeDetector().detect(frame)
    assert [c.to_id for c in h.changes] == [0, 1] and abs(h.changes[1].at_window - 300) <= 6


def test_series_rows_are_blocks_and_changes_are_row_indices() -> None:
    x = np.r_[np.zeros(100), np.full(100, 3.0)] + np.random.default_rng(0).normal(0, 0.3, 200)
    h = detect_series(x, step_s=60.0)
    assert [(c.from_id, c.to_id, c.at_window) for c in h.changes] == [(None, 0, 0), (0, 1, 100)]


def test_a_new_series_level_is_not_the_nearest_known_one() -> None:
    x = np.r_[np.full(200, 1.0), np.full(200, 3.0), np.full(200, 4.0)]
    x = x + np.random.default_rng(1).normal(0, 0.1, len(x))
    h = detect_series(x)
    assert [s.regime_id for s in h.segments] == [0, 1, 2]


def test_a_counter_column_is_read_as_its_increase_per_row() -> None:
    rng = np.random.default_rng(3)
    speed = np.maximum(np.r_[np.full(100, 2.0), np.full(100, 5.0)] + rng.normal(0, 0.3, 200), 0.0)
    h = detect_series(np.cumsum(speed))
    assert [(c.from_id, c.to_id) for c in h.changes] == [(None, 0), (0, 1)]
    assert h.changes[-1].at_window == pytest.approx(100, abs=2)


def test_a_saved_state_continues_exactly(tmp_path: Path) -> None:
    frame = steps((0, 300), (2, 400), seed=7)
    whole = OnlineRegimeDetector()
    whole.detect(frame.slice(0, 350))
    whole.save(tmp_path / "det.json")
    restored = OnlineRegimeDetector.load(tmp_path / "det.json")
    a, b = whole.detect(frame.slice(350, 700)), restored.detect(frame.slice(350, 700))
    assert a.labels.tolist() == b.labels.tolist()
    assert a.online_labels.tolist() == b.online_labels.tolist()


def test_states_of_earlier_formats_fail_with_what_to_do(tmp_path: Path) -> None:
    old = json.loads((DATA / "detector_v1.json").read_text())
    with pytest.raises(InputError, match=r"format 1 .*re-run `regimetune detect"):
        OnlineRegimeDetector.from_state(old)
    for version in (2, 11):
        with pytest.raises(
            InputError, match=rf"format {version} .*cannot be converted to format {FORMAT_VERSION}"
        ):
            OnlineRegimeDetector.from_state({**old, "format_version": version})
    with pytest.raises(InputError, match="not supported"):
        OnlineRegimeDetector.from_state({**OnlineRegimeDetector().to_state(), "format_version": 99})
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(InputError, match="not a JSON detector state"):
        OnlineRegimeDetector.load(tmp_path / "bad.json")
    broken = OnlineRegimeDetector()
    broken.detect(steps((0, 50)))
    state = broken.to_state()
    del state["learnt"]["layer"]
    with pytest.raises(InputError, match="bad detector state"):
        OnlineRegimeDetector.from_state(state)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"block_s": 0},
        {"match_p": 1.5},
        {"features": ("nope",)},
        {"regime_s": 30.0},
        {"wander": -0.01},
        {"min_count_step": 0},
        {"max_regimes": 0},
    ],
)
def test_bad_parameters_are_refused(kwargs: dict) -> None:  # type: ignore[type-arg]
    with pytest.raises(InputError):
        OnlineRegimeDetector(**kwargs).detect(steps((0, 50)))


def test_bad_inputs_are_refused() -> None:
    with pytest.raises(InputError, match="no windows"):
        OnlineRegimeDetector().detect(empty_frame())
    with pytest.raises(InputError, match="non-finite"):
        detect_series(np.array([1.0, np.nan, 2.0]))
    det = OnlineRegimeDetector()
    det.detect(steps((0, 50)))
    with pytest.raises(InputError, match="cannot mix"):
        det.learn_one({"x": 1.0})


def test_the_labelled_series_is_real() -> None:
    assert labelled_series().shape == (105, 1)


def test_a_state_is_strict_json_even_with_missing_values() -> None:
    # the first window's keyspace growth is missing (NaN): the state must still be JSON that
    # PostgreSQL's jsonb and strict parsers accept, and read back to the same detector
    det = OnlineRegimeDetector()
    det.detect(steps((0, 40), seed=3))
    text = json.dumps(det.to_state(), allow_nan=False)
    again = OnlineRegimeDetector.from_state(json.loads(text))
    assert json.dumps(again.to_state(), allow_nan=False) == text


def test_the_state_stays_bounded_on_a_long_stationary_stream() -> None:
    det = OnlineRegimeDetector()
    det.detect(stationary_frame(3 * 1440, seed=1, window_s=10.0))  # 12 hours
    s = det.to_state()["learnt"]
    assert len(s["layer"]["runs"]) <= 2 and len(s["dates"]) <= len(s["partition"]["rows"]) + 2


def test_the_parameters_load_without_numba_scipy_or_river() -> None:
    # the service's settings hold a DetectorParams: reading them loads none of these
    code = (
        "import sys; from regimetune.regimes import DetectorParams; DetectorParams(max_regimes=4).z; "
        "print([m for m in ('numba', 'scipy', 'river') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_the_regimes_package_names_what_it_loads_lazily() -> None:
    import regimetune.regimes as r

    assert sorted(r.__all__) == sorted([*r._WHERE, "RegimeHistory"])
    assert all(getattr(r, n) is not None for n in r.__all__)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = r.nope
