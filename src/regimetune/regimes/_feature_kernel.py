"""The window features and the variance their counts imply, compiled with numba.

One definition for both paths of :class:`~regimetune.regimes.features.FeatureExtractor`: a
whole frame (many rows) and the service's per-window ``update`` (one row), where numpy's
per-call cost on one-element arrays was most of the time a window took. Features are
coded by their index in :data:`~regimetune.regimes.features.FEATURES`; arithmetic is
IEEE (a window of length 0 gives infinities, which the extractor reports by name).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

LOG_READS, LOG_WRITES, LOG_GROWTH, LOG_ACTIVE, TOPK_SHARE, ENTROPY, LOG_RW = range(7)


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _rate_variance(rate: float, exposure: float) -> float:
    """Poisson variance of ``log1p(rate)`` for a rate counted over ``exposure`` seconds
    (delta method; one pseudo-count so an empty window is not certain)."""
    return (rate + 1.0 / exposure) / (exposure * (1.0 + rate) ** 2)


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _feature(
    code: int, raw: np.ndarray | tuple[float, ...], growth: float, exposure: float
) -> tuple[float, float]:
    """Feature ``code``'s value and the sampling variance the counts behind it imply, from
    one window's ``raw`` statistics (reads, writes, length, active keys, keyspace, top-k
    share, entropy): a window with 1 active key and one with 2 differ by noise, a short
    (edge) window is noisier than a whole one. Shares and entropy: the binomial bound over
    the window's requests (entropy in units of its range, ``log2`` of the active keys)."""
    reads, writes, length, active, topk = raw[0], raw[1], raw[2], raw[3], raw[5]
    if code == LOG_READS:
        return math.log1p(reads / length), _rate_variance(reads / length, length)
    if code == LOG_WRITES:
        return math.log1p(writes / length), _rate_variance(writes / length, length)
    if code == LOG_GROWTH:
        g = 0.0 if growth < 0.0 else growth  # NaN (no rate yet) stays NaN
        return math.log1p(g), _rate_variance(g, exposure)
    if code == LOG_ACTIVE:
        return math.log1p(active), _rate_variance(active, 1.0)
    requests = reads + writes + 1.0
    if code == TOPK_SHARE:
        return topk, max(topk * (1.0 - topk), 0.25 / requests) / requests
    if code == ENTROPY:
        return raw[6], math.log2(active + 1.0) ** 2 / (4.0 * requests)
    return math.log((reads + 1.0) / (writes + 1.0)), 1.0 / (reads + 1.0) + 1.0 / (writes + 1.0)


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _scaled_feature(
    code: int, raw: np.ndarray | tuple[float, ...], growth: float, exposure: float, unit: float
) -> tuple[float, float]:
    """:func:`_feature` in feature units ``unit``: its value, and its variance in ``unit``
    squared (one definition for both paths, so they agree to the bit)."""
    value, var = _feature(code, raw, growth, exposure)
    return value / unit, var / (unit * unit)


@njit(cache=True, nogil=True, error_model="numpy")
def feature_rows(
    codes: np.ndarray,
    units: np.ndarray,
    raw: np.ndarray,
    growth: np.ndarray,
    exposure: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Features ``codes`` of each row of ``raw`` (windows x the seven statistics above) in
    feature ``units``, and their variances (in units squared); ``growth`` is each window's
    new keys per second, counted over ``exposure`` seconds."""
    n, d = raw.shape[0], codes.shape[0]
    x = np.empty((n, d))
    v = np.empty((n, d))
    for i in range(n):
        for j in range(d):
            x[i, j], v[i, j] = _scaled_feature(codes[j], raw[i], growth[i], exposure[i], units[j])
    return x, v


@njit(cache=True, nogil=True, error_model="numpy")
def feature_row(
    codes: np.ndarray,
    units: np.ndarray,
    raw: tuple[float, ...],
    growth: float,
    exposure: float,
) -> tuple[np.ndarray, np.ndarray, bool]:
    """:func:`feature_rows` of one window whose statistics are a tuple (the service's
    per-window path: no array to build), and whether every feature is finite (the growth
    of a stream's first window, NaN, counts as finite: it is a missing value)."""
    d = codes.shape[0]
    x = np.empty(d)
    v = np.empty(d)
    finite = True
    for j in range(d):
        x[j], v[j] = _scaled_feature(codes[j], raw, growth, exposure, units[j])
        if not (math.isfinite(x[j]) or (codes[j] == LOG_GROWTH and math.isnan(x[j]))):
            finite = False
    return x, v, finite
