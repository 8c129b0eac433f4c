"""The detector's per-window loop, compiled with numba (the loop is inherently sequential).

State lives in plain numpy arrays so the Python side can save it as JSON and the online
(one window) and batch (a whole frame) paths run the very same code. ``istate`` holds the
integer state in the slots named below; ``params`` the settings in the ``P_*`` slots.

Per window, after a warm-up that founds regime 0:

* the point goes into a short history ring (all features), a longer one (the trend feature,
  the log read rate) and an EWMA smoother;
* a *candidate change* opens when the smoothed point is farther than ``radius`` from every
  steady regime and from the current one, or when the local test fires: the mean of the
  last ``dwell`` points left the line fitted to the current regime's recent past (which
  ends ``2 dwell`` windows earlier, so the onset of a smooth decline shows as well as a
  step) by ``z`` standard errors in features whose shift adds up to ``min_shift`` feature
  units. Two or more features that each moved by ``0.6 z`` standard errors count as well
  when together (root sum of squares) they exceed ``1.2 z``: a gradual onset shows in
  several statistics at once (top-k share and entropy) before any one of them is beyond
  ``z``. Each regime learns its own noise from the test's residuals (root mean square,
  clipped), so correlated or heavy-tailed features are not overconfident;
* a candidate settles once ``dwell`` raw points in a row sit at one level (twice that for
  a small shift seen in a single feature). The level is matched: a known steady regime
  within ``radius`` returns; the current one holds when the level does not differ from it
  significantly (a burst, a false alarm); a young regime that keeps moving away from where
  it came from becomes a *transition*; else a new regime is founded there;
* a young regime is a transition too when a feature's slope over its life is significant
  and amounts to ``move_min`` units (the decline after a flash crowd: it differs from a
  plateau in slope, not level). A transition's centroid follows the points, only a step of
  ``radius`` off its line interrupts it, and it ends when its trend has levelled off: over
  the last ``settle_frac`` of its age (at most ``span`` windows), the slope plus
  ``settle_t`` standard errors is below ``settle_share`` of its mean slope so far. The new
  plateau is dated back to the knee of a line-then-flat fit;
* between candidates, hysteresis (``dwell`` windows nearer to another known regime by
  ``margin``) switches between known regimes, and the nearest centroid learns the point.

Every change is dated to where its evidence began, and labels are back-dated to it.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# istate slots
(
    K_ACTIVE,  # regimes known
    CUR,  # the confirmed regime (-1 before the first)
    CAND,  # hysteresis: the known regime that is taking over
    CAND_RUN,
    CAND_START,
    NOV_RUN,  # windows since a candidate change opened
    NOV_START,  # where its evidence began (-1: no candidate open)
    T,  # windows seen (absolute counter)
    N_BUF,  # warm-up windows collected
    LATE_N,  # raw points of the candidate at its latest level
    PREV,  # the regime before the current one (-1 at the start)
    CUR_SINCE,  # when the current regime took over
    HIST_N,  # valid rows in the history ring
    TREND_N,  # valid rows in the trend feature's (longer) history ring
    M_ORIGIN,  # first window of the current regime's motion sums
    M_N,  # windows in them
) = range(16)
N_ISTATE = 16

# params slots
(
    P_ALPHA,  # EWMA weight of a new window
    P_RADIUS,  # novelty distance, feature units
    P_MARGIN,  # hysteresis between known regimes, feature units
    P_DWELL,  # windows a change must hold
    P_N_CAP,  # steady centroids learn with step >= 1 / n_cap
    P_SKIP,  # windows ignored at the start of a stream
    P_FLOOR,  # > 0: distances in warm-up noise units floored at this
    P_Z,  # significance of the local test, noise units
    P_MIN_SHIFT,  # smallest significant shift that is a change, feature units
    P_BASE,  # windows of recent past the local test compares with
    P_SIGMA_FLOOR,  # smallest noise of a feature, feature units
    P_TREND_J,  # column of the trend feature (-1: no transitions)
    P_SPAN,  # most windows of the flatness test, and how long a regime stays young
    P_SETTLE_T,  # standard errors of the trend's slope allowed in the flatness test
    P_SETTLE_FRAC,  # share of a transition's age that the flatness test looks at
    P_SETTLE_SHARE,  # share of its mean slope below which a transition's trend is flat
    P_MOVE_T,  # |t| of a feature's slope above which a young regime is a transition
    P_MOVE_MIN,  # ... when the feature also moved by this many feature units
    P_N_FOLLOW,  # a transition's centroid follows with step >= 1 / n_follow
) = range(19)
N_PARAMS = 19

#: The running noise estimate averages over about this many windows.
_NOISE_N = 64
#: A single feature's shift of this many times ``z`` standard errors and half ``radius``
#: is confirmed as quickly as a large one.
_STRONG = 1.2
#: Two or more features that each moved by ``_JOINT_LO z`` standard errors are significant
#: when their shifts add up (root sum of squares) to ``_JOINT z``: the onset of a gradual
#: change often shows in several statistics at once before any single one is beyond ``z``.
_JOINT_LO = 0.6
_JOINT = 1.2


def new_state(k_max: int, d: int, warmup: int, history: int, trend_history: int) -> dict[str, np.ndarray]:
    istate = np.zeros(N_ISTATE, dtype=np.int64)
    istate[CUR] = -1
    istate[CAND] = -1
    istate[PREV] = -1
    istate[NOV_START] = -1
    return {
        "istate": istate,
        "scale": np.zeros(d),
        "buf": np.zeros((warmup, d)),
        "ewma": np.zeros(d),
        "noise": np.zeros((k_max, d)),
        "noise_n": np.zeros(k_max),
        "late_sum": np.zeros(d),
        "anchor": np.zeros(d),
        "msum": np.zeros((3, d)),
        "centroids": np.zeros((k_max, d)),
        "counts": np.zeros(k_max),
        "moving": np.zeros(k_max),
        "founded": np.zeros(k_max),
        "means": np.zeros((k_max, d)),
        "hist": np.zeros((history, d)),
        "trend": np.zeros((trend_history, 1)),
    }


@njit(cache=True, nogil=True)
def _noise_scale(
    buf: np.ndarray, floor: float, scale: np.ndarray, noise: np.ndarray, sigma_floor: float
) -> None:
    """Each feature's noise over the warm-up: the MAD of first differences (robust to a level
    shift inside the warm-up). With ``floor > 0`` distances are in these noise units (floored
    so a feature that does not move cannot dominate), else in the features' own units. The
    local test starts from these noise levels and then learns its own."""
    d = buf.shape[1]
    for j in range(d):
        diffs = buf[1:, j] - buf[:-1, j]
        med = np.median(diffs)
        mad = np.median(np.abs(diffs - med))
        sigma = 1.4826 * mad / np.sqrt(2.0)
        scale[j] = 1.0 / max(sigma, floor) if floor > 0.0 else 1.0
        noise[j] = max(sigma * scale[j], sigma_floor)


@njit(cache=True, nogil=True)
def _recent_noise(hist: np.ndarray, t: int, n: int, out: np.ndarray, sigma_floor: float) -> None:
    """Each feature's noise over the last ``n`` windows (MAD of first differences)."""
    diffs = np.empty(n - 1)
    for j in range(hist.shape[1]):
        for b in range(n - 1):
            diffs[b] = hist[_row(hist, t, b), j] - hist[_row(hist, t, b + 1), j]
        med = np.median(diffs)
        mad = np.median(np.abs(diffs - med))
        out[j] = max(1.4826 * mad / np.sqrt(2.0), sigma_floor)


