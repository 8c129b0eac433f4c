"""The detector's per-window loop, compiled with numba (the loop is inherently sequential).

State lives in plain numpy arrays so the Python side can save it as JSON and the online
(one window) and batch (a whole frame) paths run the very same code. ``istate`` holds the
integer state in the slots named below.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# istate slots
K_ACTIVE, CUR, CAND, CAND_RUN, CAND_START, NOV_RUN, NOV_START, T, N_BUF, LATE_N = range(10)
N_ISTATE = 10


def new_state(k_max: int, d: int, warmup: int) -> dict[str, np.ndarray]:
    istate = np.zeros(N_ISTATE, dtype=np.int64)
    istate[CUR] = -1
    istate[CAND] = -1
    return {
        "istate": istate,
        "scale": np.zeros(d),
        "buf": np.zeros((warmup, d)),
        "ewma": np.zeros(d),
        "nov_sum": np.zeros(d),
        "late_sum": np.zeros(d),
        "centroids": np.zeros((k_max, d)),
        "counts": np.zeros(k_max),
    }


@njit(cache=True, nogil=True)
def _noise_scale(buf: np.ndarray, floor: float, scale: np.ndarray) -> None:
    """1 / noise of each feature: the MAD of first differences (robust to a level shift
    inside the warm-up), floored so a feature that does not move cannot dominate."""
    d = buf.shape[1]
    if floor <= 0.0:  # fixed scale: the features' own units
        for j in range(d):
            scale[j] = 1.0
        return
    for j in range(d):
        diffs = buf[1:, j] - buf[:-1, j]
        med = np.median(diffs)
        mad = np.median(np.abs(diffs - med))
        sigma = 1.4826 * mad / np.sqrt(2.0)
        scale[j] = 1.0 / max(sigma, floor)


@njit(cache=True, nogil=True)
def _nearest(p: np.ndarray, centroids: np.ndarray, k: int, dist: np.ndarray) -> int:
    best = 0
    for c in range(k):
        s = 0.0
        for j in range(p.shape[0]):
            diff = p[j] - centroids[c, j]
            s += diff * diff
        dist[c] = np.sqrt(s)
        if dist[c] < dist[best]:
            best = c
    return best


@njit(cache=True, nogil=True)
def run(
    x: np.ndarray,
    istate: np.ndarray,
    scale: np.ndarray,
    buf: np.ndarray,
    ewma: np.ndarray,
    nov_sum: np.ndarray,
    late_sum: np.ndarray,
    centroids: np.ndarray,
    counts: np.ndarray,
    alpha: float,
    radius: float,
    margin: float,
    dwell: int,
    n_cap: float,
    skip: int,
    floor: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Feed the rows of ``x`` (features in fixed units) through the detector.

    The first ``skip`` windows of the stream are ignored (incomplete features); the next
    ``len(buf)`` windows are a warm-up that measures each feature's noise (the scale of all
    later distances) and founds regime 0. After that, per window: EWMA smoothing; the
    nearest centroid; novelty (``dwell`` smoothed points in a row farther than ``radius``
    from every centroid; once the raw novel points have settled for ``dwell`` windows within
    ``radius`` of their mean, that mean founds a new regime, or, when it lies within
    ``radius`` of a known one, that one returns); hysteresis (switch to another known
    regime only after ``dwell`` windows in a row nearer to it by ``margin``); the nearest
    centroid learns the point (step ``1 / min(count, n_cap)``).

    Returns labels back-dated to each confirmed change, labels as known online, the changes
    (``from, to, at, confirmed`` as absolute window counters) and their number. State arrays
    are updated in place.
    """
    n, d = x.shape
    k_max = centroids.shape[0]
    warm = buf.shape[0]
    labels = np.empty(n, dtype=np.int64)
    online = np.empty(n, dtype=np.int64)
    changes = np.empty((n + 1, 4), dtype=np.int64)
    n_changes = 0
    t0 = istate[T]
    dist = np.empty(k_max)
    z = np.empty(d)
    m = np.empty(d)
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
                _noise_scale(buf, floor, scale)
                for j in range(d):
                    s = 0.0
                    for r in range(warm):
                        s += buf[r, j]
                    centroids[0, j] = s / warm * scale[j]
                    ewma[j] = centroids[0, j]
                counts[0] = warm
                istate[K_ACTIVE] = 1
                istate[CUR] = 0
                changes[n_changes, 0] = -1
                changes[n_changes, 1] = 0
                changes[n_changes, 2] = 0
                changes[n_changes, 3] = t
                n_changes += 1
                for b in range(max(-t0, 0), i + 1):
                    labels[b] = 0
                online[i] = 0
            continue
        for j in range(d):
            z[j] = x[i, j] * scale[j]
            ewma[j] += alpha * (z[j] - ewma[j])
        k = istate[K_ACTIVE]
        cur = istate[CUR]
        best = _nearest(ewma, centroids, k, dist)
        # novelty: far from every known regime
        if dist[best] > radius:
            if istate[NOV_RUN] == 0:
                istate[NOV_START] = t
                istate[LATE_N] = 0
            istate[NOV_RUN] += 1
            # the level of the novel points: restart when a point leaves it (still in transit)
            moved = False
            if istate[LATE_N] > 0:
                s = 0.0
                for j in range(d):
                    diff = z[j] - late_sum[j] / istate[LATE_N]
                    s += diff * diff
                moved = np.sqrt(s) > radius
            if istate[LATE_N] == 0 or moved:
                istate[LATE_N] = 0
                for j in range(d):
                    late_sum[j] = 0.0
            istate[LATE_N] += 1
            for j in range(d):
                late_sum[j] += z[j]
            if istate[NOV_RUN] >= dwell:
                for j in range(d):
                    m[j] = late_sum[j] / istate[LATE_N]
                target = _nearest(m, centroids, k, dist)
                settled = dist[target] <= radius  # a known regime returns
                if not settled and istate[LATE_N] >= dwell:
                    settled = True
                    if k < k_max:  # a new regime, at the settled level
                        target = k
                        for j in range(d):
                            centroids[k, j] = m[j]
                        counts[k] = istate[LATE_N]
                        istate[K_ACTIVE] = k + 1
                if settled:
                    for j in range(d):
                        ewma[j] = m[j]  # restart the smoother at the new level
                    if target != cur:
                        at = istate[NOV_START]
                        changes[n_changes, 0] = cur
                        changes[n_changes, 1] = target
                        changes[n_changes, 2] = at
                        changes[n_changes, 3] = t
                        n_changes += 1
                        for b in range(max(at - t0, 0), i):
                            labels[b] = target
                        istate[CUR] = target
                    istate[NOV_RUN] = 0
                    istate[CAND] = -1
                    istate[CAND_RUN] = 0
            labels[i] = istate[CUR]
            online[i] = istate[CUR]
            continue
        istate[NOV_RUN] = 0
        # hysteresis between known regimes
        if best != cur and dist[cur] - dist[best] > margin:
            if best == istate[CAND]:
                istate[CAND_RUN] += 1
            else:
                istate[CAND] = best
                istate[CAND_RUN] = 1
                istate[CAND_START] = t
            if istate[CAND_RUN] >= dwell:
                at = istate[CAND_START]
                changes[n_changes, 0] = cur
                changes[n_changes, 1] = best
                changes[n_changes, 2] = at
                changes[n_changes, 3] = t
                n_changes += 1
                for b in range(max(at - t0, 0), i):
                    labels[b] = best
                istate[CUR] = best
                cur = best
                istate[CAND] = -1
                istate[CAND_RUN] = 0
        else:
            istate[CAND] = -1
            istate[CAND_RUN] = 0
        labels[i] = cur
        online[i] = cur
        # learning: the nearest centroid moves towards the point
        counts[best] += 1.0
        lr = 1.0 / min(counts[best], n_cap)
        for j in range(d):
            centroids[best, j] += lr * (ewma[j] - centroids[best, j])
    istate[T] = t0 + n
    return labels, online, changes[:n_changes], n_changes
