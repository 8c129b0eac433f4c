"""The contract every regime detector keeps, and a conformance suite run against each one,
river-style (river's own ``check_estimator`` feeds a clusterer no data; these checks do).

A detector learns trace windows one at a time (:meth:`Detector.update`, what the service
calls) or a whole frame at once (``detect``), rows of a series (``learn_one``), and saves
everything it learnt as JSON (``to_state``/``from_state``). The checks replay a real window
stream (a generated realistic run) and a real labelled series (river's UK coal employment,
from TCPD) and assert what a user relies on:

* the batch replay and the per-window calls give the same labels and changes;
* a clone (same parameters, nothing learnt) gives the same labels;
* a detector saved mid-stream (pickle, or ``to_state`` through JSON) continues exactly as
  the original;
* ``predict_one`` learns nothing.
"""

from __future__ import annotations

import copy
import functools
import json
import pickle
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol, runtime_checkable

import numpy as np

from regimetune.models import RegimeChange, WindowFrame, WindowStats
from regimetune.models.regimes import RegimeHistory


@runtime_checkable
class Detector(Protocol):
    """What the service, the tuner and the CLI need of a regime detector."""

    @property
    def current(self) -> int | None: ...

    def update(self, window: WindowStats) -> RegimeChange | None: ...

    def detect(self, frame: WindowFrame) -> RegimeHistory: ...

    def learn_one(self, x: Mapping[str, float]) -> None: ...

    def predict_one(self, x: Mapping[str, float]) -> int: ...

    def to_state(self) -> dict[str, Any]: ...

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> Detector: ...

    def clone(self, new_params: dict[str, Any] | None = None) -> Detector: ...


@functools.cache
def window_stream(seed: int = 3) -> WindowFrame:
    """A realistic generated run (the ``parsplice`` preset, 1 h, 64 workers) in 10-s windows."""
    from regimetune.collectors import GeneratorConfig, generate, window_frame

    cfg = GeneratorConfig(duration_s=3600.0, workers=64, seed=seed)
    return window_frame(generate(cfg), window_s=10.0)


@functools.cache
def labelled_series() -> np.ndarray:
    """River's UK coal employment series (TCPD), one column."""
    from river.drift.datasets import UKCoalEmploy

    return np.array([[float(y)] for _, y in UKCoalEmploy()])


def _changes(h: RegimeHistory) -> list[tuple[int | None, int, int]]:
    return [(c.from_id, c.to_id, c.at_window) for c in h.changes]


def check_update_matches_detect(det: Detector) -> None:
    frame = window_stream()
    # update() takes the window length from the first window unless told (the service tells)
    det = det.clone({"window_s": getattr(det, "window_s", None) or float(np.median(frame["length"]))})
    batch = det.clone().detect(frame)
    online = det.clone()
    labels = []
    for w in frame.records():
        online.update(w)
        labels.append(online.current if online.current is not None else -1)
    assert batch.online_labels is not None
    assert labels == batch.online_labels.tolist(), "update() and detect() disagree"


def check_clone_gives_same_labels(det: Detector) -> None:
    frame = window_stream()
    a, b = det.clone().detect(frame), det.clone().detect(frame)
    assert a.labels.tolist() == b.labels.tolist()
    assert _changes(a) == _changes(b)


def _resume(det: Detector, save: Callable[[Detector], Detector]) -> None:
    frame = window_stream()
    half = len(frame) // 2
    whole = det.clone()
    whole.detect(frame.slice(0, half))
    restored = save(whole)
    a, b = whole.detect(frame.slice(half, len(frame))), restored.detect(frame.slice(half, len(frame)))
    assert a.labels.tolist() == b.labels.tolist(), "a restored detector continued differently"
    assert _changes(a) == _changes(b)


def check_pickle_round_trip(det: Detector) -> None:
    _resume(det, lambda d: pickle.loads(pickle.dumps(d)))


def check_state_round_trip(det: Detector) -> None:
    _resume(det, lambda d: type(d).from_state(json.loads(json.dumps(d.to_state()))))


def check_predict_one_learns_nothing(det: Detector) -> None:
    d = det.clone()
    x = labelled_series()
    for v in x[:60]:
        d.learn_one({"employment": float(v[0])})
    before = json.dumps(d.to_state())
    for v in x[60:80]:
        d.predict_one({"employment": float(v[0])})
    assert json.dumps(d.to_state()) == before, "predict_one changed the detector"


def check_series_rows_are_windows(det: Detector) -> None:
    d = det.clone()
    x = labelled_series()
    for v in x:
        d.learn_one({"employment": float(v[0])})
    again = det.clone()
    for v in x:
        again.learn_one({"employment": float(v[0])})
    assert d.current == again.current
    assert json.dumps(d.to_state()) == json.dumps(again.to_state())


CHECKS: tuple[Callable[[Detector], None], ...] = (
    check_update_matches_detect,
    check_clone_gives_same_labels,
    check_pickle_round_trip,
    check_state_round_trip,
    check_predict_one_learns_nothing,
    check_series_rows_are_windows,
)


def yield_checks(det: Detector) -> Iterator[Callable[[], None]]:
    """Each check bound to a fresh copy of ``det``."""
    for check in CHECKS:
        yield functools.partial(check, copy.deepcopy(det))


def check_detector(det: Detector) -> None:
    """Run every check on ``det`` (raises ``AssertionError`` at the first that fails)."""
    assert isinstance(det, Detector), f"{type(det).__name__} does not implement the Detector protocol"
    for check in yield_checks(det):
        check()


__all__ = ["CHECKS", "Detector", "check_detector", "labelled_series", "window_stream", "yield_checks"]
