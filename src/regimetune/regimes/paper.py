"""The paper's offline mode (Sevilla et al., section 6): batch K-means on
``(timestamp, read ops/s)``, both min-max scaled so they weigh equally, K = 4.

The clusters are numbered in time order; the start of the third regime is where the
paper switches to a fixed-size cache, and the keyspace size at that moment is the
suggested cache size.

>>> from regimetune.regimes.synthetic import parsplice_like_frame
>>> r = paper_kmeans(parsplice_like_frame(n_windows=400, seed=0))
>>> [s.regime_id for s in r.segments]
[0, 1, 2, 3]
>>> r.third_start_window > r.segments[0].end_window
True
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.cluster import KMeans

from regimetune.models import InputError, RegimeSegment, WindowFrame
from regimetune.regimes.detector import segments_of


@dataclass(frozen=True)
class PaperResult:
    """Labels per window (clusters numbered by time order), ``k`` segments in time order
    (regime r from its first window to the next regime's first window), centroids as
    ``(time s, reads/s)``, and the third regime's start with the suggested cache size
    (``None`` when ``k < 3``)."""

    k: int
    labels: np.ndarray
    segments: list[RegimeSegment]
    centroids: list[tuple[float, float]]
    third_start_window: int | None
    third_start_time: float | None
    suggested_cache_keys: int | None


def _minmax(v: np.ndarray) -> np.ndarray:
    span = float(v.max() - v.min())
    return (v - v.min()) / span if span > 0 else np.zeros_like(v)


def paper_kmeans(frame: WindowFrame, k: int = 4, seed: int = 0) -> PaperResult:
    """Cluster the read rate over time into ``k`` regimes, as the paper does."""
    n = len(frame)
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InputError(f"k must be a positive integer, got {k!r}")
    if n == 0:
        raise InputError("the trace has no windows")
    if n < 2:
        raise InputError("a single window cannot show regimes")
    if k > n:
        raise InputError(f"k={k} regimes cannot be found in {n} windows")
    t = frame["start"].astype(np.float64) + frame["length"] / 2.0
    rate = frame.reads_per_s.astype(np.float64)
    if not (np.all(np.isfinite(t)) and np.all(np.isfinite(rate))):
        raise InputError("window times or read rates are not finite")
    x = np.column_stack([_minmax(t), _minmax(rate)])
    if len(np.unique(x, axis=0)) < k:
        raise InputError(f"fewer than k={k} distinct (time, reads/s) points")
    km = KMeans(n_clusters=k, n_init=10, random_state=seed).fit(x)
    raw = km.labels_
    # number clusters by the time they start (then by mean time, for ties)
    first = np.array([np.flatnonzero(raw == c)[0] for c in range(k)])
    order = np.lexsort((km.cluster_centers_[:, 0], first))
    rank = np.empty(k, dtype=np.int64)
    rank[order] = np.arange(k)
    labels = rank[raw]
    cents = []
    for c in order:
        m = raw == c
        cents.append((float(t[m].mean()), float(rate[m].mean())))
    # time is a clustering coordinate, so clusters are runs up to flicker at their borders:
    # regime r starts at its first window (running maximum of the time-ordered labels)
    phases = np.maximum.accumulate(labels)
    segs = segments_of(
        phases, frame, {i: cents[i] for i in range(k)}, kinds=dict.fromkeys(range(k), "cluster")
    )
    third_w = third_t = cache = None
    if k >= 3:
        pos = int(np.flatnonzero(phases == 2)[0])
        third_w = int(frame["index"][pos])
        third_t = float(frame["start"][pos])
        cache = int(frame["keyspace_size"][pos])
    return PaperResult(
        k=k,
        labels=labels,
        segments=segs,
        centroids=cents,
        third_start_window=third_w,
        third_start_time=third_t,
        suggested_cache_keys=cache,
    )


__all__ = ["PaperResult", "paper_kmeans"]
