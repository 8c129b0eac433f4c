"""A ParSplice-like key-value workload (Sevilla et al., sections 3-5), generated vectorised.

Workers ``get`` the coordinates of a state (a key) and ``put`` the final state of a segment.
Every event carries its ground-truth regime label. ``preset`` chooses the run's shape:

* ``parsplice`` (the default), ``fast-decay`` and ``stationary`` follow what real ParSplice
  traces look like (a flash crowd on one or two keys, a decline in uneven steps, plateaus 10-20 %
  apart, overdispersed noise, one-window dips, spikes of the active-key count, 87-99.6 % of
  consecutive requests on the same key, a keyspace growing linearly); their regimes are listed
  in :mod:`regimetune.collectors.presets`. Their traces start at ``start_s`` (drawn from the
  seed, 0.5-9.5 s, unless given) and end ``duration_s`` later, off any window boundary.
* ``classic`` is the generator's original shape, event for event, described below.

The classic run has four regimes, labelled 0..3 on every event:

0. a flash crowd: a high read rate, most reads redundant on a handful of hot keys;
1. a steep (exponential) decline of the request rate;
2. and 3. two plateaus of steady rates (about 900 and 600 reads/s at 256 workers).

Reads outnumber writes 50-100x. New keys (states) are discovered along a convex curve that
reaches ``150K * timescale/9000 s * workers/256 * temperature`` keys at the end of a run at
growth 1; reads go to a sliding active set of the most recently discovered keys (about 100
keys at 256 workers later in the run, popularity falling to 1/5 from the newest to the
oldest) in short bursts of re-reads of one state (mean 4), plus a few revisits of older keys. ``growth`` stretches the time axis: growth 2
looks like growth 1 stretched 2x. ``timescale_s`` (default: the duration) is the length over
which growth 1 unfolds the four regimes.

>>> cfg = GeneratorConfig(duration_s=120, workers=8, seed=1, preset="classic")
>>> b = EventBatch.concat(list(generate(cfg)))
>>> bool((np.diff(b.ts) >= 0).all()), sorted(set(b.label.tolist()))
(True, [0, 1, 2, 3])
>>> cfg = GeneratorConfig(duration_s=3600, workers=16, seed=1)
>>> b = EventBatch.concat(list(generate(cfg)))
>>> sorted(set(b.label.tolist())), bool(cfg.trace_start < b.ts[0] < b.ts[-1] < cfg.trace_end)
([0, 1, 2, 3], True)
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass

import numpy as np

from regimetune.collectors._hashing import KeySet, bucket_of
from regimetune.collectors._synth import Synth
from regimetune.collectors.presets import REALISTIC_PRESETS, Shape, build_shape
from regimetune.models.errors import ConfigError
from regimetune.models.events import EventBatch, Op
from regimetune.models.rescale import Bucket

PAPER_RUN_S = 9000.0
"""The paper's 2.5 h run."""
BOUNDARIES = (0.08, 0.35, 0.65)
"""Regime starts (1, 2, 3) as fractions of ``growth * timescale_s``."""
PAPER_KEYSPACE = 150_000
PAPER_WORKERS = 256
PRESETS = (*REALISTIC_PRESETS, "classic")
"""Shapes of a run; ``parsplice`` is the default."""
START_S = (0.5, 9.5)
"""A realistic trace starts this long after 0 (drawn from the seed, to 0.1 s)."""

_RATE_FLASH = 2000.0  # reads/s at 256 workers
_RATE_A = 900.0
_RATE_B = 600.0
_DECLINE_TAU = 0.09  # time constant of the decline, fraction of the stretched timescale
_RW_RATIO = (90.0, 75.0, 65.0, 60.0)  # reads per write in each regime
_KEY_EXPONENT = 1.3  # convex discovery curve K(u) = K_end * u^1.3
_ACTIVE_MIN, _ACTIVE_MAX = 8.0, 110.0
_HOT_KEYS = 6
_REVISIT = 0.03
_BURST = 4.0  # mean length of a run of reads of the same frontier key
_CHUNK_S = 300
_KEY_MULT = np.uint64(0x9E3779B97F4A7C15)
_KEY_MASK = np.uint64((1 << 40) - 1)


