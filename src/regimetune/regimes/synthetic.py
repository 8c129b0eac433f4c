"""Synthetic window frames for tests, doctests and quick experiments (no events involved).

The event-level ParSplice-like generator lives in :mod:`regimetune.collectors`; this module
builds :class:`WindowFrame` objects directly from per-regime profiles, which is enough to
exercise a detector and orders of magnitude faster.

>>> f = parsplice_like_frame(n_windows=100, seed=0)
>>> len(f), sorted(set(f["label"].tolist()))
(100, [0, 1, 2, 3])
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from regimetune.models import InputError, WindowFrame


@dataclass(frozen=True, slots=True)
class Profile:
    """Mean statistics of one regime: reads/s, writes/s, active keys, top-k share,
    entropy (bits) and new keys per second."""

    reads: float
    writes: float
    active: float
    topk: float
    entropy: float
    growth: float


#: Flash crowd, (decline: interpolated), two steady plateaus (Sevilla et al., Figure 1).
PARSPLICE = (
    Profile(reads=6000, writes=120, active=12, topk=0.95, entropy=2.5, growth=40),
    Profile(reads=0, writes=0, active=0, topk=0, entropy=0, growth=0),  # the decline
    Profile(reads=1500, writes=60, active=60, topk=0.55, entropy=5.0, growth=12),
    Profile(reads=750, writes=300, active=150, topk=0.35, entropy=6.5, growth=4),
)


def frame_from_profiles(
    profiles: Sequence[Profile],
    lengths: Sequence[int],
    *,
    seed: int = 0,
    noise: float = 0.05,
    window_s: float = 1.0,
    ramps: Sequence[int] = (),
) -> WindowFrame:
    """Concatenate regimes of ``lengths`` windows. Rates get Poisson noise, shares and
    entropy multiplicative noise ``noise``; regimes listed in ``ramps`` interpolate in log
    space between their neighbours (a steep decline)."""
    if len(profiles) != len(lengths) or not lengths or min(lengths) < 1:
        raise InputError("one positive length per profile is needed")
    rng = np.random.default_rng(seed)
    fields = ("reads", "writes", "active", "topk", "entropy", "growth")
    mean = {f: [] for f in fields}  # type: dict[str, list[np.ndarray]]
    for r, (p, n) in enumerate(zip(profiles, lengths, strict=True)):
        for f in fields:
            if r in ramps:
                a, b = getattr(profiles[r - 1], f), getattr(profiles[r + 1], f)
                u = np.linspace(0.0, 1.0, n + 2)[1:-1]
                mean[f].append(np.exp(np.log(a + 1) * (1 - u) + np.log(b + 1) * u) - 1)
            else:
                mean[f].append(np.full(n, getattr(p, f)))
    m = {f: np.concatenate(v) for f, v in mean.items()}
    total = int(sum(lengths))
    reads = rng.poisson(m["reads"] * window_s)
    writes = rng.poisson(m["writes"] * window_s)
    active = np.maximum(1, rng.poisson(m["active"]))
    new_keys = rng.poisson(m["growth"] * window_s)
    keyspace = np.cumsum(new_keys) + int(m["active"][0])
    topk = np.clip(m["topk"] * (1 + noise * rng.standard_normal(total)), 0.0, 1.0)
    entropy = np.maximum(0.0, m["entropy"] * (1 + noise * rng.standard_normal(total)))
    labels = np.repeat(np.arange(len(lengths)), lengths)
    cols = {
        "index": np.arange(total),
        "start": np.arange(total) * window_s,
        "length": np.full(total, window_s),
        "reads": reads,
        "writes": writes,
        "active_keys": active,
        "keyspace_size": keyspace,
        "topk_share": topk,
        "entropy": entropy,
        "label": labels,
        "exact": np.ones(total, dtype=bool),
    }
    return WindowFrame(columns=cols, bucket_load=np.zeros((total, 0)), bucket_bytes=np.zeros((total, 0)))


def parsplice_like_frame(
    n_windows: int = 1000, *, stretch: float = 1.0, seed: int = 0, noise: float = 0.05, window_s: float = 1.0
) -> WindowFrame:
    """Four ParSplice regimes taking 15/10/35/40 % of ``n_windows``; ``stretch`` makes the
    flash crowd and the decline last ``stretch`` times longer (a faster keyspace growth
    looks like the slower one stretched along the time axis), so the frame grows."""
    if n_windows < 8:
        raise InputError("a ParSplice-like frame needs at least 8 windows")
    if not stretch > 0:
        raise InputError("stretch must be positive")
    shares = np.array([0.15 * stretch, 0.10 * stretch, 0.35, 0.40])
    lengths = np.maximum(1, np.round(shares * n_windows).astype(int))
    return frame_from_profiles(
        PARSPLICE, lengths.tolist(), seed=seed, noise=noise, ramps=(1,), window_s=window_s
    )


def stationary_frame(
    n_windows: int = 3600, *, regime: int = 3, seed: int = 0, noise: float = 0.05, window_s: float = 1.0
) -> WindowFrame:
    """One ParSplice plateau regime only (for false-alarm rates)."""
    return frame_from_profiles([PARSPLICE[regime]], [n_windows], seed=seed, noise=noise, window_s=window_s)


__all__ = ["PARSPLICE", "Profile", "frame_from_profiles", "parsplice_like_frame", "stationary_frame"]
