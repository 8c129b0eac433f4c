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

import warnings
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
    return np.sign(_nanmean(transition[-edge:]) - _nanmean(transition[:edge]))


def _trends(run: np.ndarray, went: np.ndarray, *, block: int, p: float) -> bool:
    """Whether ``run``'s block means trend, in some feature, the way ``went`` says."""
    n_blocks = len(run) // block
    if n_blocks < 2:  # no order to test
        return False
    d = run.shape[1]
    means = _block_means(run, block)
    order = np.arange(n_blocks)
    for j in range(d):
        if went[j] == 0:
            continue
        tau, pvalue = kendalltau(order, means[:, j])
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
    steady = [(a, b) for a, b in zip(starts, ends, strict=True) if out[a] not in transitions]
    wander, df = _level_wander(x, steady, block)
    if df < 1:  # no steady run of two blocks: the wander is unknown
        return out
    d = x.shape[1]
    q = student_t.ppf(1.0 - p / (2 * d), df)
    for i in range(1, len(starts)):
        start, end = starts[i], ends[i]
        before = out[start - 1]
        if before in transitions or out[start] in transitions:
            continue
        first = start - 1  # the whole run before, with any run already merged into it
        while first > 0 and out[first - 1] == before:
            first -= 1
        diff = _nanmean(x[first:start]) - _nanmean(x[start:end])
        se = np.sqrt(wander * block * (1.0 / (start - first) + 1.0 / (end - start)))
        if not (np.abs(diff) > q * se).any():  # a feature without values (NaN) differs in nothing
            out[start:end] = before
    return out


def _level_wander(x: np.ndarray, steady: list[tuple[int, int]], block: int) -> tuple[np.ndarray, int]:
    """The variance of block means about their run's mean, per feature, pooled over the
    ``steady`` runs ``(start, end)`` of two blocks or more, and its degrees of freedom."""
    squares = np.zeros(x.shape[1])
    df = 0
    for start, end in steady:
        means = _block_means(x[start:end], block)
        if len(means) < 2:
            continue
        squares += np.nansum((means - _nanmean(means)) ** 2, axis=0)
        df += len(means) - 1
    return squares / max(df, 1), df


def _block_means(run: np.ndarray, block: int) -> np.ndarray:
    """The means of ``run``'s whole blocks of ``block`` windows, ``(blocks, features)``
    (NaN where a feature has no value in a block)."""
    n_blocks = len(run) // block
    return _nanmean(run[: n_blocks * block].reshape(n_blocks, block, run.shape[1]), axis=-2)


def _nanmean(a: np.ndarray, axis: int = 0) -> np.ndarray:
    """The mean over ``axis`` of the values that are there (NaN where none is: a trace's
    first window has no keyspace growth yet)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # "mean of empty slice"
        return np.nanmean(a, axis=axis)


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