@dataclass(frozen=True, slots=True)
class GeneratorConfig:
    """Knobs of the synthetic ParSplice workload; validated on construction."""

    duration_s: float = PAPER_RUN_S
    growth: float = 1.0
    temperature: float = 1.0
    workers: int = PAPER_WORKERS
    seed: int = 0
    value_size: int = 4096
    n_buckets: int = 0
    timescale_s: float | None = None
    preset: str = "parsplice"
    start_s: float | None = None

    def __post_init__(self) -> None:
        if self.preset not in PRESETS:
            raise ConfigError(f"preset must be one of {', '.join(PRESETS)}, got {self.preset!r}")
        if self.preset == "classic" and self.start_s not in (None, 0, 0.0):
            raise ConfigError("start_s applies to the realistic presets; a classic trace starts at 0")
        checks = {
            "duration_s": (self.duration_s, 1.0, 1e7),
            "growth": (self.growth, 0.05, 100.0),
            "temperature": (self.temperature, 0.05, 100.0),
            "workers": (self.workers, 1, 1_000_000),
            "value_size": (self.value_size, 0, 2**32 - 1),
            "n_buckets": (self.n_buckets, 0, 1 << 24),
            "seed": (self.seed, 0, 2**63 - 1),
        }
        if self.timescale_s is not None:
            checks["timescale_s"] = (self.timescale_s, 1.0, 1e7)
        if self.start_s is not None:
            checks["start_s"] = (self.start_s, 0.0, 1e10)
        for name, (v, lo, hi) in checks.items():
            if (
                isinstance(v, bool)
                or not isinstance(v, int | float)
                or not math.isfinite(v)
                or not lo <= v <= hi
            ):
                raise ConfigError(f"{name} must be a number in [{lo}, {hi}], got {v!r}")
        for name in ("workers", "value_size", "n_buckets", "seed"):
            if not isinstance(getattr(self, name), int):
                raise ConfigError(f"{name} must be an integer, got {getattr(self, name)!r}")

    @property
    def scale(self) -> float:
        """The run's time scale: growth 1 unfolds the regimes over this many seconds."""
        return float(self.timescale_s if self.timescale_s is not None else self.duration_s)

    @property
    def keyspace_end(self) -> float:
        """Keys discovered by the end of the timescale at growth 1."""
        return PAPER_KEYSPACE * (self.scale / PAPER_RUN_S) * (self.workers / PAPER_WORKERS) * self.temperature

    @property
    def trace_start(self) -> float:
        """Time of the trace's beginning: 0 for ``classic``, else ``start_s`` or drawn from the
        seed."""
        if self.preset == "classic":
            return 0.0
        if self.start_s is not None:
            return float(self.start_s)
        return round(float(np.random.default_rng([self.seed, 3]).uniform(*START_S)), 1)

    @property
    def trace_end(self) -> float:
        """Time of the trace's end (pass it to ``window_frame(..., end=)``)."""
        return self.trace_start + float(self.duration_s)

    def regime_starts(self) -> tuple[float, ...]:
        """Times (s) at which regimes 1, 2, ... begin (some may lie after the trace's end)."""
        s = self.growth * self.scale
        if self.preset == "classic":
            return (BOUNDARIES[0] * s, BOUNDARIES[1] * s, BOUNDARIES[2] * s)
        return tuple((self.trace_start + shape_of(self).bounds).tolist())

    def regime_names(self) -> tuple[str, ...]:
        """What a person calls each labelled regime, by label."""
        if self.preset == "classic":
            return ("flash crowd", "decline", "plateau 1", "plateau 2")
        return shape_of(self).names

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


@functools.lru_cache(maxsize=32)
def shape_of(cfg: GeneratorConfig) -> Shape:
    """The shape of a realistic run (drawn from its seed, the same every time)."""
    if cfg.preset == "classic":
        raise ConfigError("the classic preset has no drawn shape")
    return build_shape(
        cfg.preset,
        seed=cfg.seed,
        timescale_s=cfg.growth * cfg.scale,
        duration_s=float(cfg.duration_s),
        workers=cfg.workers,
        temperature=cfg.temperature,
        growth=cfg.growth,
    )


def _phase(cfg: GeneratorConfig, t: np.ndarray) -> np.ndarray:
    return t / (cfg.growth * cfg.scale)


def regime_of(cfg: GeneratorConfig, t: np.ndarray) -> np.ndarray:
    """Ground-truth regime (0..3 for classic and parsplice) at times ``t``."""
    if cfg.preset != "classic":
        return shape_of(cfg).label(np.asarray(t, dtype=float) - cfg.trace_start)
    return np.searchsorted(
        np.asarray(BOUNDARIES), _phase(cfg, np.asarray(t, dtype=float)), side="right"
    ).astype(np.int16)


