"""The detector's per-window loop, compiled with numba (the loop is inherently sequential).

Two layers, one function per phase, behind a one-window hold: a window whose features leave
the level by more than ``noise_clip`` standard deviations of a first difference waits for the
next; if that one is back, the window was a dip and those features are learnt as missing.

**Change test: online optimal partitioning (PELT) of a piecewise-linear signal.** Each
feature of a segment is a line plus AR(1) noise: given the window before, ``y - phi
y_lag`` is a line plus Gaussian noise of the segment's own variance, shrunk towards a floor
by ``dwell`` windows' worth of it: the larger of the noise learnt from first differences
and the Poisson variance of the counts behind a log-count feature (1 active key against 2
is noise). With ``ar_noise``, ``phi`` is each feature's, learnt over the whole stream from
the correlation of consecutive first differences about their recent mean (-1/2 for white
noise, 0 for a random walk), less ``ar_margin`` standard errors of that estimate, so a
series that wanders is not cut at every turn and white noise reads 0; without it ``phi``
is 0 (white noise: the line through the values themselves). A segment's cost
is its negative log-likelihood; a
change costs ``penalty`` nats (BIC: ``(3 d + 1) / 2 log n`` for a new level, slope and
variance per feature and the change's position, ``n`` the windows of a typical regime). Every
window opens a candidate segment start; the best partition of all windows so far ends
with the candidate whose prior cost plus segment cost is least. Candidates are kept by
PELT's rule and a bounded beam: the committed boundary, the ``recent`` newest and the
``best`` cheapest of the others.

**Regimes: clusters of segments with stable ids.** When the best partition's last
segment starts after the committed boundary and has held ``dwell`` windows, the segment
is committed and judged: it *matches* a steady regime when its mean is consistent with
the regime's level (chi-square over the features, precision of at most ``match_n``
windows on each side, below ``match_chi2``). A match with the regime in force changes
nothing (a burst, a blip); a match with another steady regime returns to it. An
unmatched segment opens an *excursion*; the excursion founds a new steady regime once a
level without slope has held ``min_regime`` windows (with the segments just before it that
held the same level: the change test may cut a level in two), and becomes a *transition* regime
(a decline: it differs from a plateau in slope, not level) once it has lasted
``min_regime`` windows without settling and neither its latest segment nor its windows as
a whole are back at the level it left (a sag that dips cut is no move), or, under white
noise, once its latest segment, leaving a steady level, has moved for ``min_regime``
windows (a steady decline is one line to the change test, which ends it only where it
turns level), or, under AR(1) noise, once a steady level that followed its windows as drift
has ridden away from where it was founded farther than its wander allows (a slow ramp the
change test does not cut). What led to a new level in fewer windows is a ramp that joins it if it lies
between the two levels and its first segment is off the level it left (at that level, it
was the level's wander, and the new level begins where it holds), else a burst of the
regime it left.
In a transition, a segment opens an excursion only where it jumps off the line the
transition was on: not at a bend, nor at a step further the way the transition moves (away
from where it set out: a decline's drops), nor at a step part of the way back by a segment
that still moves that way (an uneven decline), nor in the transition's first ``min_regime``
windows (the excursion that founded it); a later segment back on that line closes it (a
burst). So a series that never levels off (a drifting feature) still changes regime where
another feature switches. Transition regimes are never returned to. A change back to the
regime just left passes exactly the same tests as any other.

State lives in a :class:`KernelState` of numpy arrays (scalars as length-1 arrays) so the
Python side can save it as JSON and the online (one window) and batch (a whole series)
paths run the very same code; inside the loop the phases read it through one struct of the
same arrays (:class:`KernelStateRef`), which numba passes by a single reference.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit, types
from numba.experimental import structref

STEADY = 0
TRANSITION = 1
#: Columns of a segment's running sums, per feature: windows, time, time squared, value,
#: time x value, value squared, the counts' variance, then of the value before each window
#: (the lag): lag, lag squared, value x lag, time x lag (time from the segment's start,
#: values and lags from its first value).
N_SUMS = 11
#: Columns of a line kept per feature (see :func:`_ended_line`).
N_LINE = 6
_TINY = 1e-300

#: Compiled once and cached beside the module. ``error_model="numpy"``: a division is a
#: plain division, without numba's default check for a zero divisor (to raise Python's
#: ZeroDivisionError) on every one; every divisor here is guarded, so the results are the
#: same to the bit, and a replay runs about 1.13x faster (``bench/regimes.py``'s speed run,
#: kernel alone, in one process, 15 interleaved repetitions).
_compiled = njit(cache=True, nogil=True, error_model="numpy")
#: A phase of the loop: inlined into :func:`run` (numba's IR inlining), with its options.
_phase = njit(cache=True, nogil=True, error_model="numpy", inline="always")


class KernelParams(NamedTuple):
    """The detector's parameters in windows and nats (see ``DetectorParams`` for their
    meaning in seconds and probabilities)."""

    log_regime_n: float  # log of a typical regime's windows: a change costs (3 k + 1) / 2 of it
    dwell: int  # windows a new segment holds before it is judged
    min_regime: int  # windows a new level holds to found a regime; an excursion lasts to be one
    match_n: int  # most windows of precision a regime match is judged with, on each side
    # (d + 1,) by k, the features that have moved: the chi-square below which windows match
    match_chi2: np.ndarray
    noise_weight: float  # smallest EWMA weight of a new squared difference
    noise_clip: float  # differences are clipped at noise_clip standard deviations of the noise
    noise_floor: float  # the noise is at least this share of a feature's magnitude
    drift_weight: float  # smallest step with which a steady regime's level follows its windows
    max_regimes: int
    level_prior: float  # a level's variance before blocks are learnt (fades as 1 / (blocks + 1))
    ar_noise: bool  # the noise is AR(1), its coefficient learnt; else white
    moved_only: bool  # a change and a match count only the features that have moved (series)
    ar_margin: float  # standard errors taken off the AR(1) estimate (its one-sided bound)
    recent: int  # newest candidates always kept
    best: int  # cheapest older candidates kept


class KernelState(NamedTuple):
    """Everything the loop learns. Windows are counted from the first one ever seen."""

    # the clock and the regime in force
    t: np.ndarray  # (1,) windows learnt (one fewer than received while one is held back)
    current: np.ndarray  # (1,) regime in force (-1 before the first)
    current_since: np.ndarray  # (1,) first window of the segment that founded or entered it
    n_regimes: np.ndarray  # (1,)
    boundary: np.ndarray  # (1,) first window of the last committed segment
    boundary_t: np.ndarray  # (1,) the window at which it was committed
    excursion: np.ndarray  # (1,) first window of an unresolved excursion (-1: none)
    exc_first: np.ndarray  # (d, 3) its first segment's windows, sum, sum of squares
    exc_stats: np.ndarray  # (d, 3) the same of all its segments that have ended
    exc_line: np.ndarray  # (d, N_LINE) in a transition, the line it left (see _ended_line)
    last_line: np.ndarray  # (d, N_LINE) the line of the latest segment of dwell windows or more
    # the level that the committed segments before the latest one held together
    run_start: np.ndarray  # (1,) first window of the first of them
    run_stats: np.ndarray  # (d, 3) their windows, sum, sum of squares
    # a window held back one window: it left the level, and the next shows whether it was a dip
    pending: np.ndarray  # (1,) 1 while a window is held back
    pend_y: np.ndarray  # (d,) its values
    pend_v: np.ndarray  # (d,) its counts' variances
    pend_off: np.ndarray  # (d,) 1 where a feature left the level
    # noise learnt from first differences
    prev_y: np.ndarray  # (d,)
    noise_var: np.ndarray  # (d,)
    noise_n: np.ndarray  # (1,) differences learnt
    # the noise's autocorrelation, from consecutive first differences (centred, clipped)
    diff_last: np.ndarray  # (d,) the latest first difference
    diff_prev: np.ndarray  # (d,) the one before it
    diff_mean: np.ndarray  # (d,)
    diff_var: np.ndarray  # (d,)
    diff_cov: np.ndarray  # (d,) of consecutive differences
    magnitude: np.ndarray  # (d,) running mean of |y|, for the relative floor of the noise
    quantum: np.ndarray  # (d,) the least non-zero |first difference| seen (0: none yet)
    # the spread of a regime's level: means of min_regime windows, block to block
    block_sum: np.ndarray  # (d,)
    block_cnt: np.ndarray  # (d,)
    block_n: np.ndarray  # (1,) windows in the block
    block_regime: np.ndarray  # (1,) the regime in force over the blocks
    block_prev: np.ndarray  # (d,) the previous block's mean
    n_blocks: np.ndarray  # (1,) block differences learnt
    level_var: np.ndarray  # (d,)
    # change test
    n_cand: np.ndarray  # (1,)
    cand_start: np.ndarray  # (R,) first window of each candidate segment
    cand_prior: np.ndarray  # (R,) best cost of all windows before it
    cand_ref: np.ndarray  # (R, d) its first value (centres the sums)
    cand_sums: np.ndarray  # (R, d, N_SUMS)
    best_cost: np.ndarray  # (1,) best cost of all windows so far
    # regimes
    reg_level: np.ndarray  # (K, d)
    reg_n: np.ndarray  # (K,) windows learnt
    reg_kind: np.ndarray  # (K,) STEADY or TRANSITION
    reg_origin: np.ndarray  # (K, d) the level it was founded at
    reg_origin_n: np.ndarray  # (K,) the windows that level was the mean of


class ChangeLog(NamedTuple):
    """What one call of :func:`run` reports: the labels of its windows (back-dated to each
    change) and the confirmed changes, rows ``(from, to, at, confirmed)``."""

    labels: np.ndarray  # (n,) for the call's windows
    changes: np.ndarray  # (2 n + 2, 4)
    n_rows: np.ndarray  # (1,) rows of changes used
    t0: np.ndarray  # (1,) absolute index of the call's first window


class Scratch(NamedTuple):
    """Work space of one call of :func:`run`, per window (nothing in it is learnt)."""

    noise: np.ndarray  # (d,) the noise variance in force
    ar: np.ndarray  # (d,) the noise's AR(1) coefficient in force
    lag: np.ndarray  # (d,) each feature's value before the window (NaN: none)
    level: np.ndarray  # (d,) a segment's mean, as the regime layer judges it
    totals: np.ndarray  # (R,) each candidate's prior plus segment cost
    off: np.ndarray  # (d,) 1 where a feature left the level


# -- one reference to a struct of arrays ---------------------------------------------------
# A named tuple of arrays is a tuple of references, and numba counts the references of each
# one (an atomic increment and decrement) wherever a phase binds it; its pruning pass drops
# those counts in some control-flow shapes only (which ones is hard to foresee). Elsewhere a
# phase's call cost twice 43 counts: a phase with a loop under an if/else ran 476 ns on a
# named tuple of 43 arrays and 13 ns on a struct of them, and the counts took 40 % of a
# replay (perf). Inside :func:`run`, the state, the log and the scratch space are numba
# structs (``StructRef``) of the same arrays, one reference each; the named tuples above
# name their fields. Each struct has its own type class: a type class boxes to one proxy.


class _Struct(types.StructRef):
    def preprocess_fields(
        self, fields: tuple[tuple[str, types.Type], ...]
    ) -> tuple[tuple[str, types.Type], ...]:
        return tuple((name, types.unliteral(typ)) for name, typ in fields)


@structref.register
class _KernelStateStruct(_Struct):
    pass


@structref.register
class _ChangeLogStruct(_Struct):
    pass


@structref.register
class _ScratchStruct(_Struct):
    pass


class KernelStateRef(structref.StructRefProxy):
    """The fields of a :class:`KernelState`, as one numba struct (it shares their arrays)."""


class ChangeLogRef(structref.StructRefProxy):
    """The fields of a :class:`ChangeLog`, as one numba struct."""


class ScratchRef(structref.StructRefProxy):
    """The fields of a :class:`Scratch`, as one numba struct."""


structref.define_proxy(KernelStateRef, _KernelStateStruct, list(KernelState._fields))
structref.define_proxy(ChangeLogRef, _ChangeLogStruct, list(ChangeLog._fields))
structref.define_proxy(ScratchRef, _ScratchStruct, list(Scratch._fields))


def new_state(d: int, p: KernelParams) -> KernelState:
    """A detector that has seen nothing (``p`` sizes the beam and the regime table)."""
    n_candidates = p.recent + p.best + 2

    def one(v: int) -> np.ndarray:
        return np.full(1, v, dtype=np.int64)

    return KernelState(
        t=one(0),
        current=one(-1),
        current_since=one(0),
        n_regimes=one(0),
        boundary=one(0),
        boundary_t=one(0),
        excursion=one(0),  # the first regime is founded like any other
        exc_first=np.zeros((d, 3)),
        exc_stats=np.zeros((d, 3)),
        exc_line=np.zeros((d, N_LINE)),
        last_line=np.zeros((d, N_LINE)),
        run_start=one(0),
        run_stats=np.zeros((d, 3)),
        pending=one(0),
        pend_y=np.zeros(d),
        pend_v=np.zeros(d),
        pend_off=np.zeros(d, dtype=np.int64),
        prev_y=np.full(d, np.nan),
        noise_var=np.zeros(d),
        noise_n=one(0),
        diff_last=np.full(d, np.nan),
        diff_prev=np.full(d, np.nan),
        diff_mean=np.zeros(d),
        diff_var=np.zeros(d),
        diff_cov=np.zeros(d),
        magnitude=np.zeros(d),
        quantum=np.zeros(d),
        block_sum=np.zeros(d),
        block_cnt=np.zeros(d),
        block_n=one(0),
        block_regime=one(-1),
        block_prev=np.full(d, np.nan),
        n_blocks=one(0),
        level_var=np.zeros(d),
        n_cand=one(0),
        cand_start=np.zeros(n_candidates, dtype=np.int64),
        cand_prior=np.zeros(n_candidates),
        cand_ref=np.zeros((n_candidates, d)),
        cand_sums=np.zeros((n_candidates, d, N_SUMS)),
        best_cost=np.zeros(1),
        reg_level=np.zeros((p.max_regimes, d)),
        reg_n=np.zeros(p.max_regimes),
        reg_kind=np.zeros(p.max_regimes, dtype=np.int64),
        reg_origin=np.zeros((p.max_regimes, d)),
        reg_origin_n=np.zeros(p.max_regimes),
    )


def widen_sums(sums: np.ndarray) -> np.ndarray:
    """Segment sums of a state saved before the lag columns (format 5 and earlier, seven
    columns) with them, each window's predecessor taken as the window itself: the noise of
    those segments is judged white until they end."""
    if sums.shape[-1] == N_SUMS:
        return sums
    out = np.zeros((*sums.shape[:-1], N_SUMS))
    out[..., :7] = sums
    out[..., 7] = sums[..., 3]  # lag = value
    out[..., 8] = sums[..., 5]
    out[..., 9] = sums[..., 5]
    out[..., 10] = sums[..., 4]
    return out


# -- noise -----------------------------------------------------------------------------------


@_phase
def _noise_floor(s: KernelState, p: KernelParams, j: int) -> float:
    """The least noise variance of feature ``j``: ``noise_floor`` of its magnitude, squared,
    but at most the rounding noise of the resolution its values have shown (``q^2 / 12``,
    ``q`` the least non-zero step seen): a value far from zero that moves in fine steps is
    as precise as its steps show, whatever its offset (a temperature in kelvin, bytes in
    use)."""
    floor = (p.noise_floor * s.magnitude[j]) ** 2
    q = s.quantum[j]
    if q > 0.0:
        floor = min(floor, q * q / 12.0)
    return floor + 1e-12


@_phase
def _moved(s: KernelState, p: KernelParams) -> int:
    """How many features carry evidence: for a series (``moved_only``), from its second row
    on, the columns that have moved (one that never changes, such as a configured limit,
    adds nothing to a change or a match, and is not counted in their thresholds), at least
    one; else every feature (a trace window's features are defined: a window without writes
    has a write rate, and the thresholds for traces were chosen counting it)."""
    d = s.quantum.shape[0]
    if not p.moved_only or s.t[0] < 1:
        return d
    k = 0
    for j in range(d):
        if s.quantum[j] > 0.0:
            k += 1
    return max(k, 1)


@_phase
def _penalty(s: KernelState, p: KernelParams) -> float:
    """Nats a change costs: the BIC of one more segment, 3 parameters a feature that has
    moved (a line and its variance) and its start, over a typical regime."""
    return (3.0 * _moved(s, p) + 1.0) / 2.0 * p.log_regime_n


@_phase
def _match_chi2(s: KernelState, p: KernelParams) -> float:
    """The chi-square, over the features that have moved, below which windows match a level."""
    return p.match_chi2[_moved(s, p)]


@_phase
def _learn_noise(
    s: KernelState, p: KernelParams, y: np.ndarray, noise: np.ndarray, lag: np.ndarray, ar: np.ndarray
) -> None:
    """Update each feature's noise from the window's first difference, and put the noise
    variance in force (at least a relative floor) into ``noise``, the value before the
    window into ``lag`` (NaN: none) and the noise's AR(1) coefficient into ``ar``
    (:func:`_autocorrelation`). The first ``dwell`` differences are averaged as they come;
    later ones are clipped at ``noise_clip`` standard deviations, so a dip or a step barely
    moves the noise. The autocorrelation is learnt over the whole stream (a property of the
    metric, not of a regime: it needs many windows to be precise)."""
    n = s.noise_n[0]
    lam = max(1.0 / (n + 1.0), p.noise_weight)
    for j in range(y.shape[0]):
        lag[j] = s.prev_y[j]
        if np.isnan(y[j]):  # a missing value: nothing to learn
            noise[j] = max(s.noise_var[j], _noise_floor(s, p, j))
            continue
        s.magnitude[j] += (abs(y[j]) - s.magnitude[j]) * lam
        has_diff = s.t[0] > 0 and not np.isnan(s.prev_y[j])
        diff = y[j] - s.prev_y[j] if has_diff else 0.0
        if diff != 0.0 and (s.quantum[j] == 0.0 or abs(diff) < s.quantum[j]):
            s.quantum[j] = abs(diff)  # before the floor, which it bounds
        floor = _noise_floor(s, p, j)
        if has_diff:
            half_sq = 0.5 * diff * diff
            if n >= p.dwell:
                bound = p.noise_clip * p.noise_clip * max(s.noise_var[j], floor)
                half_sq = min(half_sq, bound)
                reach = np.sqrt(2.0 * bound)  # the difference is clipped as its square is
                diff = s.diff_mean[j] + min(max(diff - s.diff_mean[j], -reach), reach)
            s.noise_var[j] += (half_sq - s.noise_var[j]) * lam
            _learn_autocorrelation(s, j, diff, lam, 1.0 / (n + 1.0))
        noise[j] = max(s.noise_var[j], floor)
        s.prev_y[j] = y[j]
    _ar_in_force(s, p, ar)
    if s.t[0] > 0:
        s.noise_n[0] = n + 1


@_phase
def _learn_autocorrelation(s: KernelState, j: int, diff: float, lam_mean: float, lam: float) -> None:
    """Learn feature ``j``'s consecutive first differences: their recent mean (weight
    ``lam_mean``), and with weight ``lam`` their variance and lag-one covariance about it (so
    a trend, even one that changes, is not mistaken for autocorrelation). The mean a pair
    is centred on takes in a difference two windows late, so it holds neither of the two
    nor the neighbour of the earlier: white noise's differences correlate with their
    neighbours, and a mean that held one would bias the coefficient up by about
    ``lam_mean``."""
    dev = diff - s.diff_mean[j]
    if not np.isnan(s.diff_last[j]):
        s.diff_cov[j] += ((s.diff_last[j] - s.diff_mean[j]) * dev - s.diff_cov[j]) * lam
    if not np.isnan(s.diff_prev[j]):
        s.diff_mean[j] += (s.diff_prev[j] - s.diff_mean[j]) * lam_mean
    s.diff_var[j] += (dev * dev - s.diff_var[j]) * lam
    s.diff_prev[j] = s.diff_last[j]
    s.diff_last[j] = diff


@_phase
def _autocorrelation(s: KernelState, p: KernelParams, j: int) -> float:
    """Feature ``j``'s noise as AR(1), its coefficient ``phi`` in [0, 1]: the first
    differences of AR(1) noise have lag-one correlation ``-(1 - phi) / 2`` (white noise
    -1/2, a random walk 0). The estimate less ``ar_margin`` of its standard errors for
    white noise, ``sqrt(2 / n)`` after ``n`` differences: a coefficient the stream cannot
    tell from 0 is 0 (noise of white noise's estimate cost the steps of short series), and
    it grows as the evidence does. Zero without ``ar_noise``, and until ``dwell``
    differences are learnt."""
    if not p.ar_noise or s.noise_n[0] < p.dwell or s.diff_var[j] <= 0.0:
        return 0.0
    se = np.sqrt(2.0 / s.noise_n[0])  # the estimate's standard error under white noise
    return min(max(1.0 + 2.0 * s.diff_cov[j] / s.diff_var[j] - p.ar_margin * se, 0.0), 1.0)


@_phase
def _ar_in_force(s: KernelState, p: KernelParams, ar: np.ndarray) -> None:
    """Each feature's AR(1) coefficient in force (:func:`_autocorrelation`) into ``ar``."""
    for j in range(ar.shape[0]):
        ar[j] = _autocorrelation(s, p, j)


@_compiled
def ar_coefficients(s: KernelState, p: KernelParams) -> np.ndarray:
    """Each feature's AR(1) coefficient of the noise as the change test uses it now."""
    out = np.empty(s.prev_y.shape[0])
    _ar_in_force(s, p, out)
    return out


@_phase
def _off_level(
    s: KernelState, p: KernelParams, y: np.ndarray, count_var: np.ndarray, off: np.ndarray
) -> bool:
    """Which features of ``y`` (into ``off``) leave the last value learnt by a first
    difference beyond ``noise_clip`` standard deviations (of the noise learnt, or of the
    window's counts if they are noisier); whether any does. Nothing is off before the
    noise has been learnt for ``dwell`` differences."""
    found = False
    for j in range(y.shape[0]):
        off[j] = 0
        if s.noise_n[0] < p.dwell or np.isnan(y[j]) or np.isnan(s.prev_y[j]):
            continue
        var = max(s.noise_var[j], _noise_floor(s, p, j), count_var[j])
        if 0.5 * (y[j] - s.prev_y[j]) ** 2 > p.noise_clip * p.noise_clip * var:
            off[j] = 1
            found = True
    return found


@_phase
def _floor_variance(noise: np.ndarray, sums: np.ndarray, j: int, phi: float) -> float:
    """The least variance feature ``j`` can have over a segment: the learnt noise, and the
    mean variance its counts imply; of the innovations ``y - phi y_lag`` under AR(1) noise
    with coefficient ``phi`` (white noise of variance v leaves v (1 + phi) about the
    predecessor, and the counts' variance enters twice)."""
    return max(noise[j] * (1.0 + phi), sums[j, 6] / max(sums[j, 0], 1.0) * (1.0 + phi * phi))


@_phase
def _variance(p: KernelParams, noise: np.ndarray, sums: np.ndarray, j: int) -> float:
    """Feature ``j``'s variance about a segment's line: its residuals' own, shrunk towards
    the floor by ``dwell`` windows' worth of it (a segment shows its own noise once it has
    held ``dwell`` windows), and never below the floor (no segment is quieter than the
    series' own noise)."""
    return _shrunk(p, noise, sums, j, _line_rss(sums[j])[1])


@_phase
def _shrunk(p: KernelParams, noise: np.ndarray, sums: np.ndarray, j: int, rss: float) -> float:
    return _shrink(p, rss, sums[j, 0], _floor_variance(noise, sums, j, 0.0))


@_phase
def _shrink(p: KernelParams, rss: float, n: float, floor: float) -> float:
    """The variance of ``n`` windows with residual sum of squares ``rss``, shrunk towards
    ``floor`` by ``dwell`` windows' worth of it, and never below it."""
    return max((rss + p.dwell * floor) / (n + p.dwell), floor)


# -- change test -----------------------------------------------------------------------------


@_phase
def _line_rss(sums: np.ndarray) -> tuple[float, float]:
    """Residual sums of squares of one feature's segment about its mean and about its
    least-squares line."""
    return _rss(sums[0], sums[1], sums[2], sums[3], sums[4], sums[5])


@_phase
def _rss(sw: float, swu: float, swuu: float, swy: float, swuy: float, swyy: float) -> tuple[float, float]:
    """Residual sums of squares about the mean and about the least-squares line, from the
    sums of weights, time, time squared, value, time x value and value squared."""
    rss_mean = max(swyy - swy * swy / max(sw, _TINY), 0.0)
    det = sw * swuu - swu * swu
    if det <= 1e-9 * sw * swuu:  # one window, or all at one time: no slope to fit
        return rss_mean, rss_mean
    explained = (swuu * swy * swy - 2.0 * swu * swy * swuy + sw * swuy * swuy) / det
    return rss_mean, min(max(swyy - explained, 0.0), rss_mean)


@_phase
def _open_candidate(s: KernelState, p: KernelParams, y: np.ndarray) -> None:
    """A segment may start at this window: its prior is the best cost of all before it
    (the beam leaves room for one; :func:`_prune_candidates` restores the bound)."""
    n = s.n_cand[0]
    s.cand_start[n] = s.t[0]
    s.cand_prior[n] = s.best_cost[0] if s.t[0] > 0 else -_penalty(s, p)
    s.cand_ref[n, :] = y
    s.cand_sums[n, :, :] = 0.0
    s.n_cand[0] = n + 1


@_phase
def _drop_candidate(s: KernelState, c: int) -> None:
    last = s.n_cand[0] - 1
    if c != last:
        s.cand_start[c] = s.cand_start[last]
        s.cand_prior[c] = s.cand_prior[last]
        s.cand_ref[c, :] = s.cand_ref[last, :]
        s.cand_sums[c, :, :] = s.cand_sums[last, :, :]
    s.n_cand[0] = last


@_phase
def _segment_cost(p: KernelParams, noise: np.ndarray, ar: np.ndarray, sums: np.ndarray, j: int) -> float:
    """Negative log-likelihood (nats, less a constant per window) of feature ``j`` over a
    segment: its line plus AR(1) noise (coefficient ``ar[j]``) whose innovations have the
    segment's own (shrunk) variance. Given each window's predecessor, ``y - phi y_lag`` is
    a line plus white noise, so the cost is that of a line through it; with ``phi`` 0 it
    is the line through the values themselves."""
    sm = sums[j]
    phi = ar[j]
    n = sm[0]
    rss = _rss(
        n,
        sm[1],
        sm[2],
        sm[3] - phi * sm[7],
        sm[4] - phi * sm[10],
        sm[5] - 2.0 * phi * sm[9] + phi * phi * sm[8],
    )[1]
    var = _shrink(p, rss, n, _floor_variance(noise, sums, j, phi))
    return 0.5 * (n * np.log(var) + rss / var)


@_phase
def _extend_candidates(
    s: KernelState,
    p: KernelParams,
    y: np.ndarray,
    lag: np.ndarray,
    count_var: np.ndarray,
    noise: np.ndarray,
    ar: np.ndarray,
    totals: np.ndarray,
) -> int:
    """Add the window to every candidate segment and return the candidate whose partition
    is best (``totals``: each candidate's prior plus segment cost)."""
    best = 0
    for c in range(s.n_cand[0]):
        sums = s.cand_sums[c]
        _add(sums, s.cand_ref[c], float(s.t[0] - s.cand_start[c]), y, lag, count_var)
        cost = 0.0
        for j in range(y.shape[0]):
            cost += _segment_cost(p, noise, ar, sums, j)
        totals[c] = s.cand_prior[c] + cost
        if totals[c] < totals[best]:
            best = c
    return best


@_phase
def _prune_candidates(s: KernelState, p: KernelParams, totals: np.ndarray, best: int) -> int:
    """PELT's rule (a start whose partition is already worse than the best one plus a
    change can never win again) and the beam bound. Returns the best candidate's new slot."""
    limit = totals[best] + _penalty(s, p)
    best_start = s.cand_start[best]
    c = 0
    while c < s.n_cand[0]:
        if totals[c] > limit and s.cand_start[c] != s.boundary[0]:
            totals[c] = totals[s.n_cand[0] - 1]
            _drop_candidate(s, c)
        else:
            c += 1
    while s.n_cand[0] > p.recent + p.best + 1:
        victim = -1
        for c in range(s.n_cand[0]):
            start = s.cand_start[c]
            if start == s.boundary[0] or start > s.t[0] - p.recent or start == best_start:
                continue
            if victim < 0 or totals[c] > totals[victim]:
                victim = c
        if victim < 0:
            break
        totals[victim] = totals[s.n_cand[0] - 1]
        _drop_candidate(s, victim)
    for c in range(s.n_cand[0]):
        if s.cand_start[c] == best_start:
            return c
    return 0


@_phase
def _slot_of(s: KernelState, start: int) -> int:
    for c in range(s.n_cand[0]):
        if s.cand_start[c] == start:
            return c
    return -1


# -- regimes ---------------------------------------------------------------------------------


@_phase
def _mean(sums: np.ndarray, ref: np.ndarray, out: np.ndarray) -> None:
    """A segment's weighted mean per feature (into ``out``) from its sums."""
    for j in range(out.shape[0]):
        out[j] = ref[j] + sums[j, 3] / sums[j, 0] if sums[j, 0] > 0.0 else np.nan


@_phase
def _match(
    s: KernelState, p: KernelParams, sums: np.ndarray, ref: np.ndarray, noise: np.ndarray, level: np.ndarray
) -> int:
    """The steady regime whose level is consistent with a segment's mean (chi-square at
    most ``match_chi2``): the one in force if it is, else the least chi-square; -1 if none
    is. The segment's mean goes into ``level``."""
    _mean(sums, ref, level)
    n_seg = min(sums[0, 0], p.match_n)
    best = -1
    best_chi2 = _match_chi2(s, p)
    for i in range(s.n_regimes[0] + 1):
        r = s.current[0] if i == 0 else i - 1
        if r < 0 or (i > 0 and r == s.current[0]) or s.reg_kind[r] != STEADY:
            continue
        n_reg = min(max(s.reg_n[r], 1.0), p.match_n)
        chi2 = 0.0
        for j in range(level.shape[0]):
            if sums[j, 0] > 0.0 and not np.isnan(s.reg_level[r, j]):
                white = _variance(p, noise, sums, j) * (1.0 / n_seg + 1.0 / n_reg)
                chi2 += (level[j] - s.reg_level[r, j]) ** 2 / max(white, 2.0 * _level_spread(s, p, j))
        if chi2 <= best_chi2:
            if i == 0:
                return r
            best_chi2 = chi2
            best = r
    return best


@_phase
def _moves(s: KernelState, p: KernelParams, sums: np.ndarray, noise: np.ndarray) -> bool:
    """Does a segment's line move from its start to its end farther than a regime match
    tolerates (a hidden change, or a burst at one end, has not been cut off yet)? Under
    white noise of variance v the fitted line's rise over ``n`` windows has variance
    ``12 v (n - 1) / (n (n + 1))``, about ``12 v / n``: that is the null it is judged by."""
    chi2 = 0.0
    for j in range(sums.shape[0]):
        n, su, suu, sy, suy = sums[j, 0], sums[j, 1], sums[j, 2], sums[j, 3], sums[j, 4]
        det = n * suu - su * su
        if n < 2.0 or det <= 1e-9 * n * suu:
            continue
        moved = (n * suy - su * sy) / det * (n - 1.0)
        chi2 += _rise_chi2(s, p, j, moved, _variance(p, noise, sums, j), noise[j], n)
    return chi2 > _match_chi2(s, p)


@_phase
def _rise_chi2(
    s: KernelState, p: KernelParams, j: int, rise: float, var: float, noise: float, n: float
) -> float:
    """Feature ``j``'s share of the chi-square of a line's rise over ``n`` windows: under
    white noise of variance ``var`` about ``12 var / n`` (precision of at most ``match_n``
    windows), no finer than the spread of a regime's level, and no finer than the noise's
    AR(1) reading (:func:`_ar_rise_var`) gives a line by chance."""
    n_c = min(n, p.match_n)
    null = max(var * 12.0 / n_c, _ar_rise_var(noise, _autocorrelation(s, p, j), n, n_c))
    return rise * rise / max(null, 2.0 * _level_spread(s, p, j))


@_phase
def _ar_rise_var(noise: float, phi: float, n: float, n_c: float) -> float:
    """The variance of a least-squares line's rise over ``n`` windows of AR(1) noise with
    coefficient ``phi`` and variance ``noise`` as the change test reads it: the lesser of
    the stationary reading, ``12 g / n`` with ``g`` the noise's long-run variance (as
    :func:`_mean_var`; precision of at most ``n_c`` windows), and a random walk's with the
    same innovations (variance ``q = noise (1 + phi)``), exactly ``q 6 (n^2 + 1) (n - 1) /
    (5 n (n + 1))``, about ``1.2 q n``: a wandering series moves a line by chance, but by
    a random walk's wander, not without bound. White noise (``phi`` 0) adds nothing to the
    white null."""
    if phi <= 0.0:
        return 0.0
    q = noise * (1.0 + phi)
    walk = q * 6.0 * (n * n + 1.0) * (n - 1.0) / (5.0 * n * (n + 1.0))
    if phi >= 1.0:
        return walk
    return min(12.0 * _mean_var(noise, phi, n_c), walk)


@_phase
def _level_spread(s: KernelState, p: KernelParams, j: int) -> float:
    """The variance of feature ``j``'s level, block to block, as the regime tests allow
    for it: the spread learnt from ``n_blocks`` blocks, and at least ``level_prior`` over
    one more than that (before any block is learnt a level is taken to wander by the
    prior, not by white noise alone; the learnt spread takes over as blocks come in)."""
    return max(s.level_var[j], p.level_prior / (s.n_blocks[0] + 1.0))


@_phase
def _learn_level_spread(
    s: KernelState, p: KernelParams, y: np.ndarray, noise: np.ndarray, ar: np.ndarray
) -> None:
    """How far the mean of ``min_regime`` windows wanders from one such block to the next
    (half the mean squared difference of consecutive block means, clipped like the noise):
    the spread a regime's level has at the scale regimes are judged at, which white noise
    alone underrates when a workload wanders. Trace windows (white noise) learn it with the
    memory of a level's drift, as a workload's wander changes. Under AR(1) noise (series
    rows) it is a property of the stream, as the coefficient is: every block weighs the
    same (with the memory of drift, the block that straddles a step the change test has
    not confirmed yet weighs a third, and can widen the spread so far that the step passes
    for the level's wander), and a block difference that the regime tests would call a
    change (:func:`_block_step`) is not learnt (a step the change test missed: learnt, it
    widens the spread until every later step is within it)."""
    m = p.min_regime
    cur = s.current[0]
    if cur < 0 or s.excursion[0] >= 0 or s.reg_kind[cur] != STEADY or s.block_regime[0] != cur:
        # only blocks wholly inside one steady regime show its spread
        s.block_prev[:] = np.nan
        s.block_sum[:] = 0.0
        s.block_cnt[:] = 0.0
        s.block_n[0] = 0
        s.block_regime[0] = cur
        return
    for j in range(y.shape[0]):
        if not np.isnan(y[j]):
            s.block_sum[j] += y[j]
            s.block_cnt[j] += 1.0
    s.block_n[0] += 1
    if s.block_n[0] < m:
        return
    k = s.n_blocks[0]
    lam = 1.0 / k if k > 0 else 1.0
    if not p.ar_noise:
        lam = max(lam, p.drift_weight * m)
    means = np.full(y.shape[0], np.nan)  # the block's mean per feature (NaN: no window)
    for j in range(y.shape[0]):
        if s.block_cnt[j] > 0.0:
            means[j] = s.block_sum[j] / s.block_cnt[j]
    learn = not (p.ar_noise and k > 1 and _block_step(s, p, means, noise, ar) > _match_chi2(s, p))
    for j in range(y.shape[0]):
        if np.isnan(means[j]):
            continue
        if learn and not np.isnan(s.block_prev[j]):
            half_sq = 0.5 * (means[j] - s.block_prev[j]) ** 2
            if k > 1:
                ref = max(s.level_var[j], noise[j] / m)
                half_sq = min(half_sq, p.noise_clip * p.noise_clip * ref)
            s.level_var[j] += (half_sq - s.level_var[j]) * min(lam, 1.0)
        s.block_prev[j] = means[j]
    if learn and not np.isnan(s.block_prev[0]):
        s.n_blocks[0] = k + 1
    s.block_sum[:] = 0.0
    s.block_cnt[:] = 0.0
    s.block_n[0] = 0


@_phase
def _mean_var(noise: float, phi: float, n: float) -> float:
    """The variance of the mean of ``n`` windows of AR(1) noise of coefficient ``phi`` and
    variance ``noise`` as the change test reads it: ``noise (1 + phi) / ((1 - phi)^2 n)``."""
    return noise * (1.0 + phi) / ((1.0 - phi) ** 2 * n)


@_phase
def _block_step(
    s: KernelState, p: KernelParams, means: np.ndarray, noise: np.ndarray, ar: np.ndarray
) -> float:
    """The chi-square over the features of the block just ended (its ``means``) against the
    one before, in the spread of a level (half their squared difference over the spread,
    and at least over what the AR(1) noise of coefficient ``ar`` gives the mean of a block,
    :func:`_mean_var`): above ``match_chi2`` the two blocks are not one level. A feature
    whose noise is a random walk (``phi`` 1) has no level to step from, and counts
    nothing."""
    chi2 = 0.0
    m = p.min_regime
    for j in range(means.shape[0]):
        phi = ar[j]
        if not np.isnan(means[j]) and not np.isnan(s.block_prev[j]) and phi < 1.0:
            chi2 += 0.5 * (means[j] - s.block_prev[j]) ** 2 / max(s.level_var[j], _mean_var(noise[j], phi, m))
    return chi2


@_phase
def _nearest(s: KernelState, level: np.ndarray, noise: np.ndarray) -> int:
    """The steady regime nearest to ``level`` in noise units (-1: none)."""
    best = -1
    best_d = np.inf
    for r in range(s.n_regimes[0]):
        if s.reg_kind[r] != STEADY:
            continue
        dist = 0.0
        for j in range(level.shape[0]):
            if not (np.isnan(level[j]) or np.isnan(s.reg_level[r, j])):
                dist += (level[j] - s.reg_level[r, j]) ** 2 / noise[j]
        if dist < best_d:
            best_d = dist
            best = r
    return best


@_phase
def _set_level(s: KernelState, r: int, level: np.ndarray, n: float) -> None:
    """Regime ``r`` is founded (or a transition turns steady) at ``level``, the mean of
    ``n`` windows: where it starts from, and where it was founded."""
    s.reg_level[r, :] = level
    s.reg_n[r] = n
    s.reg_origin[r, :] = level
    s.reg_origin_n[r] = n


@_phase
def _found(s: KernelState, p: KernelParams, kind: int, level: np.ndarray, n: float, noise: np.ndarray) -> int:
    """A new regime at ``level``; when ``max_regimes`` are known, the nearest steady one
    stands in for it (for a transition: none)."""
    k = s.n_regimes[0]
    if k < p.max_regimes:
        s.reg_kind[k] = kind
        _set_level(s, k, level, n)
        s.n_regimes[0] = k + 1
        return k
    return -1 if kind == TRANSITION else _nearest(s, level, noise)


@_phase
def _switch(s: KernelState, log: ChangeLog, to: int, at: int) -> None:
    """Make ``to`` the regime in force from window ``at`` on: record the change, relabel the
    windows of this call from ``at`` (labels are back-dated to the change)."""
    if to < 0 or to == s.current[0]:
        return
    k = log.n_rows[0]
    log.changes[k, 0] = s.current[0]
    log.changes[k, 1] = to
    log.changes[k, 2] = at
    log.changes[k, 3] = s.t[0]
    log.n_rows[0] = k + 1
    t0 = log.t0[0]
    for i in range(max(at - t0, 0), min(s.t[0] - t0 + 1, log.labels.shape[0])):
        log.labels[i] = to
    s.current[0] = to
    s.current_since[0] = at


@_phase
def _commit(s: KernelState, start: int) -> None:
    """The segment from ``start`` is confirmed: earlier starts can no longer be the last
    change (the costs are re-based so they stay small over long runs)."""
    s.boundary[0] = start
    s.boundary_t[0] = s.t[0]
    c = 0
    while c < s.n_cand[0]:
        if s.cand_start[c] < start:
            _drop_candidate(s, c)
        else:
            c += 1
    base = s.best_cost[0]
    for c in range(s.n_cand[0]):
        s.cand_prior[c] -= base
    s.best_cost[0] = 0.0


@_phase
def _judge_new_segment(
    s: KernelState,
    p: KernelParams,
    c: int,
    noise: np.ndarray,
    level: np.ndarray,
) -> None:
    """A segment confirmed by the change test: back at the level in force (what came between
    was a burst), or an excursion opens (or goes on). Only a level that holds decides a
    regime (:func:`_settle`), whether it is a known one or new."""
    start = s.cand_start[c]
    ended = np.zeros_like(s.exc_first)  # the segment that ends here: the last committed less this one
    first = _slot_of(s, s.boundary[0])
    line = np.empty((ended.shape[0], N_LINE))
    _ended_line(s, first, c, line)
    if line[0, 2] >= p.dwell:  # shorter segments are the change test's jitter at a boundary
        s.last_line[:, :] = line
    _absolute(s.cand_sums[first], s.cand_ref[first], ended, 1.0)
    _absolute(s.cand_sums[c], s.cand_ref[c], ended, -1.0)
    cur = s.current[0]
    if (s.excursion[0] >= 0 and s.boundary[0] == s.excursion[0]) or (
        cur >= 0 and s.reg_kind[cur] == TRANSITION and s.boundary[0] == s.current_since[0]
    ):
        # the first segment of an excursion (_settle compares levels with it), or of a
        # transition founded before that segment ended: where it set out
        s.exc_first[:, :] = ended
    if s.excursion[0] >= 0 and s.boundary[0] >= s.excursion[0]:
        s.exc_stats[:, :] += ended  # the excursion's windows so far, but for the latest segment's
    origin = np.full(ended.shape[0], np.nan)  # where a transition set out: its first segment's mean
    _mean_of(s.exc_first, origin)
    _extend_run(s, p, ended, noise)
    _commit(s, start)
    c = _slot_of(s, start)
    if (
        cur >= 0
        and s.reg_kind[cur] == STEADY
        and _match(s, p, s.cand_sums[c], s.cand_ref[c], noise, level) == cur
    ):
        s.excursion[0] = -1  # back at the level in force: what came between was a burst
    elif cur >= 0 and s.reg_kind[cur] == TRANSITION and s.excursion[0] >= 0:
        if not _off_line(s, p, s.exc_line, c, noise, origin):
            s.excursion[0] = -1  # back on the transition's line: what came between was a burst
    elif (
        s.excursion[0] < 0
        and cur >= 0
        and (
            s.reg_kind[cur] == STEADY
            or (
                start - s.current_since[0] >= p.min_regime
                and _line_moves(s, p, s.last_line, noise)
                and _off_line(s, p, s.last_line, c, noise, origin)
            )
        )
    ):
        # in a transition, a jump off a moving line may start another regime (a bend does
        # not; after a line that holds still, the level that follows decides, as after a
        # ramp; the transition's first min_regime windows are the excursion that founded it)
        s.excursion[0] = start
        s.exc_line[:, :] = s.last_line
        s.exc_stats[:, :] = 0.0


@_phase
def _mean_of(stats: np.ndarray, out: np.ndarray) -> None:
    """The mean of ``stats`` (windows, sum, sum of squares per feature) into ``out``, where
    a feature has windows."""
    for j in range(out.shape[0]):
        if stats[j, 0] > 0.0:
            out[j] = stats[j, 1] / stats[j, 0]


@_phase
def _line_moves(s: KernelState, p: KernelParams, line: np.ndarray, noise: np.ndarray) -> bool:
    """Does a line (as :func:`_ended_line` stores it) move over its windows farther than a
    regime match tolerates (the null of :func:`_moves`)?"""
    chi2 = 0.0
    for j in range(line.shape[0]):
        n = line[j, 2]
        if n >= 2.0:
            chi2 += _rise_chi2(s, p, j, line[j, 1] * (n - 1.0), noise[j], noise[j], n)
    return chi2 > _match_chi2(s, p)


@_phase
def _fit(n: float, su: float, suu: float, sy: float, suy: float) -> tuple[float, float, float]:
    """The mean time, slope and sum of squared time deviations of a least-squares line
    through ``n`` windows (no slope, and an infinite sum, when the windows give none)."""
    sxx = suu - su * su / n
    if n >= 2.0 and sxx > 1e-9 * max(suu, 1.0):
        return su / n, (suy - su * sy / n) / sxx, sxx
    return su / n, 0.0, np.inf


@_phase
def _ended_line(s: KernelState, first: int, c: int, out: np.ndarray) -> None:
    """The line of the committed segment (candidate ``first``) less candidate ``c``'s
    windows, per feature (into ``out``, :data:`N_LINE` columns): its value at ``c``'s first
    window, its slope per window, its windows, that window less their mean time, the sum
    of their squared time deviations, and that window."""
    a = float(s.cand_start[c] - s.cand_start[first])  # c's origin in first's time
    for j in range(out.shape[0]):
        f, g = s.cand_sums[first, j], s.cand_sums[c, j]
        b = s.cand_ref[c, j] - s.cand_ref[first, j]  # c's values in first's centring
        n = f[0] - g[0]
        out[j, :] = 0.0
        if n < 1.0:
            continue
        su = f[1] - (g[1] + a * g[0])
        suu = f[2] - (g[2] + 2.0 * a * g[1] + a * a * g[0])
        sy = f[3] - (g[3] + b * g[0])
        suy = f[4] - (g[4] + a * g[3] + b * g[1] + a * b * g[0])
        mean_u, slope, sxx = _fit(n, su, suu, sy, suy)
        out[j, 0] = s.cand_ref[first, j] + sy / n + slope * (a - mean_u)
        out[j, 1] = slope
        out[j, 2] = n
        out[j, 3] = a - mean_u
        out[j, 4] = sxx
        out[j, 5] = s.cand_start[c]


@_phase
def _off_line(
    s: KernelState,
    p: KernelParams,
    line: np.ndarray,
    c: int,
    noise: np.ndarray,
    origin: np.ndarray,
) -> bool:
    """Does candidate ``c`` start off ``line`` (as :func:`_ended_line` stores it), carried on
    to ``c``'s first window, by more than a regime match tolerates? A segment that goes on from
    where the line was heading does not (a bend), nor one that steps further the way the
    transition moves, away from where it set out (``origin``: a decline's drops); one that
    jumps elsewhere does."""
    chi2 = 0.0
    limit = _match_chi2(s, p)
    for j in range(line.shape[0]):
        value, slope, n, du, sxx = line[j, 0], line[j, 1], line[j, 2], line[j, 3], line[j, 4]
        sums = s.cand_sums[c, j]
        if n < 1.0 or sums[0] < 1.0:
            continue
        dt = float(s.cand_start[c]) - line[j, 5]
        mean_u, new_slope, new_sxx = _fit(sums[0], sums[1], sums[2], sums[3], sums[4])
        new = s.cand_ref[c, j] + sums[3] / sums[0] - new_slope * mean_u  # c's line at its start
        w_new = 1.0 / sums[0] + mean_u * mean_u / new_sxx
        jump = new - (value + slope * dt)
        away = value - origin[j]  # how far the line has moved from where the transition set out
        if away * away > limit * noise[j] * (1.0 / min(n, p.match_n)) and (
            away * jump > 0.0 or (abs(jump) < abs(away) and new_slope * away > 0.0)
        ):
            # a step further the way the transition moves, or part of the way back by a
            # segment that still moves that way: the same movement, uneven
            continue
        w_line = 1.0 / n + (du + dt) ** 2 / sxx
        chi2 += jump * jump / (noise[j] * (w_line + w_new) + 2.0 * _level_spread(s, p, j))
    return chi2 > limit


@_phase
def _absolute(sums: np.ndarray, ref: np.ndarray, out: np.ndarray, sign: float) -> None:
    """Add ``sign`` x a segment's windows, sum and sum of squares per feature (uncentred)
    to ``out``, so the stats of a segment's leading part are those of the whole less its
    tail."""
    for j in range(out.shape[0]):
        n, sy, syy = sums[j, 0], sums[j, 3], sums[j, 5]
        out[j, 0] += sign * n
        out[j, 1] += sign * (sy + n * ref[j])
        out[j, 2] += sign * (syy + 2.0 * ref[j] * sy + n * ref[j] * ref[j])


@_phase
def _level_chi2(
    s: KernelState, p: KernelParams, j: int, n_a: float, mean_a: float, n_b: float, mean_b: float, var: float
) -> float:
    """Feature ``j``'s share of the chi-square between two levels (means of ``n_a`` and
    ``n_b`` windows, noise variance ``var``), as a regime match judges it: precision of at
    most ``match_n`` windows a side, and no finer than the spread of a regime's level."""
    white = var * (1.0 / min(n_a, p.match_n) + 1.0 / min(n_b, p.match_n))
    return (mean_a - mean_b) ** 2 / max(white, 2.0 * _level_spread(s, p, j))


@_phase
def _same_level(s: KernelState, p: KernelParams, stats: np.ndarray, c: int, noise: np.ndarray) -> bool:
    """Is candidate segment ``c``'s mean consistent with the level of ``stats`` (windows,
    sum, sum of squares per feature)?"""
    chi2 = 0.0
    sums = s.cand_sums[c]
    for j in range(stats.shape[0]):
        n_a, n_b = stats[j, 0], sums[j, 0]
        if n_a >= 1.0 and n_b >= 1.0:
            mean_b = s.cand_ref[c, j] + sums[j, 3] / n_b
            var = _variance(p, noise, sums, j)
            chi2 += _level_chi2(s, p, j, n_a, stats[j, 1] / n_a, n_b, mean_b, var)
    return chi2 <= _match_chi2(s, p)


@_phase
def _extend_run(s: KernelState, p: KernelParams, ended: np.ndarray, noise: np.ndarray) -> None:
    """A committed segment has ended (``ended``: its windows, sum, sum of squares): it joins
    the run of segments before it if its mean is consistent with theirs (the change test
    cut a level in two: noise, a dip), else it starts a new run."""
    chi2 = 0.0
    run = s.run_stats
    for j in range(ended.shape[0]):
        n_a, n_b = run[j, 0], ended[j, 0]
        if n_a >= 1.0 and n_b >= 1.0:
            mean_b = ended[j, 1] / n_b
            rss = max(ended[j, 2] - n_b * mean_b * mean_b, 0.0)
            var = _shrink(p, rss, n_b, max(noise[j], 1e-12))
            chi2 += _level_chi2(s, p, j, n_a, run[j, 1] / n_a, n_b, mean_b, var)
    if run[0, 0] >= 1.0 and chi2 <= _match_chi2(s, p):
        run += ended
    else:
        run[:, :] = ended
        s.run_start[0] = s.boundary[0]


@_phase
def _add(
    sums: np.ndarray, ref: np.ndarray, u: float, y: np.ndarray, lag: np.ndarray, count_var: np.ndarray
) -> None:
    """Add a window at time ``u`` (from the segment's start), and the value before it
    (``lag``; none: the value itself), to a segment's sums."""
    for j in range(y.shape[0]):
        if np.isnan(y[j]):  # a missing value adds nothing
            continue
        if sums[j, 0] == 0.0:
            ref[j] = y[j]  # the feature's first value in this segment centres its sums
        yc = y[j] - ref[j]
        sm = sums[j]
        sm[0] += 1.0
        sm[1] += u
        sm[2] += u * u
        sm[3] += yc
        sm[4] += u * yc
        sm[5] += yc * yc
        sm[6] += count_var[j]
        lc = (y[j] if np.isnan(lag[j]) else lag[j]) - ref[j]
        sm[7] += lc
        sm[8] += lc * lc
        sm[9] += yc * lc
        sm[10] += u * lc


@_phase
def _stood(s: KernelState, p: KernelParams) -> bool:
    """Has the last committed boundary stood ``min_regime - dwell`` windows since the change
    test drew it? A boundary drawn over windows already seen (the test re-dating its last
    cut) chose the segment behind it to fit them, so that segment's line is evidence only
    with windows that came after the cut. A boundary committed as soon as the test can
    (``dwell`` windows into its segment) has stood as long once its segment has lasted
    ``min_regime``."""
    return s.t[0] - s.boundary_t[0] >= p.min_regime - p.dwell


@_phase
def _held_since(s: KernelState, p: KernelParams, latest: int, noise: np.ndarray) -> int:
    """The first window of a level that holds now, or -1. A level holds when the best
    partition still ends with the committed segment, its line does not move (no change
    hides inside it) and it has lasted ``min_regime`` windows, with the run of segments
    before it that held the same level (since the regime in force began, and within the
    excursion); or when, after a burst, the latest segment is back at the level the
    excursion began with."""
    t, at, exc, run = s.t[0], s.boundary[0], s.excursion[0], s.run_start[0]
    if s.cand_start[latest] != at or _moves(s, p, s.cand_sums[latest], noise):
        return -1
    if (
        run < at
        and run >= s.current_since[0]
        and (exc < 0 or run >= exc)
        and t - run + 1 >= p.min_regime
        and _same_level(s, p, s.run_stats, latest, noise)
    ):
        return run
    if t - at + 1 >= p.min_regime:
        return at
    if (
        exc >= 0
        and at > exc
        and t - exc + 1 >= p.min_regime
        and _same_level(s, p, s.exc_first, latest, noise)
    ):
        return exc
    return -1


@_phase
def _between(stats: np.ndarray, old: np.ndarray, new: np.ndarray, noise: np.ndarray) -> bool:
    """Does the mean of ``stats`` (windows, sum, sum of squares per feature) lie between the
    levels ``old`` and ``new``, projected on the line from one to the other in noise units?"""
    along, span = 0.0, 0.0
    for j in range(stats.shape[0]):
        if stats[j, 0] >= 1.0 and not (np.isnan(old[j]) or np.isnan(new[j])):
            w = 1.0 / max(noise[j], 1e-12)
            along += (stats[j, 1] / stats[j, 0] - old[j]) * (new[j] - old[j]) * w
            span += (new[j] - old[j]) ** 2 * w
    return span > 0.0 and 0.0 <= along <= span


@_phase
def _pool(s: KernelState, latest: int, stats: np.ndarray, level: np.ndarray) -> float:
    """The mean of the latest segment and of ``stats`` (windows, sum, sum of squares per
    feature) together, into ``level``; returns their windows."""
    pooled = stats.copy()
    _absolute(s.cand_sums[latest], s.cand_ref[latest], pooled, 1.0)
    _mean_of(pooled, level)
    return pooled[0, 0]


@_phase
def _on_level(
    s: KernelState,
    p: KernelParams,
    latest: int,
    at: int,
    noise: np.ndarray,
    level: np.ndarray,
    log: ChangeLog,
) -> None:
    """A level holds from window ``at`` after an excursion or during a transition: it is a
    known regime or a new one; what led to it is a transition of its own (``min_regime``
    windows or more), a ramp (shorter, between the two levels, and its first segment off
    the level it left: it joins the level it led to), the level's wander (its first segment
    at the level it left: the new level begins where it holds) or a burst of the regime in
    force (shorter, and not on the way). A transition in force that began fewer than
    ``min_regime`` windows before a new level was a ramp into it too: it becomes that
    level, a steady regime under its id."""
    exc = s.excursion[0]
    cur = s.current[0]
    n = float(s.t[0] - at + 1)
    r = _match(s, p, s.cand_sums[latest], s.cand_ref[latest], noise, level)
    if at < s.boundary[0]:  # the level held before the latest segment too: its level is theirs
        n = _pool(s, latest, s.run_stats if at == s.run_start[0] else s.exc_first, level)
    if exc >= 0 and at - exc >= p.min_regime:
        _switch(s, log, _found(s, p, TRANSITION, level, 1.0, noise), exc)
    elif exc >= 0 and (
        cur < 0
        or (
            s.reg_kind[cur] == STEADY
            and _between(s.exc_first, s.reg_level[cur], level, noise)
            and not _at_level(s, p, s.exc_first, noise)
        )
    ):
        at = exc  # a short ramp belongs to the level it led to
    if (
        r < 0
        and cur >= 0
        and s.current[0] == cur
        and s.reg_kind[cur] == TRANSITION
        and at - s.current_since[0] < p.min_regime
    ):
        # the "transition" was this level from its start, or a ramp into it (shorter than
        # a regime: it belongs to the level it led to, as an excursion's ramp does)
        s.reg_kind[cur] = STEADY
        _set_level(s, cur, level, n)
    else:
        r = r if r >= 0 else _found(s, p, STEADY, level, n, noise)
        _switch(s, log, r, at)
    s.excursion[0] = -1


@_phase
def _settle(
    s: KernelState,
    p: KernelParams,
    latest: int,
    noise: np.ndarray,
    ar: np.ndarray,
    level: np.ndarray,
    log: ChangeLog,
) -> None:
    """Every window: a level that has held ``min_regime`` windows after an excursion (or
    during a transition) is a regime, known or new, and what led to it a ramp (shorter
    than ``min_regime``) or a transition; an excursion that has lasted ``min_regime``
    windows without a level holding, and has not come back (its latest segment, and its
    windows as a whole), is a transition, and so, under white noise, is one from
    a steady level whose latest segment has moved for ``min_regime`` windows (a decline the
    change test reads as one line, which it ends only where the line turns level) once the
    segment's boundary has stood (:func:`_stood`: a cut re-dated over windows already seen
    waits for windows after it). Else the
    regime in force learns the window; under AR(1) noise, a steady level that has ridden
    away from where it was founded (:func:`_rode_away`: a ramp it followed as drift) is a
    transition from its latest committed segment on."""
    exc = s.excursion[0]
    cur = s.current[0]
    unsettled = exc >= 0 or s.reg_kind[cur] == TRANSITION
    since = _held_since(s, p, latest, noise) if unsettled else -1
    committed_lasted = s.t[0] - s.boundary[0] + 1 >= p.min_regime  # the committed segment
    if since >= 0:
        _on_level(s, p, latest, since, noise, level, log)
    elif exc >= 0 and (
        s.boundary[0] - exc >= p.min_regime
        or (p.ar_noise and cur < 0 and committed_lasted)
        or (
            not p.ar_noise
            and cur >= 0
            and s.reg_kind[cur] == STEADY
            and s.cand_start[latest] == s.boundary[0]
            and committed_lasted
            and _stood(s, p)
            and _moves(s, p, s.cand_sums[latest], noise)
        )
    ):
        # no level has held for min_regime windows (or, under white noise, the latest segment
        # has moved for as long: AR(1) noise moves lines by chance, and its coefficient is
        # read shrunk towards white), and the excursion has not come back, judged on the
        # latest segment and on all its windows (before the first regime there is nothing to
        # come back to; under AR(1) noise a series that wanders from its start may be one
        # segment the change test never ends)
        r = _match(s, p, s.cand_sums[latest], s.cand_ref[latest], noise, level)  # level: the latest's
        if cur < 0 or (r != cur and not _came_back(s, p, latest, noise)):
            _switch(s, log, _found(s, p, TRANSITION, level, 1.0, noise), exc)
            s.excursion[0] = -1
    if s.excursion[0] < 0 and s.current[0] >= 0:
        _learn_level(s, p, noise)
        if p.ar_noise and _rode_away(s, p, noise, ar):
            if s.boundary[0] <= s.current_since[0]:
                s.reg_kind[s.current[0]] = TRANSITION  # it rode from its start: never a level
            else:
                # the drift it followed was the ramp: its level is where it was founded, or
                # the transition would match the regime it left by the level it rode to
                s.reg_level[s.current[0], :] = s.reg_origin[s.current[0], :]
                _mean(s.cand_sums[latest], s.cand_ref[latest], level)
                _switch(s, log, _found(s, p, TRANSITION, level, 1.0, noise), s.boundary[0])


@_phase
def _rode_away(s: KernelState, p: KernelParams, noise: np.ndarray, ar: np.ndarray) -> bool:
    """Has the steady level in force, following its windows as drift, moved from where it
    was founded farther than its wander allows (chi-square over the features above
    ``match_chi2``)? A level wanders by its block-to-block spread as the regime tests allow
    for it (:func:`_level_spread`; at least what the AR(1) noise gives a block mean,
    :func:`_mean_var`) per block of ``min_regime`` windows it has learnt since its
    founding, plus one block for its own estimate, plus the founding mean's own error
    (the noise's variance of a mean of its windows); it is judged once it
    has learnt a block. A feature read as a random walk (``phi`` 1) has no level to ride
    away from."""
    cur = s.current[0]
    m = p.min_regime
    held = s.reg_n[cur] - s.reg_origin_n[cur]
    if s.reg_kind[cur] != STEADY or held < m:
        return False
    chi2 = 0.0
    for j in range(noise.shape[0]):
        phi = ar[j]
        away = s.reg_level[cur, j] - s.reg_origin[cur, j]
        if phi < 1.0 and not np.isnan(away):
            spread = max(_level_spread(s, p, j), _mean_var(noise[j], phi, m))
            founding = _mean_var(noise[j], phi, max(s.reg_origin_n[cur], 1.0))
            chi2 += away * away / (spread * (held / m + 1.0) + founding)
    return chi2 > _match_chi2(s, p)


@_phase
def _came_back(s: KernelState, p: KernelParams, latest: int, noise: np.ndarray) -> bool:
    """Are the excursion's windows as a whole (its ended segments and the latest) at the
    steady level in force? Dips that cut a level, and a sag that a dip ends, make an
    excursion that never holds a level for ``min_regime`` windows; its latest segment
    alone may be the dip, so whether it came back is judged on all of it."""
    cur = s.current[0]
    if cur < 0 or s.reg_kind[cur] != STEADY:
        return False
    whole = s.exc_stats.copy()
    _absolute(s.cand_sums[latest], s.cand_ref[latest], whole, 1.0)
    return _at_level(s, p, whole, noise)


@_phase
def _at_level(s: KernelState, p: KernelParams, stats: np.ndarray, noise: np.ndarray) -> bool:
    """Are the windows of ``stats`` (windows, sum, sum of squares per feature) at the level
    of the steady regime in force?"""
    cur = s.current[0]
    chi2 = 0.0
    for j in range(stats.shape[0]):
        n = stats[j, 0]
        if n >= 1.0 and not np.isnan(s.reg_level[cur, j]):
            mean = stats[j, 1] / n
            chi2 += _level_chi2(s, p, j, n, mean, max(s.reg_n[cur], 1.0), s.reg_level[cur, j], noise[j])
    return chi2 <= _match_chi2(s, p)


@_phase
def _learn_level(s: KernelState, p: KernelParams, noise: np.ndarray) -> None:
    """The regime in force learns the window: a running mean of its windows, winsorised (a
    dip or a spike barely moves it), that follows slow drift (step floored at
    ``drift_weight``) when the regime is steady."""
    cur = s.current[0]
    step = max(1.0 / (s.reg_n[cur] + 1.0), p.drift_weight if s.reg_kind[cur] == STEADY else 0.0)
    for j in range(s.prev_y.shape[0]):
        if np.isnan(s.reg_level[cur, j]):
            s.reg_level[cur, j] = s.prev_y[j]
        elif not np.isnan(s.prev_y[j]):
            bound = p.noise_clip * np.sqrt(noise[j])
            dev = min(max(s.prev_y[j] - s.reg_level[cur, j], -bound), bound)
            s.reg_level[cur, j] += dev * step
    s.reg_n[cur] += 1.0


@_phase
def _step(
    s: KernelState, p: KernelParams, y: np.ndarray, count_var: np.ndarray, w: Scratch, log: ChangeLog
) -> None:
    """Learn one window: noise, change test, regimes (its label is the regime in force
    once it is learnt)."""
    _learn_noise(s, p, y, w.noise, w.lag, w.ar)
    _open_candidate(s, p, y)
    best = _extend_candidates(s, p, y, w.lag, count_var, w.noise, w.ar, w.totals)
    best = _prune_candidates(s, p, w.totals, best)
    s.best_cost[0] = w.totals[best] + _penalty(s, p)
    t = s.t[0]
    start = s.cand_start[best]
    if start > s.boundary[0] and t - start + 1 >= p.dwell:
        _judge_new_segment(s, p, best, w.noise, w.level)
    _settle(s, p, _slot_of(s, start), w.noise, w.ar, w.level, log)
    _learn_level_spread(s, p, y, w.noise, w.ar)
    k = t - log.t0[0]
    if 0 <= k < log.labels.shape[0]:
        log.labels[k] = s.current[0]
    s.t[0] = t + 1


@_phase
def _release(
    s: KernelState, p: KernelParams, y: np.ndarray, count_var: np.ndarray, w: Scratch, log: ChangeLog
) -> None:
    """Learn the window held back, now that ``y`` follows it: a feature that left the level
    and is back in ``y`` was a one-window dip (or spike) and is learnt as missing; one
    that stays away moved with a change, and is learnt as it was."""
    _off_level(s, p, y, count_var, w.off)  # is y off the level the held window left?
    row = s.pend_y.copy()
    for j in range(row.shape[0]):
        if s.pend_off[j] == 1 and w.off[j] == 0:
            row[j] = np.nan
    s.pending[0] = 0
    _step(s, p, row, s.pend_v, w, log)


@_compiled
def run(
    s: KernelState, p: KernelParams, x: np.ndarray, count_var: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Feed the rows of ``x`` (windows x features) with their counts' variances. Returns
    back-dated labels, online labels (the regime in force at each window) and the
    confirmed changes as rows ``(from, to, at, confirmed)`` in absolute window counts.

    A window whose features leave the level by more than ``noise_clip`` standard deviations
    of a first difference is held back one window: if the next window is back, the window
    was a dip and those features are learnt as missing (see :func:`_release`). A window
    held back at the end of a call is learnt in the next; its label is the regime in force
    until then."""
    n = x.shape[0]
    log: ChangeLog = ChangeLogRef(  # type: ignore[assignment,call-arg]  # the same fields
        labels=np.full(n, -1, dtype=np.int64),
        changes=np.zeros((2 * n + 2, 4), dtype=np.int64),
        n_rows=np.zeros(1, dtype=np.int64),
        t0=np.full(1, s.t[0] + s.pending[0], dtype=np.int64),
    )
    online = np.full(n, -1, dtype=np.int64)
    d = x.shape[1]
    w: Scratch = ScratchRef(  # type: ignore[assignment,call-arg]
        noise=np.empty(d),
        ar=np.empty(d),
        lag=np.empty(d),
        level=np.empty(d),
        totals=np.empty(s.cand_start.shape[0]),
        off=np.zeros(d, dtype=np.int64),
    )
    for i in range(n):
        if s.pending[0] == 1:
            _release(s, p, x[i], count_var[i], w, log)
        if _off_level(s, p, x[i], count_var[i], w.off):
            s.pending[0] = 1
            s.pend_y[:] = x[i]
            s.pend_v[:] = count_var[i]
            s.pend_off[:] = w.off
        else:
            _step(s, p, x[i], count_var[i], w, log)
        online[i] = s.current[0]
    for k in range(max(s.t[0] - log.t0[0], 0), n):  # the window held back, if any
        log.labels[k] = s.current[0]
    return log.labels, online, log.changes[: log.n_rows[0]]


@_compiled
def run_fields(
    state: tuple, params: tuple, x: np.ndarray, count_var: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`run` with the state and the parameters as plain tuples of their fields, the
    entry point the detector calls. numba's dispatcher types a plain tuple by a fast
    fingerprint of its items, but a named tuple of more than ten fields (the state has 43)
    on a slow path: a call with no rows took 15-17 µs with the named tuples and 9 µs with
    plain ones, which is a sixth of a per-window ``update``."""
    return run(KernelStateRef(*state), KernelParams(*params), x, count_var)  # type: ignore[arg-type]
