"""Scoring a detector against ground-truth labels.

* adjusted Rand index of the per-window labels (scikit-learn);
* change-point precision / recall / F1 within a tolerance margin, each true change matched
  at most once (as ruptures' ``precision_recall`` and TCPDBench);
* detection delay: windows from a true change to the confirmation of its matched change;
* false changes per hour on a trace that has a single regime.

>>> change_points([0, 0, 1, 1, 2]).tolist()
[2, 4]
>>> precision_recall_f1([100, 200], [103, 150, 199], margin=5)
(0.6666666666666666, 1.0, 0.8)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from sklearn.metrics import adjusted_rand_score

from regimetune.models import InputError, RegimeChange, WindowFrame
from regimetune.models.regimes import RegimeHistory


def change_points(labels: npt.ArrayLike) -> np.ndarray:
    """Positions ``i`` where ``labels[i] != labels[i - 1]``."""
    a = np.asarray(labels)
    return np.flatnonzero(a[1:] != a[:-1]) + 1


def ari(truth: npt.ArrayLike, predicted: npt.ArrayLike) -> float:
    """Adjusted Rand index over the windows whose true label is known (``>= 0``)."""
    t = np.asarray(truth)
    p = np.asarray(predicted)
    if t.shape != p.shape:
        raise InputError(f"label arrays differ in shape: {t.shape} vs {p.shape}")
    keep = t >= 0
    if not keep.any():
        raise InputError("no window has a ground-truth label")
    return float(adjusted_rand_score(t[keep], p[keep]))


def _match(truth: np.ndarray, predicted: np.ndarray, margin: float) -> list[tuple[int, int]]:
    """Maximum one-to-one matching of sorted points within ``margin`` (two pointers: on a
    line, matching the earliest compatible pair is optimal)."""
    pairs = []
    i = j = 0
    while i < len(truth) and j < len(predicted):
        if abs(predicted[j] - truth[i]) <= margin:
            pairs.append((i, j))
            i += 1
            j += 1
        elif predicted[j] < truth[i]:
            j += 1
        else:
            i += 1
    return pairs


def precision_recall_f1(
    truth: Sequence[float] | np.ndarray, predicted: Sequence[float] | np.ndarray, *, margin: float
) -> tuple[float, float, float]:
    """Precision, recall and F1 of predicted change points against true ones; a prediction
    within ``margin`` of a true change counts once. No true and no predicted change scores 1."""
    if margin < 0:
        raise InputError("margin must be >= 0")
    t = np.sort(np.asarray(truth, dtype=np.float64))
    p = np.sort(np.asarray(predicted, dtype=np.float64))
    if len(t) == 0 and len(p) == 0:
        return 1.0, 1.0, 1.0
    tp = len(_match(t, p, margin))
    precision = tp / len(p) if len(p) else 1.0
    recall = tp / len(t) if len(t) else 1.0
    f1 = 0.0 if tp == 0 else 2 * precision * recall / (precision + recall)
    return precision, recall, f1


def detection_delays(
    truth: Sequence[int] | np.ndarray, changes: Sequence[RegimeChange], *, margin: float
) -> list[int]:
    """For each true change matched (by ``at_window``) to a confirmed change, the windows
    from the true change to the confirmation."""
    real = sorted((c for c in changes if c.from_id is not None), key=lambda c: c.at_window)
    t = np.sort(np.asarray(truth, dtype=np.int64))
    p = np.array([c.at_window for c in real], dtype=np.int64)
    return [int(real[j].confirmed_window - t[i]) for i, j in _match(t, p, margin)]


def false_changes_per_hour(changes: Sequence[RegimeChange], duration_s: float) -> float:
    """Confirmed changes (the founding of the first regime excepted) per hour, for a trace
    known to hold a single regime."""
    if not duration_s > 0:
        raise InputError("duration must be positive")
    n = sum(1 for c in changes if c.from_id is not None)
    return n * 3600.0 / duration_s


@dataclass(frozen=True, slots=True)
class DetectionScore:
    """Scores of one history against the frame's ``label`` column."""

    ari: float
    precision: float
    recall: float
    f1: float
    median_delay: float
    n_true: int
    n_predicted: int
    margin: float


def score(history: RegimeHistory, frame: WindowFrame, *, tolerance: float = 0.02) -> DetectionScore:
    """Score ``history`` (from a fresh detector over ``frame``) against the frame's labels;
    the change-point margin is ``tolerance`` of the trace length, at least one window."""
    truth = frame["label"]
    if len(truth) != len(history.labels):
        raise InputError("history and frame differ in length")
    margin = max(1.0, tolerance * len(truth))
    true_cp = change_points(truth)
    idx0 = int(frame["index"][0])
    pred = [c.at_window - idx0 for c in history.changes if c.from_id is not None]
    p, r, f1 = precision_recall_f1(true_cp, pred, margin=margin)
    delays = detection_delays(
        true_cp + idx0, [c for c in history.changes if c.from_id is not None], margin=margin
    )
    return DetectionScore(
        ari=ari(truth, history.labels),
        precision=p,
        recall=r,
        f1=f1,
        median_delay=float(np.median(delays)) if delays else float("nan"),
        n_true=len(true_cp),
        n_predicted=len(pred),
        margin=margin,
    )


__all__ = [
    "DetectionScore",
    "ari",
    "change_points",
    "detection_delays",
    "false_changes_per_hour",
    "precision_recall_f1",
    "score",
]