def read_rate(cfg: GeneratorConfig, t: np.ndarray) -> np.ndarray:
    """Mean reads/s at times ``t`` (before noise, and for the realistic presets before stalls)."""
    if cfg.preset != "classic":
        return shape_of(cfg).rate(np.asarray(t, dtype=float) - cfg.trace_start)
    u = _phase(cfg, np.asarray(t, dtype=float))
    w = cfg.workers / PAPER_WORKERS
    decline = _RATE_A + (_RATE_FLASH - _RATE_A) * np.exp(-(u - BOUNDARIES[0]) / _DECLINE_TAU)
    r = np.select(
        [u < BOUNDARIES[0], u < BOUNDARIES[1], u < BOUNDARIES[2]],
        [np.full_like(u, _RATE_FLASH), decline, np.full_like(u, _RATE_A)],
        _RATE_B,
    )
    return r * w


def keyspace_at(cfg: GeneratorConfig, t: np.ndarray) -> np.ndarray:
    """Keys discovered by times ``t`` (continuous; classic: linear after the end of the
    timescale)."""
    if cfg.preset != "classic":
        return shape_of(cfg).keyspace(np.asarray(t, dtype=float) - cfg.trace_start)
    u = _phase(cfg, np.asarray(t, dtype=float))
    k_end = cfg.keyspace_end
    uc = np.clip(u, 0.0, 1.0)
    k = k_end * uc**_KEY_EXPONENT + k_end * _KEY_EXPONENT * np.maximum(u - 1.0, 0.0)
    return np.maximum(k, _hot(cfg) + 1)


def _hot(cfg: GeneratorConfig) -> int:
    return max(2, round(_HOT_KEYS * cfg.temperature))


def _active(cfg: GeneratorConfig, u: np.ndarray) -> np.ndarray:
    w = cfg.workers / PAPER_WORKERS
    a = (_ACTIVE_MIN + (_ACTIVE_MAX - _ACTIVE_MIN) * (1.0 - np.exp(-u / 0.25))) * cfg.temperature * w
    return np.maximum(a, 6.0)


def _hot_share(u: np.ndarray) -> np.ndarray:
    return np.where(u < BOUNDARIES[0], 0.9, 0.9 * np.exp(-(u - BOUNDARIES[0]) / 0.04))


def key_ids(index: np.ndarray) -> np.ndarray:
    """Discovery index -> key id: a bijection of [0, 2^40) that scatters consecutive states."""
    return (np.asarray(index, dtype=np.uint64) * _KEY_MULT) & _KEY_MASK


def _chunk(cfg: GeneratorConfig, rng: np.random.Generator, t0: float, t1: float) -> EventBatch:
    secs = np.arange(math.floor(t0), math.ceil(t1), dtype=np.float64)
    span = np.minimum(secs + 1.0, t1) - secs
    mid = secs + span / 2
    lab = regime_of(cfg, mid)
    ratio = np.asarray(_RW_RATIO)[lab]
    lam = read_rate(cfg, mid) * (1.0 + 1.0 / ratio) * span
    lam *= rng.lognormal(mean=-(0.08**2) / 2, sigma=0.08, size=len(secs))
    n = rng.poisson(lam)
    total = int(n.sum())
    ts = np.repeat(secs, n) + rng.random(total) * np.repeat(span, n)
    ts.sort()
    ts = np.minimum(np.round(ts, 6), np.nextafter(t1, -np.inf))  # microsecond clock, still in [t0, t1)
    u = _phase(cfg, ts)
    label = regime_of(cfg, ts)
    p_write = 1.0 / (np.asarray(_RW_RATIO)[label] + 1.0)
    op = (rng.random(total) < p_write).astype(np.uint8)
    k_now = np.floor(keyspace_at(cfg, ts))
    active = _active(cfg, u)
    # frontier: rank r in [0, A) with weights (1 + r)^-alpha, the newest key 5x the oldest
    alpha = np.log(5.0) / np.log(active)
    x = rng.random(total)
    e = 1.0 - alpha
    r = np.floor((1.0 + x * ((1.0 + active) ** e - 1.0)) ** (1.0 / e) - 1.0)
    idx = k_now - 1.0 - np.minimum(r, active - 1.0)
    # a worker stuck in a superbasin re-reads the same state: frontier reads come in bursts
    burst = rng.random(total) < 1.0 / _BURST
    burst[0] = True
    idx = idx[burst][np.cumsum(burst) - 1]
    # writes land on the frontier (final states of segments)
    writes = op == Op.WRITE
    idx[writes] = k_now[writes] - 1.0 - np.floor(rng.random(int(writes.sum())) * 3.0)
    kind = rng.random(total)
    share = _hot_share(u)
    hot = (kind < share) & ~writes
    n_hot = _hot(cfg)
    idx[hot] = np.floor(n_hot * rng.random(int(hot.sum())) ** 2.0)  # hot keys, skewed
    revisit = (kind > 1.0 - _REVISIT * (1.0 - share)) & ~writes
    idx[revisit] = np.floor(rng.random(int(revisit.sum())) * k_now[revisit])
    keys = key_ids(np.maximum(idx, 0.0).astype(np.uint64))
    bucket = bucket_of(keys, cfg.n_buckets) if cfg.n_buckets else None
    return EventBatch.from_columns(
        ts=ts,
        key=keys,
        op=op,
        size=np.full(total, cfg.value_size, dtype=np.uint32),
        bucket=bucket,
        label=label,
    )


