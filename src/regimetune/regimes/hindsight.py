"""What a whole recording shows that the online pass could not know: a transition's slow
tail (in the last run too), where its line (or its slow drift) turned level, and how far a
level wanders.

**Slow tails.** Online, a transition (a decline) ends once a level holds ``min_regime_s``
without a slope the change test can see. A decline that ends in a slow drift (most of the
drop in minutes, then a few percent an hour for hours) looks level over any
``min_regime_s``, so a steady regime is founded where the fast part ends (at short windows,
sometimes two, one after the other), and it keeps moving. Over their whole life the drift
shows: read in blocks of ``trend_block_s``, their level trends the way the transition went.
In hindsight (:meth:`~regimetune.regimes.OnlineRegimeDetector.detect`, a replayed recording)
the shortest chain of steady runs after a transition that trends its way is the
transition's tail, and its windows take the transition's id. The trend test is Kendall's
tau of the block means against time, per feature, at ``match_p`` shared among the features
(Bonferroni): a rank test, so one block that still holds the end of the decline does not
make a plateau a drift, and a level that wanders without a direction is no trend.

**The last run's drift.** The recording's last run is not judged whole: when the online
pass never saw the drift end, it holds the drift and the level it settled at, and nothing
after it tells them apart. Its shape does: a line that moves the way the transition went,
then a level (a hinge). The hinge is fitted by least squares on the features whose own best
hinge has a slope that way and fits better than a level (a likelihood ratio at ``match_p``,
shared), each with its own residual variance; it stands if the level after it has held
``min_regime_s``, the part before it trends by the test above, and a line fits that part
better than two levels (else it is a step the online pass missed, not a drift). The part
before the hinge takes the transition's id, and the change into the level is dated at the
hinge, known at the recording's last window.

**A transition's end.** Online, a transition ends where the change test's next segment
starts, which can be minutes after the line turned level (a line segment absorbs a few
level windows before it costs more than a change). Over the transition and the steady run
after it, the same hinge tells where the line turns level. It is read on the features
whose noise the detector reads as white (for AR(1) noise least squares is not the
likelihood), and the end moves only where a likelihood ratio at ``match_p`` prefers the
hinge to the online date: the hinge's own precision is a few minutes, so a date it cannot
tell from its own is left alone. It moves by at most ``min_regime_s``, with
``min_regime_s`` of level after it.

**A slow drift's end.** A transition that falls fast, then drifts slowly (most of the drop
in minutes, then a few percent an hour), is often settled online long before the drift
ends: the drift looks level over ``min_regime_s``. One hinge over it all is pulled off by
the fast fall (a line through both turns where neither does). A continuous fit with a bend
(a steep line, from a block boundary inside the transition a slower one, then level) finds
the drift's end anywhere in the steady run after it. A feature may step where the drift
turns level, if its step pays its way (a phase's end can change the mix: where the reads
per write change, the write rate steps up while the read rate only bends, and a fit that
must stay continuous dates that turn off). The end moves there, however far,
only where a likelihood ratio prefers it to the online date at ``match_p`` shared among
all the windows searched (the best of a thousand turns beats any one by chance alone), and
with ``min_regime_s`` of transition before it and of level after it (both end passes keep
that); on the same features as the transition's end.

**A slow drift cut in two.** Online, a drift can look level twice: a steady regime is
founded where the fast part ends, and another where the drift has moved a level's worth,
with the drift's end inside the second. Neither run trends on its own (a chain of them is
judged by the slow-tail rule above only when it does), and a steady run is not a
transition's end to move. The continuous fit of the slow drift's end tells them apart from
two plateaus with a step between them: over the block means of the transition and both
runs, one steep line, a slower one from any block boundary before the second run, then
level from a block inside the second, against the same fit over the transition and the
first run and the second at its own level (a step). Block means vary about their level by
the level's wander (the variance the wander pass below pools over the steady runs), so
that is the variance both fits are judged in: a line that is not quite straight over two
hours of windows is no evidence of a step, a plateau's step is dozens of wanders. Where
the step does not explain the runs better by a chi-square at ``match_p`` (one degree of
freedom per feature read), the part before the turn trends the transition's way (not a
rebound), and ``min_regime_s`` holds on both sides of the turn, the transition runs on to
the turn; the slow drift's end pass then dates it to the window. On the features the
transition's end is read on.

**Steps within the wander.** Online, a young regime's level is judged before the detector
has seen how far a level wanders (the spread of a level is learnt from whole
``min_regime_s`` blocks of a regime), so early in a recording a step of a few standard
errors of a window mean can found a regime when the level later wanders as far as that
from block to block. Over the whole recording the wander is known: the variance of
``trend_block_s`` block means about their steady run's mean, pooled over the steady runs.
A steady run whose mean does not differ from the steady run just before it by more than
that wander allows (a two-sided t test per feature, at ``match_p`` shared among the
features) is the same level, and takes its id. So is a transition that came back to the
regime it left (``min_regime_s`` without a level holding, then the same level again), or
to a steady run the same level as the run before it by that test (a new id founded live,
before the wander was known): if its mean is within that wander of the run before, it
never left the level.

**Ramps.** A transition is an excursion that lasted ``min_regime_s`` without a level
holding; the level that held at last is dated back to where it began, which can leave the
transition before it a few windows long (at a recording's start, while the keyspace growth
settles). By the online rule, an excursion shorter than ``min_regime_s`` before a level is a
ramp and belongs to the level it led to; so, in hindsight, is such a transition.

**A recording that starts in a drift.** A fall shorter than ``min_regime_s`` at a
recording's very start is a ramp into the first level, and a slow drift after it is that
level following drift: online, no transition is founded, and a recording that falls, drifts
for hours and settles is one regime. Where the online pass saw the whole recording as one
regime, the bent hinge of the slow drift's end (a steep line, a slower one, then level) is
fitted from the first window; the part before its turn is a transition of its own (a new
id) if ``min_regime_s`` holds on both sides of the turn and, on some feature the hinge was
read on, the block means before the turn trend the way the run went (Kendall's tau at
``match_p``, shared) and have moved farther from the first block to the level after the
turn than the level's own wander would carry them over as many blocks, read as a random
walk (a chi-square at ``match_p``, shared; its step from the level's consecutive block
means). A level that wanders moves a little over hours; a drift moves many times that.

All run after the fact only, in this order: slow tails, the last run's drift, steps within
the wander, transition ends, slow drifts cut in two, slow drifts' ends, ramps, a start in a
drift. The live labels (``online_labels``) and the service's ``update`` are unchanged.

>>> import numpy as np
>>> drift = np.r_[np.linspace(2.0, 1.0, 30), np.linspace(1.0, 0.8, 120), np.full(60, 0.8)]
>>> labels = np.r_[np.zeros(30, int), np.ones(120, int), np.full(60, 2)]
>>> slow_tails(labels, drift[:, None], transitions={0}, block=10, p=0.01).tolist()[145:155]
[0, 0, 0, 0, 0, 2, 2, 2, 2, 2]
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from typing import NamedTuple

import numpy as np
from scipy.stats import chi2, kendalltau
from scipy.stats import t as student_t


class Reading(NamedTuple):
    """What every pass reads a recording by (the detector's, in windows)."""

    transitions: Collection[int]  # the ids of the transitions
    block: int  # windows of ``trend_block_s``
    p: float  # ``match_p``
    level: int  # windows of ``min_regime_s``
    white: np.ndarray  # per feature: is its noise read as white (least squares fits it)?


def in_hindsight(labels: np.ndarray, x: np.ndarray, r: Reading) -> np.ndarray:
    """``labels`` after every pass but the start drift's (which founds a regime, so the
    detector runs it), in the module's order."""
    after = slow_tails(labels, x, transitions=r.transitions, block=r.block, p=r.p)
    after = settled_tail(after, x, transitions=r.transitions, block=r.block, p=r.p, level=r.level)
    after = steps_within_wander(after, x, transitions=r.transitions, block=r.block, p=r.p)
    for judged in (transition_ends, drifts_cut_in_two, drift_ends):
        after = judged(
            after, x, transitions=r.transitions, block=r.block, p=r.p, level=r.level, white=r.white
        )
    return ramps_into_levels(after, transitions=r.transitions, level=r.level)


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


def settled_tail(
    labels: np.ndarray, x: np.ndarray, *, transitions: Collection[int], block: int, p: float, level: int
) -> np.ndarray:
    """``labels`` with the drift at the start of the recording's last run, when that run
    follows a transition, relabelled as the transition (see the module); the level it
    settles at holds ``level`` windows at least."""
    out = labels.copy()
    starts, ends = _runs(out)
    if len(starts) < 2:
        return out
    start, end = starts[-1], ends[-1]
    before = out[start - 1]
    if before not in transitions or out[start] in transitions:
        return out
    means = _Means(x)
    went = _direction(means, starts[-2], start, block)
    turn = _hinge(x[start:end], went, p, level)
    if turn is not None and _trends(means.blocks(start, start + turn, block), went, p=p):
        out[start : start + turn] = before
    return out


MAX_BENDS = 128
"""At most this many bends are tried (evenly spaced block boundaries), so that a long series'
transition costs time and memory in proportion to its length."""


def transition_ends(
    labels: np.ndarray,
    x: np.ndarray,
    *,
    transitions: Collection[int],
    block: int,
    p: float,
    level: int,
    white: np.ndarray,
) -> np.ndarray:
    """``labels`` with the end of each transition that a steady run follows moved to where
    its line turns level (see the module), read on the features whose noise is ``white``
    (for them least squares is the likelihood): only where the data prefer that hinge to
    the online date by a likelihood ratio at ``p``, by at most ``level`` windows, and with
    ``level`` windows of the transition before it and of the level after it."""
    out = labels.copy()
    for start, end, after, (turn, _, cost) in _ends_to_judge(labels, x, transitions, block, p, white):
        gain = cost[end - start - 2] - cost[turn - 2]  # the online date's cost less the hinge's
        turn += start
        if (
            gain > 0.5 * chi2.ppf(1.0 - p, 1)
            and abs(turn - end) <= level
            and _keeps(start, turn, after, level)
        ):
            _move_end(out, labels, end, turn)
    return out


def drift_ends(
    labels: np.ndarray,
    x: np.ndarray,
    *,
    transitions: Collection[int],
    block: int,
    p: float,
    level: int,
    white: np.ndarray,
) -> np.ndarray:
    """``labels`` with the end of each transition that a steady run follows moved to where
    its last, slower line turns level (see the module): a continuous fit of a steep line,
    a slower one from a block boundary inside the transition, then a level, read on the
    features :func:`transition_ends` reads; only where a likelihood ratio at ``p`` shared
    among the windows searched prefers it to the online date, and with ``level`` windows of
    the transition before it and of the level after it."""
    out = labels.copy()
    for start, end, after, (_, cols, _) in _ends_to_judge(labels, x, transitions, block, p, white):
        bends = np.arange(block, end - start - 1, block)  # where the slower line may start
        cost = _bent_hinge_cost(x[start:after, cols], bends, step_p=p)
        if cost is None:
            continue
        turn = 2 + int(np.argmin(cost))
        gain = cost[end - start - 2] - cost[turn - 2]
        turn += start
        if gain > 0.5 * chi2.ppf(1.0 - p / (after - start), 1) and _keeps(start, turn, after, level):
            _move_end(out, labels, end, turn)
    return out


def drifts_cut_in_two(
    labels: np.ndarray,
    x: np.ndarray,
    *,
    transitions: Collection[int],
    block: int,
    p: float,
    level: int,
    white: np.ndarray,
) -> np.ndarray:
    """``labels`` with a transition's slow drift that the online pass cut into two steady
    runs, its end in the second, relabelled as the transition up to where its line turns
    level (see the module): where one continuous fit over the transition and both runs (a
    steep line, a slower one, then level, turning in the second run) explains their block
    means as well as the online picture (the same fit over the transition and the first
    run, then the second run's own level) within the level's wander, at ``p``; read on the
    features :func:`transition_ends` reads, with ``level`` windows of the transition before
    the turn and of the level after it."""
    out = labels.copy()
    starts, ends = _runs(labels)
    means = _Means(x)
    wander, df = _level_wander(means, labels, transitions, block)
    if df < 1:  # no steady run of two blocks: the wander is unknown
        return out
    for i in range(len(starts) - 2):
        start, first, second, after = starts[i], starts[i + 1], starts[i + 2], ends[i + 2]
        if labels[start] not in transitions or labels[first] in transitions or labels[second] in transitions:
            continue
        went = _direction(means, start, first, block)
        found = _turn(x[start:after], went * white, p)
        if found is None:
            continue
        cols = found[1]
        blocks = means.blocks(start, after, block)[:, cols]
        cut = round((second - start) / block)  # the second run's first block
        if len(blocks) - cut < 2:  # the second run's level needs two blocks
            continue
        var = np.maximum(wander[cols], 1e-300)  # block means' variance about their level
        bends = np.arange(1, cut - 1)
        one = _bent_hinge_cost(blocks, bends, var)
        tail = blocks[cut:]
        step = ((tail - tail.mean(axis=0)) ** 2).sum(axis=0)  # the second run at its own level
        two = _bent_hinge_cost(blocks[:cut], bends, var, more_rss=step)
        if one is None or two is None:
            continue
        one[: max(cut - 2, 0)] = np.inf  # the turn in the second run (turns from block 2)
        turn = start + block * (2 + int(np.argmin(one)))
        if (
            np.min(one) - np.min(two) < chi2.ppf(1.0 - p, len(cols))
            and _keeps(start, turn, after, level)
            and _trends(means.blocks(first, turn, block), went, p=p)  # a drift, not a rebound
        ):
            out[first:turn] = labels[start]
    return out


def start_drift(
    labels: np.ndarray,
    x: np.ndarray,
    *,
    transitions: Collection[int],
    block: int,
    p: float,
    level: int,
    white: np.ndarray,
    new_id: int,
) -> np.ndarray:
    """``labels`` with the drift that a recording seen as one regime starts with relabelled
    ``new_id`` up to where it turns level (see the module), read on the features
    :func:`transition_ends` reads, with ``level`` windows of drift before the turn and of
    the level after it."""
    out = labels.copy()
    starts, ends = _runs(labels)
    end = int(ends[0])
    if len(starts) > 1 or labels[0] in transitions or end < 2 * level:
        return out
    means = _Means(x)
    went = _direction(means, 0, end, block)
    found = _turn(x, went * white, p)
    if found is None:
        return out
    cols = found[1]
    cost = _bent_hinge_cost(x[:, cols], np.arange(block, end - 1, block), step_p=p)
    if cost is None:
        return out
    turn = 2 + int(np.argmin(cost))
    if not _keeps(0, turn, end, level):
        return out
    edge = block * round(turn / block)  # the blocks on either side of the turn
    drift, settled = means.blocks(0, edge, block), means.blocks(edge, end, block)
    if len(drift) < 3 or len(settled) < 3:  # no rank, no step to read
        return out
    shared = p / x.shape[1]
    bound = chi2.ppf(1.0 - shared, 1) * len(drift)  # in random steps of the level's wander
    for j in cols:
        step = np.mean(np.diff(settled[:, j]) ** 2)  # a block's random step in the level's wander
        moved = drift[0, j] - settled[:, j].mean()
        if _trends(drift[:, [j]], went[[j]], p=shared) and moved**2 > bound * step:
            out[:turn] = new_id
            break
    return out


def _ends_to_judge(
    labels: np.ndarray, x: np.ndarray, transitions: Collection[int], block: int, p: float, white: np.ndarray
) -> Iterator[tuple[int, int, int, tuple[int, list[int], np.ndarray]]]:
    """Each transition that a steady run follows, whose line turns level on some white
    feature (:func:`_turn`): its first window, the steady run's first and the window after
    its last, and the hinge :func:`_turn` found over both."""
    starts, ends = _runs(labels)
    means = _Means(x)
    for i in range(len(starts) - 1):
        start, end, after = starts[i], starts[i + 1], ends[i + 1]
        if labels[start] not in transitions or labels[end] in transitions:
            continue
        run = x[start:after]
        found = _turn(run, _direction(means, start, end, block) * white, p)
        if found is not None and 2 <= end - start <= len(run) - 2:
            yield start, end, after, found


def _keeps(start: int, turn: int, after: int, level: int) -> bool:
    """Whether a transition from window ``start`` that ends at ``turn`` and the steady run
    after it, to ``after``, both still last ``level`` windows (what makes each a regime)."""
    return turn - start >= level and after - turn >= level


def _move_end(out: np.ndarray, labels: np.ndarray, end: int, turn: int) -> None:
    """Move the end of a transition from window ``end`` to ``turn`` (the run after it starts
    there)."""
    out[min(turn, end) : max(turn, end)] = labels[end - 1] if turn > end else labels[end]


def _bent_hinge_cost(
    run: np.ndarray,
    bends: np.ndarray,
    var: np.ndarray | None = None,
    more_rss: np.ndarray | float = 0.0,
    *,
    step_p: float | None = None,
    chunk: int = 16,
) -> np.ndarray | None:
    """For every turn ``h`` from 2 to ``len(run) - 2``, the least cost over the ``bends``
    ``g < h`` of a line until ``g``, a line of another slope until ``h``, then level,
    summed over the columns of ``run`` (one bend and one turn for all); None without a
    bend. Given ``step_p``, a column may also step at the turn (:func:`_bent_hinge_rss`)
    where the step pays its way: a likelihood ratio between its best fits with and without
    one, at ``step_p`` shared among the turns searched (a phase's end can change one
    feature's level, the reads per write, while another only bends; a column that only
    bends is read as a continuous fit, whose turn a free step would blur); without it no
    column steps. A column's cost is ``k/2 log rss`` of its residual sum of squares (its own
    variance, ``k`` windows), or given each column's variance ``var``, ``(rss + more_rss) /
    var`` (``more_rss``: a column's residuals outside ``run``), twice nats. At most
    :data:`MAX_BENDS` of the ``bends``, evenly spaced, are tried (a coarser grid on a very
    long run), in chunks, so memory stays ``chunk`` times the run."""
    if len(bends) == 0:
        return None
    bends = bends[:: max(1, -(-len(bends) // MAX_BENDS))]
    k = len(run)
    more = np.broadcast_to(more_rss, run.shape[1])
    chunks = [bends[i : i + chunk] for i in range(0, len(bends), chunk)]

    def cost(j: int, rss: np.ndarray) -> np.ndarray:
        return 0.5 * k * np.log(rss) if var is None else (rss + more[j]) / var[j]

    stepped = np.zeros(run.shape[1], dtype=bool)
    if step_p is not None:  # a step pays its way at its best turn, shared among the turns
        bound = chi2.ppf(1.0 - step_p / max(k - 3, 1), 1) * (0.5 if var is None else 1.0)
        for j in range(run.shape[1]):
            least = [
                min(cost(j, _bent_hinge_rss(run[:, j], c, step)).min() for c in chunks)
                for step in (False, True)
            ]
            stepped[j] = least[0] - least[1] > bound
    best = np.full(k - 3, np.inf)
    for c in chunks:
        total = sum(cost(j, _bent_hinge_rss(run[:, j], c, stepped[j])) for j in range(run.shape[1]))
        best = np.minimum(best, np.min(total, axis=0))
    return best


def _bent_hinge_rss(y: np.ndarray, bends: np.ndarray, step: bool = False) -> np.ndarray:
    """For every bend ``g`` of ``bends`` (rows) and turn ``h`` from 2 to ``len(y) - 2``
    (columns), the residual sum of squares of ``y ~ a + b min(u - g, 0) + c min(u - h, 0)``
    (a line until ``g``, a line of another slope until ``h``, then level), or with ``step``
    of the same with a step at the turn, ``+ e [u >= h]``; ``inf`` unless ``g < h`` (with
    the step, ``g < h - 1``: a slower line one window long is the step). Closed forms in
    ``g`` and ``h`` and running sums of ``y``."""
    k = len(y)
    yc = y - y.mean()
    u = np.arange(k, dtype=float)
    cy, cuy = np.r_[0.0, np.cumsum(yc)], np.r_[0.0, np.cumsum(u * yc)]
    hi = np.arange(2, k - 1)[None, :]
    h = hi.astype(float)  # (h^3 of a long series' window index overflows an integer)
    g = bends[:, None].astype(float)
    # sums over u < h of u, u^2 (the columns' sums come from them), and over u < g
    su = h * (h - 1) / 2.0
    suu = (h - 1) * h * (2 * h - 1) / 6.0
    sz, szz, szy = su - h * h, suu - 2.0 * h * su + h**3, cuy[hi] - h * cy[hi]
    bi = bends[:, None]
    sb, sbb = -g * (g + 1) / 2.0, g * (g + 1) * (2 * g + 1) / 6.0
    sby = cuy[bi] - g * cy[bi]
    szb = sbb + (g - h) * sb  # for h > g: the bend's column is zero from g on
    # the columns' cross products about their means, and the explained sum of squares b' A^-1 b
    a11, a12, a22 = sbb - sb * sb / k, szb - sb * sz / k, szz - sz * sz / k
    det2 = a11 * a22 - a12 * a12
    flat = float(yc @ yc)
    floor = 1e-300 + 1e-12 * flat
    if not step:
        with np.errstate(invalid="ignore", divide="ignore"):
            explained = (a22 * sby * sby - 2.0 * a12 * sby * szy + a11 * szy * szy) / det2
        return np.where((h > g) & (det2 > 1e-9 * a11 * a22), np.maximum(flat - explained, floor), np.inf)
    after = k - h  # the step's column: 1 from h on, where both lines' columns are zero
    ssy = -cy[hi]  # yc sums to 0: its sum from h on is minus its sum before h
    a13, a23, a33 = -sb * after / k, -sz * after / k, after - after * after / k
    c11, c22, c33 = a22 * a33 - a23 * a23, a11 * a33 - a13 * a13, det2  # A's adjugate
    c12, c13, c23 = a13 * a23 - a12 * a33, a12 * a23 - a13 * a22, a12 * a13 - a11 * a23
    det3 = a11 * c11 + a12 * c12 + a13 * c13
    quad = c11 * sby * sby + c22 * szy * szy + c33 * ssy * ssy
    quad = quad + 2.0 * (c12 * sby * szy + c13 * sby * ssy + c23 * szy * ssy)
    with np.errstate(invalid="ignore", divide="ignore"):
        explained = quad / det3
    return np.where(
        (h > g + 1) & (det3 > 1e-9 * a11 * a22 * a33), np.maximum(flat - explained, floor), np.inf
    )


def _hinge(run: np.ndarray, went: np.ndarray, p: float, level: int) -> int | None:
    """Where a drift the way ``went`` says turns into a level that holds ``level`` windows,
    in windows from the start of ``run`` (see :func:`_turn`); None if it does not, or if
    two levels fit the drift better than a line (a step the online pass missed)."""
    found = _turn(run, went, p)
    if found is None:
        return None
    turn, cols, _ = found
    if turn > len(run) - level:
        return None  # the drift may still be going: no level has held long enough
    drift = run[:turn, cols]
    if np.sum(np.log(_step_rss(drift))) < np.sum(np.log(_line_rss(drift))):
        return None
    return turn


def _turn(run: np.ndarray, went: np.ndarray, p: float) -> tuple[int, list[int], np.ndarray] | None:
    """Where a line that moves the way ``went`` says turns into a level, in windows from
    the start of ``run``, the features it was read on, and the cost (nats) of a hinge at
    each window from 2: the least-squares hinge of the features whose own best hinge has a
    slope that way and fits better than a level (a likelihood ratio at ``p`` shared among
    the features), each with its own residual variance; None if no feature has one."""
    k, d = run.shape
    if k < 5:
        return None
    costs, cols = [], []
    for j in range(d):
        y = run[:, j]
        if went[j] == 0 or np.isnan(y).any():
            continue
        rss, slope, flat = _hinge_fits(y)
        best = int(np.argmin(rss))
        gain = 0.5 * k * np.log(flat / rss[best])
        if np.sign(slope[best]) == went[j] and gain > 0.5 * chi2.ppf(1.0 - p / d, 2):
            costs.append(0.5 * k * np.log(rss))
            cols.append(j)
    if not costs:
        return None
    cost = np.sum(costs, axis=0)
    return 2 + int(np.argmin(cost)), cols, cost


def _hinge_fits(y: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """For every hinge ``h`` from 2 to ``len(y) - 2``: the residual sum of squares and the
    slope of ``y ~ a + b min(u - h, 0)`` (a line until window ``h``, then level), and the
    residual sum of squares about the mean, from running sums."""
    k = len(y)
    yc = y - y.mean()
    u = np.arange(k, dtype=float)
    h = np.arange(2, k - 1, dtype=float)
    before = h.astype(int)  # windows on the line: u < h
    su, suu = np.r_[0.0, np.cumsum(u)][before], np.r_[0.0, np.cumsum(u * u)][before]
    sy, suy = np.r_[0.0, np.cumsum(yc)][before], np.r_[0.0, np.cumsum(u * yc)][before]
    sz = su - h * h  # sums of z = u - h over u < h
    szz = suu - 2.0 * h * su + h * h * h
    szy = suy - h * sy
    czz = szz - sz * sz / k  # about the means (yc sums to 0)
    flat = float(yc @ yc)
    slope = szy / czz
    rss = np.maximum(flat - szy * slope, 1e-300 + 1e-12 * flat)
    return rss, slope, max(flat, 1e-300)


def _line_rss(y: np.ndarray) -> np.ndarray:
    """Each column's residual sum of squares about its least-squares line."""
    u = np.arange(len(y), dtype=float)
    u -= u.mean()
    yc = y - y.mean(axis=0)
    return np.maximum((yc * yc).sum(axis=0) - (u @ yc) ** 2 / (u @ u), 1e-300)


def _step_rss(y: np.ndarray) -> np.ndarray:
    """Each column's least residual sum of squares about two levels, split anywhere."""
    n = len(y)
    yc = y - y.mean(axis=0)
    head = np.cumsum(yc, axis=0)[:-1]  # sums of the first i + 1 values
    i = np.arange(1, n, dtype=float)[:, None]
    explained = head * head / i + head * head / (n - i)  # the tail sums to -head
    return np.maximum((yc * yc).sum(axis=0) - explained.max(axis=0), 1e-300)


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
    it (see the module) relabelled as that run, and each transition between two runs of
    one level (one steady regime, or two the same level) that is the same level as the run
    before it (a wander that lasted ``min_regime_s``, not a move: it came back); ``x`` holds
    the features of each window, ``block`` is the block length in windows."""
    out = labels.copy()
    starts, ends = _runs(out)
    means = _Means(x)
    wander, df = _level_wander(means, out, transitions, block)
    if df < 1:  # no steady run of two blocks: the wander is unknown
        return out
    d = x.shape[1]
    q = student_t.ppf(1.0 - p / (2 * d), df)

    def same(first: int, start: int, end: int) -> bool:  # windows [start, end) and the run before
        diff = means.of(first, start) - means.of(start, end)
        se = np.sqrt(wander * block * (1.0 / (start - first) + 1.0 / (end - start)))
        return not (np.abs(diff) > q * se).any()  # a feature without values (NaN) differs in nothing

    def came_back(i: int, before: int, first: int) -> bool:  # run i, a transition: to what it left
        if i + 1 == len(starts):
            return False
        after = labels[starts[i + 1]]  # the regime it left, or a steady run at that level
        return after == before or (after not in transitions and same(first, starts[i + 1], ends[i + 1]))

    first = 0  # where the run before starts, with any run already merged into it
    for i, (start, end) in enumerate(zip(starts[1:], ends[1:], strict=True), start=1):
        before = out[start - 1]
        if (
            before not in transitions
            and (out[start] not in transitions or came_back(i, before, first))
            and same(first, start, end)
        ):
            out[start:end] = before
            continue
        first = start
    return out


def ramps_into_levels(labels: np.ndarray, *, transitions: Collection[int], level: int) -> np.ndarray:
    """``labels`` with each transition run shorter than ``level`` windows that a steady run
    follows relabelled as that run (a ramp, see the module)."""
    out = labels.copy()
    starts, ends = _runs(labels)
    for start, end in zip(starts[:-1], ends[:-1], strict=True):
        if end - start < level and labels[start] in transitions and labels[end] not in transitions:
            out[start:end] = labels[end]
    return out


def _level_wander(
    means: _Means, labels: np.ndarray, transitions: Collection[int], block: int
) -> tuple[np.ndarray, int]:
    """The variance of block means about their run's mean, per feature, pooled over the
    steady runs of ``labels`` (not ``transitions``) of two blocks or more, and its degrees
    of freedom."""
    squares = 0.0
    df = 0
    for start, end in zip(*_runs(labels), strict=True):
        if labels[start] in transitions:
            continue
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


def merged_changes(changes: np.ndarray, after: np.ndarray, t0: int) -> np.ndarray:
    """The change rows ``(from, to, at, confirmed)`` (``at`` counted from ``t0``) of the
    labels ``after`` the hindsight passes, from the online pass's ``changes``: one row per
    change of ``after``, confirmed when the online change into the same regime nearest to
    it was, and rows dated before the first window as they were. A change dated past that
    confirmation (a drift that became its transition's) was known only in hindsight: it
    is confirmed at the recording's last window."""
    n = len(after)
    rows = changes.tolist()
    keep = [tuple(r) for r in rows if r[2] - t0 <= 0]
    for i in _runs(after)[0][1:].tolist():
        to, at = int(after[i]), t0 + i
        online = [r for r in rows if r[1] == to and 0 < r[2] - t0 < n]
        if online:  # (every change of the labels has one; a test may pass none)
            conf = min(online, key=lambda r: abs(r[2] - at))[3]
            keep.append((int(after[i - 1]), to, at, conf if conf >= at else t0 + n - 1))
    return np.asarray(keep, dtype=changes.dtype).reshape(-1, 4)


__all__ = [
    "Reading",
    "drift_ends",
    "drifts_cut_in_two",
    "in_hindsight",
    "merged_changes",
    "ramps_into_levels",
    "settled_tail",
    "slow_tails",
    "start_drift",
    "steps_within_wander",
    "transition_ends",
]