@njit(cache=True, nogil=True)
def _nearest(
    p: np.ndarray, centroids: np.ndarray, k: int, dist: np.ndarray, moving: np.ndarray, cur: int
) -> int:
    """Nearest regime among the steady ones and ``cur`` (a transition that is over cannot be
    returned to by position: its centroid is wherever it stopped). -1 when none qualifies."""
    best = -1
    for c in range(k):
        if moving[c] > 0.0 and c != cur:
            dist[c] = np.inf
            continue
        s = 0.0
        for j in range(p.shape[0]):
            diff = p[j] - centroids[c, j]
            s += diff * diff
        dist[c] = np.sqrt(s)
        if best < 0 or dist[c] < dist[best]:
            best = c
    return best


@njit(cache=True, nogil=True)
def _row(hist: np.ndarray, t: int, back: int) -> int:
    """Ring row of absolute window ``t - back``."""
    return (t - back) % hist.shape[0]


@njit(cache=True, nogil=True)
def _window_mean(hist: np.ndarray, t: int, back0: int, n: int, j: int) -> float:
    """Mean of column ``j`` over the ``n`` windows ending ``back0`` windows before ``t``."""
    s = 0.0
    for b in range(back0, back0 + n):
        s += hist[_row(hist, t, b), j]
    return s / n


@njit(cache=True, nogil=True)
def _extrapolate(hist: np.ndarray, t: int, k: int, gap: int, n: int, j: int) -> float:
    """The line fitted to column ``j`` over ``n`` windows that end ``gap`` windows before
    the last ``k``, evaluated at the centre of the last ``k``."""
    sy = 0.0
    siy = 0.0
    for i in range(n):  # oldest first
        y = hist[_row(hist, t, k + gap + n - 1 - i), j]
        sy += y
        siy += i * y
    xm = (n - 1) / 2.0
    sxx = n * (n * n - 1.0) / 12.0
    slope = (siy - xm * sy) / sxx if sxx > 0.0 else 0.0
    return sy / n + slope * ((n + k) / 2.0 + gap)


