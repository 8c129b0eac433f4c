"""Every parameter of the online regime detector, in one place, in seconds and probabilities.

Durations are in seconds of the workload, never in windows, so 10 s and 60 s windows give
the same regimes: :meth:`DetectorParams.kernel` turns them into windows (at least the few a
statistic needs) for a given window length.

>>> p = DetectorParams()
>>> k10, k60 = p.kernel(window_s=10.0, n_features=6), p.kernel(window_s=60.0, n_features=6)
>>> k10.min_regime, k60.min_regime
(90, 15)
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Any

from regimetune.models import InputError
from regimetune.regimes.features import DEFAULT_FEATURES, FEATURES

if TYPE_CHECKING:
    from regimetune.regimes._segmenter import KernelParams

#: The change test's noise models (see ``DetectorParams.noise_model``).
NOISE_MODELS = ("auto", "white", "ar1")
#: Windows below which no duration is taken, whatever the window length: a segment needs
#: two windows to show a level and its noise.
MIN_WINDOWS = 2


@dataclass(frozen=True, slots=True)
class DetectorParams:
    """Parameters of :class:`~regimetune.regimes.OnlineRegimeDetector`.

    The change test is a penalised likelihood (online PELT over lines with white or AR(1)
    noise, see ``noise_model``);
    regimes are clusters of the segments it finds. Each parameter means something a person
    can check on a trace:

    ``regime_s``
        A typical regime's duration (s). A change costs the BIC of one more segment, ``(3 d
        + 1) / 2 log(regime_s / window)`` nats for ``d`` features (a level, a slope and a
        variance each): longer typical regimes ask for more evidence.
    ``dwell_s``
        How long a new segment holds before it is judged (s): the shortest change seen.
    ``min_regime_s``
        How long a new level must hold, without slope, to found a regime (s); an excursion
        from a regime that lasts this long without settling, or (under white noise: trace
        windows) whose latest segment has moved this long, is a *transition* (a decline).
        Shorter excursions that come back are bursts, not regimes. It also bounds the
        precision a regime match is judged with.
    ``match_p``
        A segment returns to a known regime only when its mean is consistent with the
        regime's level at this significance (chi-square over the features); else it is new.
    ``noise_half_life_s``
        Memory of the noise learnt from first differences (s), and of their mean, about
        which their autocorrelation is learnt (so a decline's trend is not read as one).
    ``noise_clip``
        A first difference beyond this many standard deviations of the noise counts as
        this many (a dip or a step is not noise); a window that leaves the level by more is
        held back one window, and learnt as missing if the next is back (a one-window dip,
        such as a stalled worker).
    ``noise_floor``
        The noise of a feature is at least this share of its magnitude (a series that
        repeats exact values is not infinitely precise), but at most the rounding noise of
        the least step it has shown (``q^2 / 12``), so that a series far from zero against
        its noise is read as precisely as its steps show.
    ``level_spread``
        How far a steady level of trace windows is taken to wander, block to block of
        ``min_regime_s``, before its own wander has been learnt (a standard deviation in
        feature units: 0.01 is 1 % of the read rate, 2 % of the write rate, about the
        90th percentile of what generated runs learn, against 15-20 % between ParSplice
        plateaus). The regime tests allow for the larger of its square over one more than
        the blocks learnt and the wander learnt; with 0, a level is judged against white
        noise alone until the first blocks are in, and a move by about its own wander
        founds a regime live. A series' columns have no known unit: series start from
        white noise (as with 0).
    ``drift_half_life_s``
        Memory of a steady regime's level, so it follows slow drift (s), and, on trace
        windows, of how far that level wanders (a workload's wander changes as it runs;
        under AR(1) noise, series rows, the wander is the stream's, learnt from every
        block alike).
    ``trend_block_s``
        In hindsight (a replayed recording: ``detect``, a series), steady runs are read in
        blocks of this length (s) (:mod:`regimetune.regimes.hindsight`): a steady regime
        that follows a transition and whose block means trend the way the transition went
        (Kendall's tau at ``match_p``) was the transition's slow tail and takes its id
        (in the recording's last run, the part before a hinge where such a drift turns
        into a level that held ``min_regime_s``);
        then a steady run whose mean differs from the steady run before it by no more than
        the block means wander over the recording (a t test at ``match_p``) is the same
        level and takes its id (so is a transition that came back to that level);
        a transition's end moves to where its line turns level, where a likelihood ratio
        at ``match_p`` prefers it (by at most ``min_regime_s``), and to where its slow
        drift turns level, where the ratio beats ``match_p`` shared among the windows
        searched (however far; the blocks' boundaries are where the drift may begin), also
        past a second steady run the drift was cut into, where one line through both
        explains their block means within the level's wander at ``match_p``; and
        a transition shorter than ``min_regime_s`` joins the level after it; and a
        recording seen as one regime that starts in a drift (farther than the level's
        wander carries it as a random walk, at ``match_p``) gets a transition up to where
        the drift turns level. Live labels
        and the service's ``update`` are not affected; a block longer than the recording
        turns them off.
    ``growth_lag_s``
        How far back the keyspace growth rate looks (s).
    ``max_regimes``
        Most regimes kept; past it a new level joins the nearest steady regime.
    ``window_s``
        Nominal window length (s); ``None`` takes it from the windows (the median length of
        a replayed frame; online, the longer of the first two windows', since a trace's
        first window often covers part of one).
    ``features``
        Window features (names of :data:`~regimetune.regimes.features.FEATURES`) of trace
        windows; series and ``learn_one`` use their own columns.
    ``noise_model``
        ``"white"``: each window's noise is independent of the last (the features of trace
        windows are counts over disjoint windows, whose wandering the regime layer allows
        for); ``"ar1"``: AR(1) noise, its coefficient learnt per feature from the stream,
        less its standard error at ``match_p`` (a price or a smoothed metric wanders, and
        read as white noise it is cut at every turn; white noise reads as 0);
        ``"auto"`` (the default): white for trace windows, AR(1) for series rows
        (``detect_array``, ``learn_one``), whose noise nobody vouches for. docs/regimes-notes.md
        says what each did where.
    ``candidates``
        Segment starts kept by the change test beyond the committed one, half the newest,
        half the cheapest (a bound on time and memory per window, not a statistical knob).
    """

    regime_s: float = 1800.0
    dwell_s: float = 30.0
    min_regime_s: float = 900.0
    match_p: float = 0.01
    noise_half_life_s: float = 600.0
    noise_clip: float = 3.0
    noise_floor: float = 1e-3
    level_spread: float = 0.01
    drift_half_life_s: float = 1800.0
    trend_block_s: float = 300.0
    growth_lag_s: float = 30.0
    max_regimes: int = 16
    window_s: float | None = None
    features: tuple[str, ...] = DEFAULT_FEATURES
    noise_model: str = "auto"
    candidates: int = 32

    def __post_init__(self) -> None:
        for name in (
            "regime_s",
            "dwell_s",
            "min_regime_s",
            "noise_half_life_s",
            "noise_clip",
            "noise_floor",
            "drift_half_life_s",
            "trend_block_s",
        ):
            _positive(name, getattr(self, name))
        _positive("growth_lag_s", self.growth_lag_s)
        v = self.level_spread
        if isinstance(v, bool) or not isinstance(v, int | float) or not (0.0 <= v < math.inf):
            raise InputError(f"level_spread must be a number >= 0, got {v!r}")
        if self.window_s is not None:
            _positive("window_s", self.window_s)
        if not (isinstance(self.match_p, int | float) and 0.0 < self.match_p < 1.0):
            raise InputError(f"match_p must be a probability in (0, 1), got {self.match_p!r}")
        for name, lo in (("max_regimes", 1), ("candidates", 2)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise InputError(f"{name} must be an integer >= {lo}, got {v!r}")
        if self.noise_model not in NOISE_MODELS:
            raise InputError(f"noise_model must be one of {list(NOISE_MODELS)}, got {self.noise_model!r}")
        if self.min_regime_s < self.dwell_s:
            raise InputError("min_regime_s must be at least dwell_s")
        names = tuple(self.features)
        unknown = [n for n in names if n not in FEATURES]
        if not names or unknown or len(set(names)) != len(names):
            raise InputError(f"features must be distinct names of {list(FEATURES)}, got {list(names)}")
        object.__setattr__(self, "features", names)

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
                elif isinstance(default, str):
                    d[name] = text.strip()
                elif isinstance(default, int) and not isinstance(default, bool):
                    d[name] = int(text)
                else:
                    d[name] = float(text)
            except ValueError:
                raise InputError(f"--param {name} takes a number, got {text!r}") from None
        return cls.from_dict(d | fixed)

    def windows(self, seconds: float, window_s: float) -> int:
        """A duration in windows of ``window_s`` (at least :data:`MIN_WINDOWS`)."""
        return max(MIN_WINDOWS, round(seconds / window_s))

    def growth_lag(self, window_s: float) -> int:
        return max(1, round(self.growth_lag_s / window_s))

    def kernel(self, *, window_s: float, n_features: int, series: bool = False) -> KernelParams:
        """The parameters in windows and nats for windows of ``window_s`` seconds, of a
        series (its rows) or of a trace (its windows' features)."""
        # imported here: the service's settings hold these parameters, and reading them
        # needs neither scipy nor the compiled kernel
        import numpy as np
        from scipy.stats import chi2, norm

        from regimetune.regimes._segmenter import KernelParams

        _positive("window_s", window_s)
        d = n_features
        regime_n = max(self.regime_s / window_s, math.e)
        min_regime = self.windows(self.min_regime_s, window_s)
        return KernelParams(
            log_regime_n=math.log(regime_n),
            dwell=self.windows(self.dwell_s, window_s),
            min_regime=min_regime,
            match_n=min_regime,
            match_chi2=np.array([0.0, *(float(chi2.isf(self.match_p, k)) for k in range(1, d + 1))]),
            noise_weight=1.0 - 0.5 ** (window_s / self.noise_half_life_s),
            noise_clip=self.noise_clip,
            noise_floor=self.noise_floor,
            drift_weight=1.0 - 0.5 ** (window_s / self.drift_half_life_s),
            max_regimes=self.max_regimes,
            level_prior=0.0 if series else self.level_spread**2,
            ar_noise=self.noise_model == "ar1" or (self.noise_model == "auto" and series),
            moved_only=series,
            ar_margin=float(norm.isf(self.match_p)),
            recent=self.candidates // 2,
            best=self.candidates - self.candidates // 2,
        )


def _positive(name: str, v: Any) -> None:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v <= 0:
        raise InputError(f"{name} must be a positive number, got {v!r}")


__all__ = ["MIN_WINDOWS", "DetectorParams"]
