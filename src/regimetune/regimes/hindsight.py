"""What a whole recording shows that the online pass could not know: a slow tail.

Online, a transition (a decline) ends once a level holds ``min_regime_s`` without a slope
the change test can see. A decline that ends in a slow drift (most of the drop in minutes,
then a few percent an hour for hours) looks level over any ``min_regime_s``, so a steady
regime is founded where the fast part ends (at short windows, sometimes two, one after
the other), and it keeps moving. Over their whole life the drift shows: read in blocks of
``trend_block_s``, their level trends the way the transition went. In hindsight
(:meth:`~regimetune.regimes.OnlineRegimeDetector.detect`, a replayed recording) the
shortest chain of steady runs after a transition that trends its way is the transition's
tail, and its windows take the transition's id; the live labels (``online_labels``) and
the service's ``update`` are unchanged. The recording's last run is never judged: it may
hold the drift and the level it settled at, which nothing after it tells apart.

The trend test is Kendall's tau of the block means against time, per feature, at
``match_p`` shared among the features (Bonferroni): a rank test, so one block that still
holds the end of the decline does not make a plateau a drift, and a level that wanders
without a direction is no trend.

>>> import numpy as np
>>> drift = np.r_[np.linspace(2.0, 1.0, 30), np.linspace(1.0, 0.8, 120), np.full(60, 0.8)]
>>> labels = np.r_[np.zeros(30, int), np.ones(120, int), np.full(60, 2)]
>>> slow_tails(labels, drift[:, None], transitions={0}, block=10, p=0.01).tolist()[145:155]
[0, 0, 0, 0, 0, 2, 2, 2, 2, 2]
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np
from scipy.stats import kendalltau


def slow_tails(
    labels: np.ndarray, x: np.ndarray, *, transitions: Collection[int], block: int, p: float
) -> np.ndarray:
    """``labels`` with each transition's slow tail (see the module) relabelled as the
    transition; ``x`` holds the features of each window, ``block`` is the block length
    in windows."""
    out = labels.copy()
    starts = np.flatnonzero(np.r_[True, labels[1:] != labels[:-1]])
    ends = np.r_[starts[1:], len(labels)]
    last = len(starts) - 1  # the last run has not ended: it may still level off
    i = 1
    while i < last:
        prev_start, start = starts[i - 1], starts[i]
        prev = out[prev_start]  # a tail already merged carries its transition's id on
        if prev not in transitions:
            i += 1
            continue
        went = _direction(x[prev_start:start], block)
        k = i
        # the shortest chain of steady runs from here that trends the transition's way
        while k < last and out[starts[k]] not in transitions:
            if _trends(x[start : ends[k]], went, block=block, p=p):
                out[start : ends[k]] = prev
                i = k
                break
            k += 1
        i += 1
    return out


def _direction(transition: np.ndarray, block: int) -> np.ndarray:
    """The sign of each feature's move over ``transition``: its last block's mean against
    its first's."""
    edge = min(len(transition), block)
    return np.sign(transition[-edge:].mean(axis=0) - transition[:edge].mean(axis=0))


def _trends(run: np.ndarray, went: np.ndarray, *, block: int, p: float) -> bool:
    """Whether ``run``'s block means trend, in some feature, the way ``went`` says."""
    n_blocks = len(run) // block
    if n_blocks < 2:  # no order to test
        return False
    d = run.shape[1]
    means = run[: n_blocks * block].reshape(n_blocks, block, d).mean(axis=1)
    order = np.arange(n_blocks)
    for j in range(d):
        if went[j] == 0:
            continue
        tau, pvalue = kendalltau(order, means[:, j])
        if np.sign(tau) == went[j] and pvalue < p / d:
            return True
    return False


def merged_changes(changes: np.ndarray, before: np.ndarray, after: np.ndarray, t0: int) -> np.ndarray:
    """The change rows ``(from, to, at, confirmed)`` (``at`` counted from ``t0``) that
    still hold once ``before``'s labels became ``after``'s: a change into a merged tail
    is gone, and the change out of it leaves the transition."""
    keep = []
    for frm, to, at, conf in changes.tolist():
        i = at - t0
        if 0 < i < len(after) and (before[i] != after[i] or before[i - 1] != after[i - 1]):
            if after[i] == after[i - 1]:
                continue  # into a tail that is now its transition's
            frm = int(after[i - 1])
        keep.append((frm, to, at, conf))
    return np.asarray(keep, dtype=changes.dtype).reshape(-1, 4)


__all__ = ["merged_changes", "slow_tails"]