@njit(cache=True, nogil=True)
def _se(k: int, gap: int, n: int) -> float:
    """Standard error, in units of a window's noise, of the mean of the last ``k`` windows
    minus the line fitted to ``n`` windows that end ``gap`` windows before them."""
    dx = (n + k) / 2.0 + gap
    return np.sqrt(1.0 / k + 1.0 / n + dx * dx * 12.0 / (n * (n * n - 1.0)))


@njit(cache=True, nogil=True)
def _joint(z: np.ndarray, zsig: float) -> bool:
    """Whether features that each moved by more than ``_JOINT_LO * zsig`` standard errors
    (``z``, in absolute value) are, two or more of them together, beyond ``_JOINT * zsig``."""
    n = 0
    q = 0.0
    for j in range(z.shape[0]):
        if z[j] > _JOINT_LO * zsig:
            n += 1
            q += z[j] * z[j]
    return n >= 2 and np.sqrt(q) > _JOINT * zsig


@njit(cache=True, nogil=True)
def _significant_shift(
    a: np.ndarray, b: np.ndarray, noise: np.ndarray, se_factor: float, zsig: float
) -> float:
    """Length (feature units) of the part of ``a - b`` that is significant: features whose
    shift exceeds ``zsig`` standard errors (``noise * se_factor``), or that moved together
    (:func:`_joint`)."""
    d = a.shape[0]
    z = np.empty(d)
    for j in range(d):
        z[j] = abs(a[j] - b[j]) / (noise[j] * se_factor)
    bar = _JOINT_LO * zsig if _joint(z, zsig) else zsig
    s = 0.0
    for j in range(d):
        if z[j] > bar:
            s += (a[j] - b[j]) ** 2
    return np.sqrt(s)


@njit(cache=True, nogil=True)
def _slope_t(hist: np.ndarray, t: int, n: int, j: int) -> tuple[float, float]:
    """Least-squares slope of column ``j`` over the last ``n`` windows up to ``t`` and its
    t statistic (against the fit's own residual noise)."""
    sy = 0.0
    siy = 0.0
    syy = 0.0
    for i in range(n):  # oldest first
        y = hist[_row(hist, t, n - 1 - i), j]
        sy += y
        siy += i * y
        syy += y * y
    xm = (n - 1) / 2.0
    sxx = n * (n * n - 1.0) / 12.0
    sxy = siy - xm * sy
    slope = sxy / sxx
    rss = max(syy - sy * sy / n - slope * sxy, 0.0)
    se = np.sqrt(rss / max(n - 2, 1) / sxx)
    return slope, (slope / se if se > 0.0 else 0.0)


@njit(cache=True, nogil=True)
def _knee(v: np.ndarray, min_seg: int) -> tuple[int, float]:
    """Where ``v`` (oldest first) levelled off: the knee of the best continuous fit of a line
    that turns flat. Returns how many points before the last one the flat part starts, and
    the fit's residual sum of squares (used by :mod:`regimetune.regimes.hindsight` too)."""
    n = v.shape[0]
    sy = np.zeros(n + 1)
    syy = 0.0
    siy = np.zeros(n + 1)
    for i in range(n):
        sy[i + 1] = sy[i] + v[i]
        siy[i + 1] = siy[i] + i * v[i]
        syy += v[i] * v[i]
    ym = sy[n] / n
    syy_c = syy - n * ym * ym
    best_back = n - 1
    best_rss = np.inf
    for s in range(min_seg, n - min_seg + 1):
        # regressor u_i = i - s before the knee, 0 after it
        su = -s * (s + 1) / 2.0
        suu = s * (s + 1) * (2.0 * s + 1) / 6.0
        suy = siy[s] - s * sy[s]
        um = su / n
        suu_c = suu - n * um * um
        suy_c = suy - um * sy[n]
        rss = syy_c - (suy_c * suy_c / suu_c if suu_c > 0.0 else 0.0)
        if rss < best_rss:
            best_rss = rss
            best_back = n - 1 - s
    return best_back, best_rss


@njit(cache=True, nogil=True)
def _plateau_start(hist: np.ndarray, t: int, n: int, j: int, min_seg: int) -> int:
    """Where, in the last ``n`` windows up to ``t``, column ``j`` levelled off (see
    :func:`_knee`): how many windows before ``t`` the flat part starts."""
    v = np.empty(n)
    for i in range(n):  # oldest first
        v[i] = hist[_row(hist, t, n - 1 - i), j]
    return _knee(v, min_seg)[0]


