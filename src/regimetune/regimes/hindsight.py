"""What a whole recording shows that the online pass could not know: a transition's slow
tail, and how far a level wanders.

**Slow tails.** Online, a transition (a decline) ends once a level holds ``min_regime_s``
without a slope the change test can see. A decline that ends in a slow drift (most of the
drop in minutes, then a few percent an hour for hours) looks level over any
``min_regime_s``, so a steady regime is founded where the fast part ends (at short windows,
sometimes two, one after the other), and it keeps moving. Over their whole life the drift
shows: read in blocks of ``trend_block_s``, their level trends the way the transition went.
In hindsight (:meth:`~regimetune.regimes.OnlineRegimeDetector.detect`, a replayed recording)
the shortest chain of steady runs after a transition that trends its way is the
transition's tail, and its windows take the transition's id. The recording's last run is
never judged: it may hold the drift and the level it settled at, which nothing after it
tells apart. The trend test is Kendall's tau of the block means against time, per feature,
at ``match_p`` shared among the features (Bonferroni): a rank test, so one block that still
holds the end of the decline does not make a plateau a drift, and a level that wanders
without a direction is no trend.

**Steps within the wander.** Online, a young regime's level is judged before the detector
has seen how far a level wanders (the spread of a level is learnt from whole
``min_regime_s`` blocks of a regime), so early in a recording a step of a few standard
errors of a window mean can found a regime when the level later wanders as far as that
from block to block. Over the whole recording the wander is known: the variance of
``trend_block_s`` block means about their steady run's mean, pooled over the steady runs.
A steady run whose mean does not differ from the steady run just before it by more than
that wander allows (a two-sided t test per feature, at ``match_p`` shared among the
features) is the same level, and takes its id.

Both run after the fact only: the live labels (``online_labels``) and the service's
``update`` are unchanged.

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
from scipy.stats import t as student_t


def slow_tails(
    labels: np.ndarray, x: np.ndarray, *, transitions: Collection[int], block: int, p: float
) -> np.ndarray:
    """``labels`` with each transition's slow tail (see the module) relabelled as the
    transition; ``x`` holds the features of each window, ``block`` is the block length
    in windows."""
    out = labels.copy()
    starts, ends = _runs(labels)
    means = _Means(x)
    last = len(starts) - 1  # the last run has not ended: it may still level off
    i = 1
    while i < last:
        prev_start, start = starts[i - 1], starts[i]
        prev = out[prev_start]  # a tail already merged carries its transition's id on
        if prev not in transitions:
            i += 1
            continue
        went = _direction(means, prev_start, start, block)
        k = i
        # the shortest chain of steady runs from here that trends the transition's way
        while k < last and out[starts[k]] not in transitions:
            if _trends(means.blocks(start, ends[k], block), went, p=p):
                out[start : ends[k]] = prev
                i = k
                break
            k += 1
        i += 1
    return out


def _direction(means: _Means, start: int, end: int, block: int) -> np.ndarray:
    """The sign of each feature's move over the transition ``[start, end)``: its last
    block's mean against its first's."""
    edge = min(end - start, block)
    return np.sign(means.of(end - edge, end) - means.of(start, start + edge))


def _trends(blocks: np.ndarray, went: np.ndarray, *, p: float) -> bool:
    """Whether the block means ``blocks`` (blocks x features) trend, in some feature, the
    way ``went`` says."""
    if len(blocks) < 2:  # no order to test
        return False
    d = blocks.shape[1]
    order = np.arange(len(blocks))
    for j in range(d):
        if went[j] == 0:
            continue
        tau, pvalue = kendalltau(order, blocks[:, j])
        if np.sign(tau) == went[j] and pvalue < p / d:
            return True
    return False


def steps_within_wander(
    labels: np.ndarray, x: np.ndarray, *, transitions: Collection[int], block: int, p: float
) -> np.ndarray:
    """``labels`` with each steady run that is the same level as the steady run just before
    it (see the module) relabelled as that run; ``x`` holds the features of each window,
    ``block`` is the block length in windows."""
    out = labels.copy()
    starts, ends = _runs(out)
    means = _Means(x)
    steady = [(a, b) for a, b in zip(starts, ends, strict=True) if out[a] not in transitions]
    wander, df = _level_wander(means, steady, block)
    if df < 1:  # no steady run of two blocks: the wander is unknown
        return out
    d = x.shape[1]
    q = student_t.ppf(1.0 - p / (2 * d), df)
    first = 0  # where the run before starts, with any run already merged into it
    for start, end in zip(starts[1:], ends[1:], strict=True):
        before = out[start - 1]
        if before not in transitions and out[start] not in transitions:
            diff = means.of(first, start) - means.of(start, end)
            se = np.sqrt(wander * block * (1.0 / (start - first) + 1.0 / (end - start)))
            if not (np.abs(diff) > q * se).any():  # a feature without values (NaN) differs in nothing
                out[start:end] = before
                continue
        first = start
    return out


def _level_wander(means: _Means, steady: list[tuple[int, int]], block: int) -> tuple[np.ndarray, int]:
    """The variance of block means about their run's mean, per feature, pooled over the
    ``steady`` runs ``(start, end)`` of two blocks or more, and its degrees of freedom."""
    squares = 0.0
    df = 0
    for start, end in steady:
        blocks = means.blocks(start, end, block)
        if len(blocks) < 2:
            continue
        squares = squares + np.nansum((blocks - blocks.mean(axis=0)) ** 2, axis=0)
        df += len(blocks) - 1
    return np.asarray(squares) / max(df, 1), df


class _Means:
    """The mean of the values present over any stretch of windows, from cumulative sums (a
    feature may have no value in a window: a trace's first has no keyspace growth yet)."""

    def __init__(self, x: np.ndarray) -> None:
        present = ~np.isnan(x)
        zero = np.zeros((1, x.shape[1]))
        self._sum = np.vstack([zero, np.cumsum(np.where(present, x, 0.0), axis=0)])
        self._count = np.vstack([zero, np.cumsum(present, axis=0)])

    def between(self, edges: np.ndarray) -> np.ndarray:
        """The means of the stretches between consecutive window ``edges``, one row each
        (NaN where a feature has no value in one)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.diff(self._sum[edges], axis=0) / np.diff(self._count[edges], axis=0)

    def of(self, start: int, end: int) -> np.ndarray:
        """The mean of windows ``[start, end)``."""
        return self.between(np.array([start, end]))[0]

    def blocks(self, start: int, end: int, block: int) -> np.ndarray:
        """The means of the whole blocks of ``block`` windows from ``start`` before ``end``."""
        return self.between(start + block * np.arange((end - start) // block + 1))


def _runs(labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The first window of each run of equal labels, and the window after its last."""
    starts = np.flatnonzero(np.r_[True, labels[1:] != labels[:-1]])
    return starts, np.r_[starts[1:], len(labels)]


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


__all__ = ["merged_changes", "slow_tails", "steps_within_wander"]