def generate(cfg: GeneratorConfig | None = None) -> Iterator[EventBatch]:
    """The workload as time-ordered batches of a few minutes each (same config and seed, same
    events)."""
    cfg = cfg or GeneratorConfig()
    if cfg.preset != "classic":
        yield from _realistic(cfg)
        return
    rng = np.random.default_rng(cfg.seed)
    t = 0.0
    while t < cfg.duration_s:
        t1 = min(t + _CHUNK_S, cfg.duration_s)
        b = _chunk(cfg, rng, t, t1)
        if len(b):
            yield b
        t = t1


def _realistic(cfg: GeneratorConfig) -> Iterator[EventBatch]:
    """A realistic preset's events, chunk by chunk (see :mod:`regimetune.collectors._synth`)."""
    synth = Synth(shape_of(cfg), seed=cfg.seed, start_s=cfg.trace_start, end_s=cfg.trace_end)
    t = 0.0
    while t < cfg.duration_s:
        t1 = min(t + _CHUNK_S, float(cfg.duration_s))
        req = synth.chunk(t, t1)
        if len(req.ts):
            keys = key_ids(req.key_index)
            yield EventBatch.from_columns(
                ts=req.ts,
                key=keys,
                op=req.op,
                size=np.full(len(keys), cfg.value_size, dtype=np.uint32),
                bucket=bucket_of(keys, cfg.n_buckets) if cfg.n_buckets else None,
                label=req.label,
            )
        t = t1


def bucket_view(
    batches: Iterable[EventBatch], n_buckets: int, *, value_size: int | None = None
) -> list[Bucket]:
    """Hash every key into one of ``n_buckets`` buckets: each bucket's load is its number of
    requests, its size the bytes of the distinct keys it holds (each key's first size, or
    ``value_size`` when given).

    >>> b = EventBatch.from_columns(ts=[0, 1, 2], key=[1, 1, 2], size=[10, 10, 20])
    >>> bs = bucket_view([b], 1)
    >>> bs[0].load, bs[0].size
    (3.0, 30.0)
    """
    if not isinstance(n_buckets, int) or n_buckets < 1:
        raise ConfigError(f"n_buckets must be a positive integer, got {n_buckets!r}")
    load = np.zeros(n_buckets)
    size = np.zeros(n_buckets)
    seen = KeySet()
    for b in batches:
        bk = bucket_of(b.key, n_buckets)
        load += np.bincount(bk, minlength=n_buckets)
        new = seen.add_new(b.key)
        w = (
            np.full(int(new.sum()), float(value_size))
            if value_size is not None
            else b.size[new].astype(float)
        )
        size += np.bincount(bk[new], weights=w, minlength=n_buckets)
    return [Bucket(id=j, load=float(load[j]), size=float(size[j])) for j in range(n_buckets)]


__all__ = [
    "BOUNDARIES",
    "PRESETS",
    "GeneratorConfig",
    "bucket_view",
    "generate",
    "key_ids",
    "keyspace_at",
    "read_rate",
    "regime_of",
    "shape_of",
]