@njit(cache=True, nogil=True)
def _motion_restart(
    hist: np.ndarray, t: int, origin: int, n_hist: int, msum: np.ndarray, istate: np.ndarray
) -> None:
    """Restart the current regime's motion sums at window ``origin`` (from the history ring
    when ``origin`` lies in the past)."""
    istate[M_ORIGIN] = origin
    istate[M_N] = 0
    for j in range(msum.shape[1]):
        msum[0, j] = 0.0
        msum[1, j] = 0.0
        msum[2, j] = 0.0
    for w in range(max(origin, t - n_hist + 1), t + 1):
        _motion_add(hist[_row(hist, t, t - w)], w, msum, istate)


@njit(cache=True, nogil=True)
def _motion_add(p: np.ndarray, w: int, msum: np.ndarray, istate: np.ndarray) -> None:
    """Add the point of window ``w`` to the motion sums (if it is past their origin)."""
    if w < istate[M_ORIGIN]:
        return
    x = float(w - istate[M_ORIGIN])
    for j in range(p.shape[0]):
        msum[0, j] += p[j]
        msum[1, j] += x * p[j]
        msum[2, j] += p[j] * p[j]
    istate[M_N] += 1


@njit(cache=True, nogil=True)
def _moves(msum: np.ndarray, n: int, trend_j: int, move_t: float, move_min: float) -> bool:
    """Whether the regime of the motion sums (``n`` windows) keeps moving: the trend feature,
    or two features at once, have a least-squares slope that is significant
    (``|t| >= move_t``) and amounts to ``move_min`` feature units. (One other feature alone
    is not enough: the t statistic trusts windows to be independent, and a feature such as
    the growth rate over several windows is not.)"""
    sx = n * (n - 1) / 2.0
    sxx_c = n * (n * n - 1.0) / 12.0
    moved = 0
    for j in range(msum.shape[1]):
        sxy_c = msum[1, j] - sx * msum[0, j] / n
        syy_c = msum[2, j] - msum[0, j] * msum[0, j] / n
        slope = sxy_c / sxx_c
        var = max(syy_c - slope * sxy_c, 0.0) / max(n - 2, 1)
        se = np.sqrt(var / sxx_c)
        if abs(slope) * n >= move_min and abs(slope) >= move_t * se:
            moved += 2 if j == trend_j else 1
    return moved >= 2


@njit(cache=True, nogil=True)
def _small(
    late_sum: np.ndarray,
    nl: int,
    anchor: np.ndarray,
    noise: np.ndarray,
    dwell: int,
    base: int,
    zsig: float,
    radius: float,
    m: np.ndarray,
) -> bool:
    """Whether a candidate's level (its mean goes to ``m``) is a small change: within
    ``radius`` of where the regime was, significant in a single feature, and not strongly so.
    Such a change must hold twice as long: one odd statistic, such as a run of few writes,
    is not rushed into a regime."""
    s = 0.0
    n_sig = 0
    strong = False
    se = _se(dwell, 2 * dwell, base) * np.sqrt(dwell / nl)
    z = np.empty(m.shape[0])
    for j in range(m.shape[0]):
        m[j] = late_sum[j] / nl
        s += (m[j] - anchor[j]) ** 2
        z[j] = abs(m[j] - anchor[j]) / (noise[j] * se)
        if z[j] > zsig:
            n_sig += 1
            strong = strong or (z[j] >= _STRONG * zsig and abs(m[j] - anchor[j]) >= 0.5 * radius)
    return np.sqrt(s) <= radius and n_sig < 2 and not strong and not _joint(z, zsig)


@njit(cache=True, nogil=True)
def _record(changes: np.ndarray, n_changes: int, frm: int, to: int, at: int, conf: int) -> int:
    changes[n_changes, 0] = frm
    changes[n_changes, 1] = to
    changes[n_changes, 2] = at
    changes[n_changes, 3] = conf
    return n_changes + 1


@njit(cache=True, nogil=True)
def _switch(
    changes: np.ndarray,
    n_changes: int,
    labels: np.ndarray,
    frm: int,
    to: int,
    at: int,
    t: int,
    first: int,
    dwell: int,
    hist: np.ndarray,
    msum: np.ndarray,
    istate: np.ndarray,
) -> int:
    """Confirm at window ``t`` a change ``frm -> to`` dated back to window ``at``: record it,
    relabel this call's windows from ``at`` on (``first`` is the call's first window), make
    ``to`` current and restart its motion sums. Returns the new number of changes."""
    n_changes = _record(changes, n_changes, frm, to, at, t)
    for b in range(max(at - first, 0), t - first):
        labels[b] = to
    istate[PREV] = frm
    istate[CUR] = to
    istate[CUR_SINCE] = at
    _motion_restart(hist, t, at + dwell, istate[HIST_N], msum, istate)
    return n_changes


