from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from regimetune.models import InputError
from regimetune.regimes import FeatureExtractor, OnlineRegimeDetector, ari
from regimetune.regimes.features import FEATURES
from regimetune.regimes.synthetic import stationary_frame

from .helpers import empty_frame, steps


def test_abrupt_regimes_are_found_with_short_delay() -> None:
    frame = steps((0, 300), (2, 400), (3, 500), seed=1)
    h = OnlineRegimeDetector().detect(frame)
    assert ari(frame["label"], h.labels) > 0.97
    assert [s.regime_id for s in h.segments] == [0, 1, 2]
    real = [c for c in h.changes if c.from_id is not None]
    assert [c.at_window for c in real] == pytest.approx([300, 700], abs=2)
    assert all(c.delay_windows <= 2 for c in real)  # dwell (3) windows show the step


def test_a_returning_regime_gets_its_old_id_back() -> None:
    frame = steps((0, 200), (3, 200), (0, 200), (3, 200), seed=2)
    h = OnlineRegimeDetector().detect(frame)
    assert [s.regime_id for s in h.segments] == [0, 1, 0, 1]
    assert len(h.regimes) == 2


def test_ids_stay_stable_while_centroids_drift() -> None:
    # a plateau whose read rate doubles slowly (0.7 feature units), the flash crowd, then the
    # drifted plateau again: it keeps id 0, and no extra regime appears
    base = steps((3, 1500), (0, 200), (3, 200), seed=3)
    cols = {k: v.copy() for k, v in base.columns.items()}
    factor = np.r_[np.linspace(1.0, 2.0, 1500), np.ones(200), np.full(200, 2.0)]
    cols["reads"] = (cols["reads"] * factor).astype(np.int64)
    frame = type(base)(columns=cols, bucket_load=base.bucket_load, bucket_bytes=base.bucket_bytes)
    det = OnlineRegimeDetector()
    det.detect(frame.slice(0, 100))
    before = np.array(det.regimes[0].centroid)
    h = det.detect(frame.slice(100, len(frame)))
    after = np.array(det.regimes[0].centroid)
    assert [s.regime_id for s in h.segments] == [0, 1, 0]
    assert len(det.regimes) == 2
    reads = list(FEATURES).index("log_reads")
    assert after[reads] - before[reads] > 0.3  # the centroid moved, the id did not


def test_no_flapping_on_a_noisy_stationary_trace() -> None:
    for seed in range(3):
        frame = stationary_frame(3600, seed=seed, noise=0.05)
        h = OnlineRegimeDetector().detect(frame)
        assert [c.from_id for c in h.changes] == [None]
        assert set(h.labels.tolist()) == {0}


def test_hysteresis_and_dwell_suppress_short_excursions() -> None:
    # two-window bursts of another regime are noise, not a change
    parts = []
    for _ in range(10):
        parts += [(3, 60), (0, 2)]
    frame = steps(*parts, seed=6)
    h = OnlineRegimeDetector(dwell=3).detect(frame)
    assert [c.from_id for c in h.changes] == [None]


def test_detect_equals_update_window_by_window() -> None:
    frame = steps((0, 120), (2, 150), (0, 60), (3, 120), seed=7)
    batch = OnlineRegimeDetector().detect(frame)
    online = OnlineRegimeDetector()
    changes = [c for c in (online.update(w) for w in frame.records()) if c is not None]
    assert changes == batch.changes
    assert online.current == int(batch.labels[-1])


def test_save_and_load_give_identical_predictions(tmp_path: Path) -> None:
    frame = steps((0, 150), (2, 150), (3, 150), (2, 150), seed=8)
    first, second = frame.slice(0, 320), frame.slice(320, len(frame))
    whole = OnlineRegimeDetector()
    whole.detect(first)
    path = tmp_path / "det.json"
    whole.save(path)
    json.loads(path.read_text())  # plain JSON, no pickle
    restored = OnlineRegimeDetector.load(path)
    a, b = whole.detect(second), restored.detect(second)
    np.testing.assert_array_equal(a.labels, b.labels)
    assert a.changes == b.changes
    x = dict(zip(FEATURES, np.linspace(1, 7, len(FEATURES)).tolist(), strict=True))
    assert whole.predict_one(x) == restored.predict_one(x)
    assert whole.to_state() == restored.to_state()


def test_learn_one_and_predict_one_follow_the_river_api() -> None:
    det = OnlineRegimeDetector(dwell=2)
    low = dict.fromkeys(FEATURES, 1.0)
    high = dict.fromkeys(FEATURES, 5.0)
    assert det.predict_one(low) == 0
    for _ in range(det.warmup + 5):
        det.learn_one(low)
    for _ in range(5):
        det.learn_one(high)
    assert det.current == 1
    assert det.predict_one(low) == 0 and det.predict_one(high) == 1
    with pytest.raises(InputError, match="finite"):
        det.learn_one({**low, "log_reads": float("nan")})


def test_k_caps_the_number_of_regimes() -> None:
    frame = steps((0, 100), (2, 100), (3, 100), seed=9)
    h = OnlineRegimeDetector(k=2).detect(frame)
    assert len(h.regimes) == 2


@pytest.mark.parametrize(
    ("kwargs", "frame_fn", "match"),
    [
        ({}, empty_frame, "no windows"),
        ({}, lambda: steps((0, 1)), "single window"),
        ({"k": 50}, lambda: steps((0, 20)), "cannot be found"),
        ({"dwell": 0}, lambda: steps((0, 20)), "dwell"),
        ({"radius": -1.0}, lambda: steps((0, 20)), "radius"),
        ({"alpha": 2.0}, lambda: steps((0, 20)), "alpha"),
    ],
)
def test_bad_input_gives_a_clear_error(kwargs: dict, frame_fn, match: str) -> None:
    with pytest.raises(InputError, match=match):
        OnlineRegimeDetector(**kwargs).detect(frame_fn())


def test_bad_state_is_refused(tmp_path: Path) -> None:
    state = OnlineRegimeDetector().to_state()
    with pytest.raises(InputError, match="format"):
        OnlineRegimeDetector.from_state({**state, "format_version": 99})
    broken = json.loads(json.dumps(state))
    broken["kernel"]["centroids"] = [[1.0]]
    with pytest.raises(InputError, match="shape"):
        OnlineRegimeDetector.from_state(broken)
    path = tmp_path / "x.json"
    path.write_text("{not json")
    with pytest.raises(InputError, match="JSON"):
        OnlineRegimeDetector.load(path)


def test_a_new_regime_is_centred_on_its_own_windows_not_the_step() -> None:
    # a step between the two plateaus with two windows that straddle it (half of each
    # rate): the regime founded there is, after the change, the mean of its own windows
    base = steps((2, 300), (3, 60), seed=4, noise=0.01)
    cols = {k: v.copy() for k, v in base.columns.items()}
    for c in ("reads", "writes"):
        cols[c][300:302] = (cols[c][298:300] + cols[c][302:304]) // 2
    frame = type(base)(columns=cols, bucket_load=base.bucket_load, bucket_bytes=base.bucket_bytes)
    det = OnlineRegimeDetector()
    h = det.detect(frame)
    assert [s.regime_id for s in h.segments] == [0, 1]
    at = h.changes[-1].at_window
    x = FeatureExtractor(lag=det.lag, features=det.features).transform(frame)
    reads = det.feature_names.index("log_reads")
    own = x[at + det.dwell :, reads].mean()
    assert det.regimes[1].centroid[reads] == pytest.approx(own, abs=1e-9)
    assert abs(x[300:302, reads].mean() - own) > 0.1  # the straddling windows sit well apart
