"""The shapes of the realistic generator presets, drawn once per run from its seed.

The facts come from real ParSplice key-value traces (``shared/design/real-workload-facts.md``):
a flash crowd of redundant reads on one or two keys, a decline in uneven steps while the active
keyspace widens, plateaus 10-20 % apart, 3-5 % window-to-window noise, one-window dips, short
spikes of the active-key count. A :class:`Shape` holds what is random about one run's shape
(levels, boundaries, step sizes, dips, spikes) in seconds since the trace began; the event
synthesis (:mod:`regimetune.collectors._synth`) adds the per-second and per-request noise.

Ground-truth labels are what a person sees on a plot of reads/s: the flash crowd, the decline,
each plateau. The shelves inside a decline, the one-window dips and the spikes of the
active-key count are noise, never regimes.

* ``parsplice``: 0 flash crowd (10-20 % of the run, 600-700 reads/s at 256 workers, reads on one
  or two keys), 1 decline (15-25 % of the run, drops of 5-15 % between shelves, down to the
  first plateau), 2 first plateau (280-320 reads/s at 256 workers), 3 second plateau, 12-18 %
  lower, after a step of 10-50 s;
* ``fast-decay``: 0 decline (no flash crowd: an exponential fall, most of it within the first
  10 % of the run, over after three time constants), 1 plateau (a slow, stepless drift down of
  15-25 % over 45-60 % of the run, then flat: one level that wanders, as a person reads it);
* ``stationary``: 0 one plateau, with the same noise, dips and spikes (for false-change tests).

>>> s = build_shape("parsplice", seed=1, timescale_s=14_400, duration_s=14_400, workers=256)
>>> s.names
('flash crowd', 'decline', 'plateau 1', 'plateau 2')
>>> [int(x) for x in s.label(np.array([0.0, 14_000.0]))]
[0, 3]
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from regimetune.models.errors import ConfigError

REALISTIC_PRESETS = ("parsplice", "fast-decay", "stationary")
"""Presets built from a :class:`Shape` (``classic`` is the generator's original code path)."""

REF_WORKERS = 256
"""Rates, active keys and keyspace growth below are for this many workers and scale linearly."""
FLASH_RATE = (600.0, 700.0)
"""Reads/s in the flash crowd (and at the start of a fast decay)."""
PLATEAU_RATE = (280.0, 320.0)
"""Reads/s of the first plateau."""
PLATEAU_GAP = (0.12, 0.18)
"""The second plateau lies this share below the first."""
DROP = (0.05, 0.15)
"""Each step of a stepwise decline drops the rate by this share."""
SHELF_S = 240.0
"""Mean length of a shelf between two drops of a decline ("short shelves of a few minutes"):
the decline has as many steps as fit at this pace, as far as every drop stays within
:data:`DROP`; the shelves are uneven, 0.4-1.6 times their mean."""
ACTIVE_KEYS = 100.0
"""Size of the active set (keys a worker may be on) once the decline is over."""
KEYS_PER_S = 2.8
"""New keys per second once the flash crowd is over: about 35K keys in a 4 h run."""
HANDFUL = 4.0
"""Keys known while the flash crowd lasts."""
PAIR_DWELL_S = 20.0
"""Mean time the flash crowd's second key stays read, or unread, in a row."""
DIP_EVERY_S = 240.0
"""Mean time between stalls (a worker pool waits on a slow store)."""
DIP_S = (2.5, 4.0)
"""Length of a stall: within one 10 s window most of the time."""
DIP_DEPTH = (0.8, 1.0)
"""Share of the requests a stall holds back: a 10 s window dips 20-40 %."""
SPIKE_EVERY_S = 1200.0
"""Mean time between spikes of the active-key count."""
SPIKE_S = 60.0
"""Length of a spike."""
SPIKE_MULT = (3.0, 5.0)
"""A spike widens the active set, and shortens the runs on one key, by this factor."""
HUBS = 8
"""Keys that stay popular late in the run (states the trajectory keeps coming back to)."""
HUB_SHARE = 0.015
"""Share of the runs that start on a hub once the rate has settled: hubs get ~5x the reads of a
typical key over ten minutes."""
SWITCH = 0.05
"""Chance that a request starts a new run (a new key); otherwise it re-reads the previous key."""
RW_RATIO = {
    "parsplice": (95.0, 80.0, 70.0, 65.0),
    "fast-decay": (80.0, 65.0),
    "stationary": (65.0,),
}
"""Reads per write in each labelled regime."""
NAMES = {
    "parsplice": ("flash crowd", "decline", "plateau 1", "plateau 2"),
    "fast-decay": ("decline", "plateau"),
    "stationary": ("plateau",),
}


@dataclass(frozen=True, eq=False)
class Shape:
    """One run's shape, times in seconds since the trace began.

    The mean read rate and the active-set size are piecewise linear through
    ``(knots_t, knots_rate, knots_active)``; label ``i`` holds from ``bounds[i - 1]`` to
    ``bounds[i]``. Before ``pair_until`` the active set is one key, two while an odd number of
    ``pair_toggles`` lie behind. Stalls remove ``dip_loss`` of second ``dip_sec``'s requests;
    spikes multiply the active set by ``spike_mult`` for ``SPIKE_S`` seconds from
    ``spike_start``. The keyspace holds ``keys0`` keys, plus ``keys_per_s`` per second after
    ``grow_from``. From ``hub_from`` on, a share of the runs start on one of the ``hubs``.
    """

    preset: str
    names: tuple[str, ...]
    knots_t: np.ndarray
    knots_rate: np.ndarray
    knots_active: np.ndarray
    bounds: np.ndarray
    rw_ratio: np.ndarray
    keys0: float
    keys_per_s: float
    grow_from: float
    pair_until: float = 0.0
    pair_toggles: np.ndarray = field(default_factory=lambda: np.empty(0))
    dip_sec: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    dip_loss: np.ndarray = field(default_factory=lambda: np.empty(0))
    spike_start: np.ndarray = field(default_factory=lambda: np.empty(0))
    spike_mult: np.ndarray = field(default_factory=lambda: np.empty(0))
    hubs: np.ndarray = field(default_factory=lambda: np.empty(0))
    hub_from: float = math.inf

    def rate(self, t: np.ndarray) -> np.ndarray:
        """Mean reads/s at times ``t`` (before noise, stalls and spikes)."""
        return np.interp(t, self.knots_t, self.knots_rate)

    def label(self, t: np.ndarray) -> np.ndarray:
        """Ground-truth regime at times ``t``."""
        return np.searchsorted(self.bounds, t, side="right").astype(np.int16)

    def keyspace(self, t: np.ndarray) -> np.ndarray:
        """Keys known by times ``t`` (continuous)."""
        return self.keys0 + self.keys_per_s * np.maximum(np.asarray(t, dtype=float) - self.grow_from, 0.0)

    def spike(self, t: np.ndarray) -> np.ndarray:
        """Factor by which a spike widens the active set at times ``t`` (1 outside spikes)."""
        t = np.asarray(t, dtype=float)
        if not len(self.spike_start):
            return np.ones_like(t)
        i = np.searchsorted(self.spike_start, t, side="right") - 1
        j = np.maximum(i, 0)
        inside = (i >= 0) & (t < self.spike_start[j] + SPIKE_S)
        return np.where(inside, self.spike_mult[j], 1.0)

    def active(self, t: np.ndarray, spike: np.ndarray | None = None) -> np.ndarray:
        """Size of the active set at times ``t``, widened by ``spike`` (default: this shape's
        spikes at ``t``)."""
        a = np.interp(t, self.knots_t, self.knots_active)
        if self.pair_until > 0:
            second = np.searchsorted(self.pair_toggles, t, side="right") % 2 == 1
            a = np.where(t < self.pair_until, 1.0 + second, a)
        return a * (self.spike(t) if spike is None else spike)


def build_shape(
    preset: str,
    *,
    seed: int,
    timescale_s: float,
    duration_s: float,
    workers: int,
    temperature: float = 1.0,
    growth: float = 1.0,
) -> Shape:
    """Draw the shape of one run of ``preset``; ``timescale_s`` is the length over which the
    preset's regimes unfold (growth included), ``duration_s`` the trace's length; ``growth``
    also slows the keyspace's growth."""
    if preset not in REALISTIC_PRESETS:
        raise ConfigError(f"no realistic preset {preset!r}; choose one of {', '.join(REALISTIC_PRESETS)}")
    rng = np.random.default_rng([seed, 1])
    w = workers / REF_WORKERS
    a_end = max(2.0, ACTIVE_KEYS * w * temperature)
    kps = KEYS_PER_S * w * temperature / growth
    base = {"parsplice": _parsplice, "fast-decay": _fast_decay, "stationary": _stationary}[preset]
    b = base(rng, timescale_s, w)
    # the active set widens as the rate falls: in proportion to the share of the fall behind
    progress = np.clip(np.log(b.rate[0] / b.rate) / b.fall, 0.0, 1.0) if b.fall > 0 else np.ones(len(b.t))
    knots_active = b.active0 + (a_end - b.active0) * progress
    dip_sec, dip_loss = _dips(rng, duration_s)
    spike_start, spike_mult = _spikes(rng, duration_s)
    pair_until = float(b.bounds[0]) if preset == "parsplice" else 0.0
    keys0 = HANDFUL if preset != "stationary" else 0.5 * kps * timescale_s  # as if mid-run
    hub_from = float(b.bounds[-2 if preset == "parsplice" else -1]) if len(b.bounds) else 0.0
    known = keys0 + kps * max(hub_from - pair_until, 0.0)
    hubs = np.unique(np.floor(rng.uniform(0.0, known, size=HUBS)))
    toggles = np.cumsum(rng.exponential(PAIR_DWELL_S, size=int(pair_until / PAIR_DWELL_S * 2) + 8))
    return Shape(
        preset=preset,
        names=NAMES[preset],
        knots_t=b.t,
        knots_rate=b.rate,
        knots_active=knots_active,
        bounds=b.bounds,
        rw_ratio=np.asarray(RW_RATIO[preset]),
        keys0=keys0,
        keys_per_s=kps,
        grow_from=pair_until,
        pair_until=pair_until,
        pair_toggles=toggles if pair_until > 0 else np.empty(0),
        dip_sec=dip_sec,
        dip_loss=dip_loss,
        spike_start=spike_start,
        spike_mult=spike_mult,
        hubs=hubs,
        hub_from=hub_from,
    )


class _Base(NamedTuple):
    """A preset's rate knots, label bounds, the log-fall over which the active set widens from
    ``active0`` keys to its full size (0: it is full from the start)."""

    t: np.ndarray
    rate: np.ndarray
    bounds: np.ndarray
    fall: float
    active0: float


def _parsplice(rng: np.random.Generator, T: float, w: float) -> _Base:
    r_flash = rng.uniform(*FLASH_RATE) * w
    r_p1 = rng.uniform(*PLATEAU_RATE) * w
    r_p2 = r_p1 * (1.0 - rng.uniform(*PLATEAU_GAP))
    f1 = rng.uniform(0.10, 0.20) * T
    f2 = f1 + rng.uniform(0.15, 0.25) * T
    f3 = f2 + rng.uniform(0.25, 0.35) * T
    ts, rs = [0.0, f1], [r_flash, r_flash]
    for t_a, t_b, r in _steps(rng, f1, f2, r_flash, r_p1):
        ts += [t_a, t_b]
        rs += [rs[-1], r]
    step = min(rng.uniform(10.0, 50.0), 0.05 * T)
    ts += [f3 - step / 2, f3 + step / 2]
    rs += [r_p1, r_p2]
    return _Base(np.asarray(ts), np.asarray(rs), np.asarray([f1, f2, f3]), math.log(r_flash / r_p1), 2.0)


def _steps(
    rng: np.random.Generator, t0: float, t1: float, r0: float, r1: float
) -> list[tuple[float, float, float]]:
    """Drops of 5-15 % (rescaled to land on ``r1``) between shelves of uneven lengths, from
    ``t0`` to ``t1``: each drop as (start, end, rate after). The shelves last a few minutes
    (:data:`SHELF_S`) unless the drops would then leave :data:`DROP`."""
    total = math.log(r0 / r1)
    lo, hi = -math.log1p(-DROP[0]), -math.log1p(-DROP[1])
    fewest, most = max(1, math.ceil(total / hi)), max(1, math.floor(total / lo))
    n = min(max(round((t1 - t0) / SHELF_S), fewest), most)
    for _ in range(100):  # rejection: rescaled to land on r1, every drop still within DROP
        drops = -np.log1p(-rng.uniform(*DROP, size=n))
        drops *= total / drops.sum()
        if ((drops >= lo) & (drops <= hi)).all():
            break
    span = t1 - t0
    ramps = np.minimum(rng.uniform(15.0, 45.0, size=n), 0.1 * span / n)
    shelves = rng.uniform(0.4, 1.6, size=max(n - 1, 1))[: n - 1]
    shelves = shelves / shelves.sum() * (span - ramps.sum()) if n > 1 else shelves
    out, t, r = [], t0, r0
    for i in range(n):  # a handful of steps per run, not per event
        r *= math.exp(-drops[i])
        out.append((t, t + ramps[i], r))
        t += ramps[i] + (shelves[i] if i < n - 1 else 0.0)
    out[-1] = (out[-1][0], t1, r1)
    return out


def _fast_decay(rng: np.random.Generator, T: float, w: float) -> _Base:
    r0 = rng.uniform(*FLASH_RATE) * w
    r_p = rng.uniform(*PLATEAU_RATE) * w * rng.uniform(0.85, 0.95)
    drift = rng.uniform(0.15, 0.25)
    end = rng.uniform(0.45, 0.60) * T
    tau = rng.uniform(0.025, 0.035) * T
    t = np.unique(np.concatenate([np.linspace(0.0, 8 * tau, 240), np.linspace(8 * tau, end, 60)]))
    rate = r_p * (1.0 + drift * (1.0 - t / end)) + (r0 - r_p * (1.0 + drift)) * np.exp(-t / tau)
    # the fall is over once what is left of it is within the window noise (5 %): three time
    # constants; the drift after it moves no more than a level may wander, so it is the plateau
    return _Base(t, rate, np.asarray([3.0 * tau]), math.log(r0 / r_p), 3.0)


def _stationary(rng: np.random.Generator, T: float, w: float) -> _Base:
    r = rng.uniform(*PLATEAU_RATE) * w
    return _Base(np.asarray([0.0, 1.0]), np.asarray([r, r]), np.empty(0), 0.0, 2.0)


def _dips(rng: np.random.Generator, duration_s: float) -> tuple[np.ndarray, np.ndarray]:
    """Stalls every few minutes (gamma gaps: less bunched than a Poisson process): per covered
    second, the share of its requests held back."""
    gaps = rng.gamma(3.0, DIP_EVERY_S / 3.0, size=int(3 * duration_s / DIP_EVERY_S) + 8)
    start = np.cumsum(gaps) - rng.uniform(0.0, DIP_EVERY_S)
    start = start[(start >= 0) & (start < duration_s)]
    n = len(start)
    end = start + rng.uniform(*DIP_S, size=n)
    depth = rng.uniform(*DIP_DEPTH, size=n)
    secs = np.floor(start)[:, None] + np.arange(math.ceil(DIP_S[1]) + 1)[None, :]
    cover = np.clip(np.minimum(end[:, None], secs + 1) - np.maximum(start[:, None], secs), 0.0, 1.0)
    keep = cover > 0
    return secs[keep].astype(np.int64), (depth[:, None] * cover)[keep]


def _spikes(rng: np.random.Generator, duration_s: float) -> tuple[np.ndarray, np.ndarray]:
    """Spikes of the active-key count: start times (apart by more than a spike) and factors."""
    n = int(rng.poisson(duration_s / SPIKE_EVERY_S))
    gaps = SPIKE_S + rng.exponential(SPIKE_EVERY_S, size=n)
    start = np.cumsum(gaps) - SPIKE_S
    start = start[start < duration_s]
    return start, rng.uniform(*SPIKE_MULT, size=len(start))


__all__ = ["REALISTIC_PRESETS", "Shape", "build_shape"]
