"""The detector's per-window loop, compiled with numba (the loop is inherently sequential).

State lives in plain numpy arrays so the Python side can save it as JSON and the online
(one window) and batch (a whole frame) paths run the very same code.

``istate`` holds the integer state in the slots named below.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# istate slots
K_ACTIVE, CUR, CAND, CAND_RUN, CAND_START, NOV_RUN, NOV_START, T, EWMA_INIT = range(9)
N_ISTATE = 9


def new_state(k_max: int, d: int) -> dict[str, np.ndarray]:
    istate = np.zeros(N_ISTATE, dtype=np.int64)
    istate[CUR] = -1
    istate[CAND] = -1
    return {
        "istate": istate,
        "ewma": np.zeros(d),
        "nov_sum": np.zeros(d),
        "centroids": np.zeros((k_max, d)),
        "counts": np.zeros(k_max),
    }


@njit(cache=True, nogil=True)
def run(
    x: np.ndarray,
    istate: np.ndarray,
    ewma: np.ndarray,
    nov_sum: np.ndarray,
    centroids: np.ndarray,
    counts: np.ndarray,
    alpha: float,
    radius: float,
    margin: float,
    dwell: int,
    n_cap: float,
    skip: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """Skip the first ``skip`` windows of the stream (warm-up; they join the first regime),
    then feed the rows of ``x`` (features in units) through smoothing, nearest-centroid
    assignment, novelty (found a regime when for ``dwell`` windows in a row both the smoothed
    and the raw point lie farther than ``radius`` from every centroid), hysteresis (switch to another known regime only
    after ``dwell`` windows in a row nearer to it by ``margin``) and centroid learning.

    Returns labels back-dated to each confirmed change, labels as known online, the
    nearest centroid per row, the changes (``from, to, at, confirmed`` as absolute window
    counters) and their number. State arrays are updated in place.
    """
    n, d = x.shape
    k_max = centroids.shape[0]
    labels = np.empty(n, dtype=np.int64)
    online = np.empty(n, dtype=np.int64)
    nearest = np.empty(n, dtype=np.int64)
    changes = np.empty((n + 1, 4), dtype=np.int64)
    n_changes = 0
    t0 = istate[T]
    dist = np.empty(k_max)
    rdist = np.empty(k_max)
    for i in range(n):
        t = t0 + i
        if t < skip:  # warm-up: features not yet meaningful (e.g. no growth rate)
            labels[i] = -1
            online[i] = -1
            nearest[i] = -1
            continue
        # smoothing
        if istate[EWMA_INIT] == 0:
            for j in range(d):
                ewma[j] = x[i, j]
            istate[EWMA_INIT] = 1
        else:
            for j in range(d):
                ewma[j] += alpha * (x[i, j] - ewma[j])
        k = istate[K_ACTIVE]
        if k == 0:
            for j in range(d):
                centroids[0, j] = ewma[j]
            counts[0] = 1.0
            istate[K_ACTIVE] = 1
            istate[CUR] = 0
            changes[n_changes, 0] = -1
            changes[n_changes, 1] = 0
            changes[n_changes, 2] = 0
            changes[n_changes, 3] = t
            n_changes += 1
            for b in range(max(-t0, 0), i):
                labels[b] = 0
            labels[i] = 0
            online[i] = 0
            nearest[i] = 0
            continue
        best = 0
        rbest = 0
        for c in range(k):
            s = 0.0
            r = 0.0
            for j in range(d):
                diff = ewma[j] - centroids[c, j]
                s += diff * diff
                rdiff = x[i, j] - centroids[c, j]
                r += rdiff * rdiff
            dist[c] = np.sqrt(s)
            rdist[c] = np.sqrt(r)
            if dist[c] < dist[best]:
                best = c
            if rdist[c] < rdist[rbest]:
                rbest = c
        nearest[i] = best
        cur = istate[CUR]
        # novelty: the smoothed and the raw point are both far from every known regime
        if dist[best] > radius and rdist[rbest] > radius and k < k_max:
            if istate[NOV_RUN] == 0:
                istate[NOV_START] = t
                for j in range(d):
                    nov_sum[j] = 0.0
            istate[NOV_RUN] += 1
            for j in range(d):
                nov_sum[j] += x[i, j]
            if istate[NOV_RUN] >= dwell:
                # found the regime at the mean of the raw novel points (smoothed ones are
                # still in transit) and restart the smoother there
                new = k
                for j in range(d):
                    centroids[new, j] = nov_sum[j] / istate[NOV_RUN]
                    ewma[j] = centroids[new, j]
                counts[new] = istate[NOV_RUN]
                istate[K_ACTIVE] = k + 1
                at = istate[NOV_START]
                changes[n_changes, 0] = cur
                changes[n_changes, 1] = new
                changes[n_changes, 2] = at
                changes[n_changes, 3] = t
                n_changes += 1
                for b in range(max(at - t0, 0), i):
                    labels[b] = new
                istate[CUR] = new
                istate[NOV_RUN] = 0
                istate[CAND] = -1
                istate[CAND_RUN] = 0
                labels[i] = new
                online[i] = new
            else:
                labels[i] = cur
                online[i] = cur
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
        # learning: the nearest centroid moves towards the point (running mean, capped)
        if dist[best] <= radius:
            counts[best] += 1.0
            lr = 1.0 / min(counts[best], n_cap)
            for j in range(d):
                centroids[best, j] += lr * (ewma[j] - centroids[best, j])
    istate[T] = t0 + n
    return labels, online, nearest, changes[:n_changes], n_changes
