"""The requests of one realistic run, a chunk of seconds at a time, from its :class:`Shape`.

Per second: the shape's mean rate times a slow wander (AR(1), ``WANDER_TAU_S``) and a
per-second log-normal factor (so counts are overdispersed, not Poisson), less what stalls hold
back; then Poisson counts, uniform times. Per request: its regime label, read or write from the
regime's read/write ratio, and a key: workers re-read one key in long runs (``SWITCH``), a run
starts on a key of the active set (the newest keys, the newest 5x as popular as the oldest),
a few hub keys draw some runs late in the run, writes outside the flash crowd land on the
newest keys (the final states of segments).
Everything is vectorised; one random stream, drawn chunk after chunk, so the same seed gives
the same requests.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy.signal import lfilter

from regimetune.collectors.presets import HUB_SHARE, SWITCH, Shape

NOISE_SIGMA = 0.09
"""Log-normal spread of each second's rate: with Poisson counts, 3-5 % at 10 s windows."""
WANDER_SIGMA = 0.015
"""Spread of the slow wander of the level."""
WANDER_TAU_S = 60.0
"""Correlation time of the wander."""
NEWEST_WRITES = 3
"""Writes land on one of this many newest keys."""


class Requests(NamedTuple):
    """A chunk of requests: absolute times, key indices (discovery order), ops, labels."""

    ts: np.ndarray
    key_index: np.ndarray
    op: np.ndarray
    label: np.ndarray


class Synth:
    """Draws a run's requests chunk by chunk, in time order (chunks must come in order)."""

    def __init__(self, shape: Shape, *, seed: int, start_s: float, end_s: float) -> None:
        self.shape = shape
        self.start_s = start_s
        self.end_s = end_s
        self._rng = np.random.default_rng([seed, 2])
        self._phi = math.exp(-1.0 / WANDER_TAU_S)
        self._zi = np.array([self._phi * WANDER_SIGMA * self._rng.standard_normal()])

    def chunk(self, t0: float, t1: float) -> Requests:
        """Requests in ``[t0, t1)``, seconds since the trace began."""
        t = self._times(t0, t1)
        rng, shape = self._rng, self.shape
        n = len(t)
        label = shape.label(t)
        op = (rng.random(n) < 1.0 / (shape.rw_ratio[label] + 1.0)).astype(np.uint8)
        spike = shape.spike(t)
        active = shape.active(t, spike)
        known = np.maximum(np.floor(shape.keyspace(t)), np.ceil(active))
        rank = _rank(rng.random(n), active)
        index = known - 1.0 - rank
        hub = (rng.random(n) < HUB_SHARE) & (t >= shape.hub_from)
        index[hub] = shape.hubs[rng.integers(0, len(shape.hubs), int(hub.sum()))]
        # a run of requests re-reads one key; a new run starts with chance SWITCH (more in a spike)
        new_run = rng.random(n) < SWITCH * spike
        if n:
            new_run[0] = True
        index = index[new_run][np.cumsum(new_run) - 1]
        writes = (op == 1) & (t >= shape.pair_until)
        newest = np.floor(rng.random(int(writes.sum())) * NEWEST_WRITES)
        index[writes] = np.maximum(known[writes] - 1.0 - newest, 0.0)
        ts = np.round(self.start_s + t, 6)
        ts = np.clip(ts, self.start_s + t0, np.nextafter(self.start_s + t1, -np.inf))
        return Requests(ts, index.astype(np.uint64), op, label)

    def _times(self, t0: float, t1: float) -> np.ndarray:
        """Request times in ``[t0, t1)``, sorted: per-second counts, uniform within a second."""
        rng, shape = self._rng, self.shape
        secs = np.arange(math.floor(t0), math.ceil(t1), dtype=np.float64)
        lo, hi = np.maximum(secs, t0), np.minimum(secs + 1.0, t1)
        span, mid = hi - lo, (lo + hi) / 2.0
        shock = self._rng.standard_normal(len(secs)) * WANDER_SIGMA * math.sqrt(1.0 - self._phi**2)
        wander, self._zi = lfilter([1.0], [1.0, -self._phi], shock, zi=self._zi)
        noise = NOISE_SIGMA * rng.standard_normal(len(secs))
        factor = np.exp(wander + noise - (NOISE_SIGMA**2 + WANDER_SIGMA**2) / 2.0)
        loss = np.zeros(len(secs))
        if len(secs):
            inside = (shape.dip_sec >= secs[0]) & (shape.dip_sec <= secs[-1])
            np.add.at(loss, shape.dip_sec[inside] - int(secs[0]), shape.dip_loss[inside])
        ratio = shape.rw_ratio[shape.label(mid)]
        lam = shape.rate(mid) * factor * (1.0 - np.minimum(loss, 1.0)) * (1.0 + 1.0 / ratio) * span
        counts = rng.poisson(lam)
        t = np.repeat(lo, counts) + rng.random(int(counts.sum())) * np.repeat(span, counts)
        t.sort()
        return t


def _rank(x: np.ndarray, active: np.ndarray) -> np.ndarray:
    """Rank in ``[0, active)`` from uniform ``x``, with weight ``(1 + r)^-alpha`` so that the
    newest key (rank 0) is 5x as popular as the oldest; rank 0 for an active set of one key."""
    a = np.maximum(active, 1.0)
    alpha = np.log(5.0) / np.log(np.maximum(a, 1.0 + 1e-9))
    e = 1.0 - alpha
    flat = np.abs(e) < 1e-6  # alpha = 1: the inverse CDF is the exponential one
    e_safe = np.where(flat, 1.0, e)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        power = (1.0 + x * ((1.0 + a) ** e_safe - 1.0)) ** (1.0 / e_safe) - 1.0
        r = np.where(flat, (1.0 + a) ** x - 1.0, power)
    r = np.where(a <= 1.0 + 1e-6, 0.0, np.nan_to_num(r))
    return np.clip(np.floor(r), 0.0, np.ceil(a) - 1.0)


__all__ = ["Requests", "Synth"]
