"""Every parameter of the online regime detector, in one place, in seconds, feature units
and probabilities: none counts windows, so 10-s and 60-s windows give the same regimes.

>>> p = DetectorParams()
>>> p.blocks(p.min_regime_s), p.penalty(3)
(10, 23.8)
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np

from regimetune.models import InputError
from regimetune.regimes.features import COUNT_FEATURES, DEFAULT_FEATURES, FEATURES


@dataclass(frozen=True, slots=True)
class DetectorParams:
    """Parameters of :class:`~regimetune.regimes.OnlineRegimeDetector` (the model is stated in
    :mod:`regimetune.regimes.detector`). Each means something a person can check on a plot:

    ``block_s``
        The time scale the detector reads the workload at (s): windows are pooled into
        blocks of this length on the clock's grid; a window length only changes how soon a
        block is complete. A change is dated to a block.
    ``regime_s``
        A typical regime's duration (s): a change costs the BIC of one more line per
        feature, ``(2 d + 1) log(regime_s / block_s)``, on the chi-square scale.
    ``min_regime_s``
        How long a segment lasts to found a regime (s); a shorter one is a burst of the
        regime around it, or, where the levels before and after it differ, goes with the
        nearer one.
    ``min_step``
        The least move a person sees as a change, in feature units (0.11: the read rate
        falls by 10 % or rises by 12 %; plateaus 10-20 % apart are distinct levels). Smaller
        steps between two segments are the level's wander.
    ``min_count_step``
        The same for the small-count features (``log_writes``, ``log_growth``,
        ``log_active``, unit 2): 0.35 is a factor 2 in one plus the rate, so a five-fold fall
        of the writes is a change and a burst of a few writes a second is not.
    ``wander``
        How far a level's blocks stray from its line without a change (feature units, a
        standard deviation), on top of the noise learnt from the blocks.
    ``drift_per_h``
        The fastest a level may drift (feature units per hour); a segment whose line moves
        faster (and by at least ``min_step`` over its length) is a transition.
    ``match_p``
        Significance of every test: a step or a drift counts only where it is this unlikely
        under the noise (two-sided).
    ``max_regimes``
        Most regimes kept; past it a new level joins the nearest known one.
    ``window_s``
        Nominal window length (s); ``None`` takes it from the windows (what the service's
        dates of a change count in).
    ``features``
        Window features (names of :data:`~regimetune.regimes.features.FEATURES`) of trace
        windows; series and ``learn_one`` use their own columns.
    """

    block_s: float = 60.0
    regime_s: float = 1800.0
    min_regime_s: float = 600.0
    min_step: float = 0.11
    min_count_step: float = 0.35
    wander: float = 0.03
    drift_per_h: float = 0.5
    match_p: float = 0.05
    max_regimes: int = 16
    window_s: float | None = None
    features: tuple[str, ...] = DEFAULT_FEATURES

    def __post_init__(self) -> None:
        for name in ("block_s", "regime_s", "min_regime_s", "min_step", "min_count_step", "drift_per_h"):
            _positive(name, getattr(self, name))
        v = self.wander
        if isinstance(v, bool) or not isinstance(v, int | float) or not (0.0 <= v < math.inf):
            raise InputError(f"wander must be a number >= 0, got {v!r}")
        if self.window_s is not None:
            _positive("window_s", self.window_s)
        if not (isinstance(self.match_p, int | float) and 0.0 < self.match_p < 1.0):
            raise InputError(f"match_p must be a probability in (0, 1), got {self.match_p!r}")
        v = self.max_regimes
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise InputError(f"max_regimes must be an integer >= 1, got {v!r}")
        if self.regime_s <= self.block_s:
            raise InputError("regime_s must be longer than block_s")
        names = tuple(self.features)
        unknown = [n for n in names if n not in FEATURES]
        if not names or unknown or len(set(names)) != len(names):
            raise InputError(f"features must be distinct names of {list(FEATURES)}, got {list(names)}")
        object.__setattr__(self, "features", names)

    def steps(self) -> np.ndarray:
        """The least step of each of ``features``, in feature units."""
        return np.array(
            [self.min_count_step if f in COUNT_FEATURES else self.min_step for f in self.features]
        )

    def blocks(self, seconds: float) -> int:
        """A duration in blocks (at least one)."""
        return max(1, round(seconds / self.block_s))

    def penalty(self, d: int, regime_blocks: float | None = None) -> float:
        """The cost of a change for ``d`` features on the chi-square scale (rounded to 0.1):
        BIC for a level and a slope per feature and the change's position, over a typical
        regime's blocks."""
        n = self.regime_s / self.block_s if regime_blocks is None else regime_blocks
        return round((2 * d + 1) * math.log(max(n, math.e)), 1)

    @property
    def z(self) -> float:
        """The two-sided normal quantile of ``match_p``."""
        from statistics import NormalDist

        return NormalDist().inv_cdf(1.0 - self.match_p / 2.0)

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["features"] = list(self.features)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DetectorParams:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise InputError(f"unknown detector parameters {unknown}; known: {sorted(known)}")
        d = dict(d)
        if "features" in d:
            d["features"] = tuple(d["features"])
        return cls(**d)

    @classmethod
    def from_assignments(cls, items: Iterable[str], **fixed: Any) -> DetectorParams:
        """Parameters from ``NAME=VALUE`` strings (a command line's ``--param``), each value
        read as its field's type (``features`` as comma-separated names), then ``fixed``.

        >>> DetectorParams.from_assignments(["min_regime_s=300", "features=log_reads"]).min_regime_s
        300.0
        """
        defaults = cls()
        d: dict[str, Any] = {}
        for item in items:
            name, sep, text = item.partition("=")
            name = name.strip()
            if not sep or not hasattr(defaults, name):
                raise InputError(
                    f"--param takes NAME=VALUE with NAME one of {[f.name for f in fields(cls)]}, got {item!r}"
                )
            default = getattr(defaults, name)
            try:
                if isinstance(default, tuple):
                    d[name] = tuple(v.strip() for v in text.split(",") if v.strip())
                elif isinstance(default, int) and not isinstance(default, bool):
                    d[name] = int(text)
                else:
                    d[name] = float(text)
            except ValueError:
                raise InputError(f"--param {name} takes a number, got {text!r}") from None
        return cls.from_dict(d | fixed)


def _positive(name: str, v: Any) -> None:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v <= 0:
        raise InputError(f"{name} must be a positive number, got {v!r}")


__all__ = ["DetectorParams"]