@njit(cache=True, nogil=True)
def _found(
    centroids: np.ndarray,
    means: np.ndarray,
    counts: np.ndarray,
    founded: np.ndarray,
    noise: np.ndarray,
    noise_n: np.ndarray,
    istate: np.ndarray,
    m: np.ndarray,
    n: float,
    t: int,
) -> int:
    """A new regime at ``m`` (-1 when ``k_max`` regimes are known already). Its noise starts
    from the current regime's, to be learnt before its local test may open a change."""
    k = istate[K_ACTIVE]
    if k >= centroids.shape[0]:
        return -1
    cur = istate[CUR]
    for j in range(m.shape[0]):
        centroids[k, j] = m[j]
        means[k, j] = m[j]
        noise[k, j] = noise[cur, j]
    noise_n[k] = 0.0
    counts[k] = n
    founded[k] = t
    istate[K_ACTIVE] = k + 1
    return k


@njit(cache=True, nogil=True)
def run(
    x: np.ndarray,
    istate: np.ndarray,
    scale: np.ndarray,
    buf: np.ndarray,
    ewma: np.ndarray,
    noise: np.ndarray,
    noise_n: np.ndarray,
    late_sum: np.ndarray,
    anchor: np.ndarray,
    msum: np.ndarray,
    centroids: np.ndarray,
    counts: np.ndarray,
    moving: np.ndarray,
    founded: np.ndarray,
    means: np.ndarray,
    hist: np.ndarray,
    trend: np.ndarray,
    params: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Feed the rows of ``x`` (features in fixed units) through the detector.

    Returns labels back-dated to each confirmed change, labels as known online, the changes
    (``from, to, at, confirmed`` as absolute window counters) and their number. State arrays
    are updated in place.
    """
    alpha = params[P_ALPHA]
    radius = params[P_RADIUS]
    margin = params[P_MARGIN]
    dwell = int(params[P_DWELL])
    n_cap = params[P_N_CAP]
    skip = int(params[P_SKIP])
    floor = params[P_FLOOR]
    zsig = params[P_Z]
    min_shift = params[P_MIN_SHIFT]
    base = int(params[P_BASE])
    sigma_floor = params[P_SIGMA_FLOOR]
    trend_j = int(params[P_TREND_J])
    span = int(params[P_SPAN])
    settle_t = params[P_SETTLE_T]
    settle_frac = params[P_SETTLE_FRAC]
    settle_share = params[P_SETTLE_SHARE]
    move_t = params[P_MOVE_T]
    move_min = params[P_MOVE_MIN]
    n_follow = params[P_N_FOLLOW]

    n, d = x.shape
    warm = buf.shape[0]
    h_len = hist.shape[0]
    tr_len = trend.shape[0]
    labels = np.empty(n, dtype=np.int64)
    online = np.empty(n, dtype=np.int64)
    changes = np.empty((n + 1, 4), dtype=np.int64)
    n_changes = 0
    t0 = istate[T]
    dist = np.empty(centroids.shape[0])
    z = np.empty(d)
    m = np.empty(d)
    recent = np.empty(d)
    past = np.empty(d)
    for i in range(n):
        t = t0 + i
        if t < skip:
            labels[i] = -1
            online[i] = -1
            continue
        if istate[N_BUF] < warm:
            for j in range(d):
                buf[istate[N_BUF], j] = x[i, j]
            istate[N_BUF] += 1
            labels[i] = -1
            online[i] = -1
            if istate[N_BUF] == warm:
                _noise_scale(buf, floor, scale, noise[0], sigma_floor)
                for j in range(d):
                    s = 0.0
                    for r in range(warm):
                        s += buf[r, j]
                    centroids[0, j] = s / warm * scale[j]
                    means[0, j] = centroids[0, j]
                    ewma[j] = centroids[0, j]
                for r in range(min(warm, h_len)):  # the warm-up seeds the history
                    row = _row(hist, t, r)
                    for j in range(d):
                        hist[row, j] = buf[warm - 1 - r, j] * scale[j]
                istate[HIST_N] = min(warm, h_len)
                if trend_j >= 0:
                    for r in range(min(warm, tr_len)):
                        trend[_row(trend, t, r), 0] = buf[warm - 1 - r, trend_j] * scale[trend_j]
                    istate[TREND_N] = min(warm, tr_len)
                counts[0] = warm
                founded[0] = t
                istate[K_ACTIVE] = 1
                istate[CUR] = 0
                istate[CUR_SINCE] = t  # the local test compares with what follows the warm-up
                _motion_restart(hist, t, t + 1, 0, msum, istate)
                n_changes = _record(changes, n_changes, -1, 0, 0, t)
                for b in range(max(-t0, 0), i + 1):
                    labels[b] = 0
                online[i] = 0
            continue

        # -- the point: history, smoother ------------------------------------------------
        row = _row(hist, t, 0)
        for j in range(d):
            z[j] = x[i, j] * scale[j]
            hist[row, j] = z[j]
            ewma[j] += alpha * (z[j] - ewma[j])
        if istate[HIST_N] < h_len:
            istate[HIST_N] += 1
        _motion_add(z, t, msum, istate)
        if trend_j >= 0:
            trend[_row(trend, t, 0), 0] = z[trend_j]
            if istate[TREND_N] < tr_len:
                istate[TREND_N] += 1
        k = istate[K_ACTIVE]
        cur = istate[CUR]
        best = _nearest(ewma, centroids, k, dist, moving, cur)

        # -- does a candidate change open? ----------------------------------------------
        if istate[NOV_START] < 0:
            opened = dist[best] > radius
            start = t
            for j in range(d):
                anchor[j] = centroids[cur, j]
            since = t - istate[CUR_SINCE] + 1
            # local test: the last ``dwell`` points against the trend of the current regime's
            # recent past (at most ``base`` windows of it, ending ``2 dwell`` windows earlier
            # so that the onset of a smooth decline shows too), so a slow drift is not a
            # change. ``noise`` is learnt from the test's own residuals (so it covers
            # features whose windows are correlated, such as the growth rate). A transition
            # moves by itself: only a significant step of more than ``radius`` (against its
            # latest line) interrupts it.
            gap = 0 if moving[cur] > 0.0 else 2 * dwell
            n_past = min(base, since - dwell - gap, istate[HIST_N] - dwell - gap)
            if not opened and n_past >= 4 * dwell:
                for j in range(d):
                    recent[j] = _window_mean(hist, t, 0, dwell, j)
                    past[j] = _extrapolate(hist, t, dwell, gap, n_past, j)
                se = _se(dwell, gap, n_past)
                # until a regime has learnt its noise, it takes twice the evidence
                zeff = zsig if noise_n[cur] >= _NOISE_N // 4 else 2.0 * zsig
                shift = _significant_shift(recent, past, noise[cur], se, zeff)
                if shift >= (radius if moving[cur] > 0.0 else min_shift):
                    opened = True
                    start = t - dwell + 1
                    if moving[cur] > 0.0:  # judged against where its motion would be
                        for j in range(d):
                            anchor[j] = past[j]
                else:
                    # each regime learns its own noise; the estimate it started from counts
                    # as a few windows' worth
                    w = 1.0 / min(noise_n[cur] + _NOISE_N // 8, _NOISE_N)
                    noise_n[cur] += 1.0
                    for j in range(d):
                        # root mean square (heavy tails, such as small counts, count), each
                        # window clipped at 2.5 sigma so a change cannot inflate it quickly
                        r = min(abs(recent[j] - past[j]) / se, 2.5 * noise[cur, j])
                        noise[cur, j] = max(
                            np.sqrt(noise[cur, j] ** 2 + w * (r * r - noise[cur, j] ** 2)), sigma_floor
                        )
            if opened:
                # date back over the raw points that are already nearer this one than where
                # the current regime is
                c_start = max(istate[CUR_SINCE] + 1, t - 2 * dwell)
                while start > c_start:
                    r = _row(hist, t, t - start + 1)
                    a2 = 0.0
                    b2 = 0.0
                    for j in range(d):
                        a2 += (hist[r, j] - z[j]) ** 2
                        b2 += (hist[r, j] - anchor[j]) ** 2
                    if a2 >= b2:
                        break
                    start -= 1
                istate[NOV_RUN] = 0
                istate[NOV_START] = start
                istate[LATE_N] = 0
                for j in range(d):
                    late_sum[j] = 0.0
                # the points since the evidence began form the candidate's first level
                for b in range(t - start, 0, -1):
                    r = _row(hist, t, b)
                    for j in range(d):
                        late_sum[j] += hist[r, j]
                    istate[LATE_N] += 1
                    istate[NOV_RUN] += 1

        # -- an open candidate: follow its level until it settles -------------------------
        if istate[NOV_START] >= 0:
            istate[NOV_RUN] += 1
            # restart the level when a point leaves it (still in transit); a small change in a
            # single feature is called off when a point falls back to the near side of the
            # midpoint between its level and where the regime was (the odd run is over)
            moved = False
            if istate[LATE_N] > 0:
                s = 0.0
                uu = 0.0
                uz = 0.0
                for j in range(d):
                    lm = late_sum[j] / istate[LATE_N]
                    s += (z[j] - lm) ** 2
                    uu += (lm - anchor[j]) ** 2
                    uz += (lm - anchor[j]) * (z[j] - anchor[j])
                moved = np.sqrt(s) > radius
                if (
                    not moved
                    and uz < 0.5 * uu
                    and istate[LATE_N] >= dwell
                    and _small(late_sum, istate[LATE_N], anchor, noise[cur], dwell, base, zsig, radius, m)
                ):
                    istate[NOV_RUN] = 0
                    istate[NOV_START] = -1
                    labels[i] = cur
                    online[i] = cur
                    continue
            if istate[LATE_N] == 0 or moved:
                istate[LATE_N] = 0
                for j in range(d):
                    late_sum[j] = 0.0
            istate[LATE_N] += 1
            for j in range(d):
                late_sum[j] += z[j]
            nl = istate[LATE_N]
            for j in range(d):
                m[j] = late_sum[j] / nl
            wait = dwell
            if nl >= dwell and _small(late_sum, nl, anchor, noise[cur], dwell, base, zsig, radius, m):
                wait = 2 * dwell
            if nl >= wait:
                target = _nearest(m, centroids, k, dist, moving, cur)
                if target == cur or dist[target] > radius:
                    # not a known regime's return: does the level differ from the current one
                    # (a transition: from where its motion would be)?
                    # (the centroid of a young regime is uncertain too, and so is its noise)
                    se = np.sqrt(
                        dwell / nl * _se(dwell, 2 * dwell, base) ** 2 + 1.0 / min(counts[cur], n_cap)
                    )
                    zeff = zsig if noise_n[cur] >= _NOISE_N // 4 else 2.0 * zsig
                    shift = _significant_shift(m, anchor, noise[cur], se, zeff)
                    same = shift <= radius if moving[cur] > 0.0 else shift < min_shift
                    if same:
                        target = cur  # a burst or a false alarm
                    else:
                        prev = istate[PREV]
                        turn = (
                            trend_j >= 0
                            and prev >= 0
                            and moving[cur] == 0.0
                            and moving[prev] == 0.0
                            and t - founded[cur] <= span
                        )
                        if turn:
                            # a young regime moving on, away from where it came from, in the
                            # same direction: a transition rather than a new level (how far it
                            # had come is the mean of all its windows, founding level included:
                            # its centroid is re-centred on its later windows, which on a
                            # decline lie further along already)
                            uu = 0.0
                            ww = 0.0
                            uw = 0.0
                            for j in range(d):
                                u = means[cur, j] - centroids[prev, j]
                                w = m[j] - centroids[prev, j]
                                uu += u * u
                                ww += w * w
                                uw += u * w
                            turn = np.sqrt(ww) > np.sqrt(uu) + 0.5 * radius and uw > 0.5 * np.sqrt(uu * ww)
                        if turn:
                            moving[cur] = 1.0
                            target = cur
                            for j in range(d):
                                centroids[cur, j] = m[j]
                        else:
                            target = _found(
                                centroids, means, counts, founded, noise, noise_n, istate, m, nl, t
                            )
                            if target < 0:  # no room: the nearest steady regime
                                target = _nearest(m, centroids, k, dist, moving, -1)
                for j in range(d):
                    ewma[j] = m[j]  # restart the smoother at the settled level
                if target >= 0 and target != cur:
                    at = istate[NOV_START]
                    n_changes = _switch(
                        changes, n_changes, labels, cur, target, at, t, t0, dwell, hist, msum, istate
                    )
                istate[NOV_RUN] = 0
                istate[NOV_START] = -1
                istate[CAND] = -1
                istate[CAND_RUN] = 0
            labels[i] = istate[CUR]
            online[i] = istate[CUR]
            continue

        # -- hysteresis between known regimes -------------------------------------------
        if best != cur and dist[cur] - dist[best] > margin:
            if best == istate[CAND]:
                istate[CAND_RUN] += 1
            else:
                istate[CAND] = best
                istate[CAND_RUN] = 1
                istate[CAND_START] = t
            if istate[CAND_RUN] >= dwell:
                at = istate[CAND_START]
                n_changes = _switch(
                    changes, n_changes, labels, cur, best, at, t, t0, dwell, hist, msum, istate
                )
                cur = best
                istate[CAND] = -1
                istate[CAND_RUN] = 0
        else:
            istate[CAND] = -1
            istate[CAND_RUN] = 0

        # -- a young regime that turns out to sit where a known one is, is that one --------
        if moving[cur] == 0.0 and t - founded[cur] <= span and counts[cur] >= 4 * dwell:
            zeff = zsig if noise_n[cur] >= _NOISE_N // 4 else 2.0 * zsig
            for c in range(k):
                if c == cur or moving[c] > 0.0:
                    continue
                se = np.sqrt(1.0 / min(counts[cur], n_cap) + 1.0 / min(counts[c], n_cap))
                gap2 = 0.0
                for j in range(d):
                    gap2 += (centroids[cur, j] - centroids[c, j]) ** 2
                if (
                    np.sqrt(gap2) < margin
                    and _significant_shift(centroids[cur], centroids[c], noise[cur], se, zeff) < min_shift
                ):
                    n_changes = _switch(
                        changes, n_changes, labels, cur, c, t, t, t0, dwell, hist, msum, istate
                    )
                    cur = c
                    best = c
                    istate[CAND] = -1
                    istate[CAND_RUN] = 0
                    break

        # -- transitions: a young regime whose trend keeps moving; the end of one -------
        since = t - istate[CUR_SINCE] + 1
        prev = istate[PREV]
        if (
            trend_j >= 0
            and moving[cur] == 0.0
            and prev >= 0
            and moving[prev] == 0.0
            and t - founded[cur] <= span
            and istate[M_N] >= 8 * dwell
            and _moves(msum, istate[M_N], trend_j, move_t, move_min)
        ):
            # (the sums leave out its first windows, which may straddle the change)
            moving[cur] = 1.0
        n_flat = min(span, max(8 * dwell, int(settle_frac * since)))
        if (
            moving[cur] > 0.0
            and prev >= 0
            and istate[CAND_RUN] == 0
            and since >= n_flat
            and istate[TREND_N] >= n_flat
        ):
            # flat: the trend's slope over the last ``n_flat`` windows is, with its error
            # margin, a small share of the transition's mean slope so far
            slope, tstat = _slope_t(trend, t, n_flat, 0)
            se = abs(slope / tstat) if tstat != 0.0 else 0.0
            mean_slope = (
                abs(_window_mean(trend, t, 0, min(n_flat, 2 * dwell), 0) - centroids[prev, trend_j]) / since
            )
            if abs(slope) + settle_t * se < settle_share * mean_slope:
                back = _plateau_start(trend, t, min(istate[TREND_N], since, 2 * n_flat), 0, dwell)
                n_m = min(back + 1, istate[HIST_N])
                for j in range(d):
                    m[j] = _window_mean(hist, t, 0, n_m, j)
                target = _nearest(m, centroids, k, dist, moving, -1)
                if target < 0 or dist[target] > radius:
                    fresh = _found(
                        centroids, means, counts, founded, noise, noise_n, istate, m, back + 1.0, t
                    )
                    if fresh >= 0:
                        target = fresh
                        if n_m > 4:  # the plateau's own noise, not the transition's
                            _recent_noise(hist, t, n_m, noise[fresh], sigma_floor)
                if target >= 0 and target != cur:
                    at = t - back
                    n_changes = _switch(
                        changes, n_changes, labels, cur, target, at, t, t0, dwell, hist, msum, istate
                    )
                    cur = target
                    best = target
                    for j in range(d):
                        ewma[j] = m[j]

        labels[i] = cur
        online[i] = cur
        # -- learning: the current regime's centroid moves towards the point (a transition's
        # follows it closely), so each centroid stays the centre of its own windows
        # A steady regime founded by the change that made it current is, for its first
        # ``n_cap`` windows, the mean of its own windows since the change settled (the
        # motion sums): the level it was founded at may hold windows that straddle the
        # change, and a running mean would carry that bias for a long time. The first
        # regime, founded by the warm-up, has nothing to straddle, but its mean would lag
        # the drift of a flash crowd behind the warm-up: it is re-centred too, once half as
        # many windows as the warm-up had are its own (from 3, a 3-window mean put the end
        # of a short flash crowd 3 windows late; from 20, a drifting one opened a false
        # change before then).
        counts[cur] += 1.0
        nm = istate[M_N]
        own = (
            moving[cur] == 0.0
            and founded[cur] >= istate[CUR_SINCE]
            and (dwell if istate[PREV] >= 0 else warm // 2) <= nm <= n_cap
        )
        step = 1.0 / min(counts[cur], n_follow if moving[cur] > 0.0 else n_cap)
        for j in range(d):
            if own:
                centroids[cur, j] = msum[0, j] / nm
            else:
                centroids[cur, j] += step * (ewma[j] - centroids[cur, j])
            means[cur, j] += (z[j] - means[cur, j]) / counts[cur]
    istate[T] = t0 + n
    return labels, online, changes[:n_changes], n_changes
