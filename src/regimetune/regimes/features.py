"""Features of a window, on fixed scales that never drift with trace length.

Every feature is a fixed transform of the window's statistics (logarithms of rates and
counts, shares, entropy in bits) divided by a fixed unit, so one unit is roughly "a factor
e in a rate". No running statistic enters the scale: a detector sees the same coordinates
for the same workload whether the trace lasts a minute or a day. The only history a
feature needs is the keyspace size ``lag`` windows back (for the growth rate), which
:class:`FeatureExtractor` keeps in a small ring so the online and the batch path agree
to the last bit.

>>> from regimetune.models import WindowStats
>>> fx = FeatureExtractor(lag=2)
>>> w = WindowStats(index=0, start=0.0, length=1.0, reads=99, writes=0, active_keys=9,
...                 keyspace_size=9, topk_share=0.5, entropy=3.0)
>>> x = fx.transform_one(w)
>>> round(x["log_reads"], 3), round(x["log_active"], 3)
(4.605, 1.151)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from regimetune.models import InputError, WindowFrame, WindowStats

#: Feature names, in column order.
FEATURES: tuple[str, ...] = (
    "log_reads",  # log1p(reads/s)
    "log_writes",  # log1p(writes/s)
    "log_growth",  # log1p(new keys per second, over the last ``lag`` windows)
    "log_active",  # log1p(distinct keys in the window)
    "topk_share",  # share of the window's requests on its k hottest keys
    "entropy",  # Shannon entropy of key popularity, bits
    "log_rw",  # log((reads + 1) / (writes + 1))
)

#: What the detector uses by default: ``log_rw`` is left out because it repeats the noise of
#: ``log_writes`` (small write counts) on top of ``log_reads``.
DEFAULT_FEATURES: tuple[str, ...] = ("log_reads", "log_writes", "log_growth")

#: Fixed unit of each feature: a distance of 1 is about a factor e in the read rate, a factor
#: e^2 in the write rate, the read/write ratio, the keyspace growth or the active keys (small
#: counts, so their logarithms are noisy), half of the requests moving in or out of the
#: top-k, or four bits of entropy (both move a long way during a flash crowd's decline).
UNITS: dict[str, float] = {
    "log_reads": 1.0,
    "log_writes": 2.0,
    "log_growth": 2.0,
    "log_active": 2.0,
    "topk_share": 0.5,
    "entropy": 4.0,
    "log_rw": 2.0,
}

#: Features of small counts (writes, new keys, active keys): their least step a person sees
#: is ``DetectorParams.min_count_step``.
COUNT_FEATURES: frozenset[str] = frozenset({"log_writes", "log_growth", "log_active"})

#: Features that are ``log1p`` of a rate or a count: ``expm1(value * unit)`` is the rate.
LOG1P_FEATURES: frozenset[str] = frozenset({"log_reads", "log_writes", "log_growth", "log_active"})


def _check_names(names: Sequence[str]) -> tuple[str, ...]:
    names = tuple(names)
    if not names:
        raise InputError("at least one feature is needed")
    unknown = [n for n in names if n not in FEATURES]
    if unknown:
        raise InputError(f"unknown features {unknown}; known: {list(FEATURES)}")
    if len(set(names)) != len(names):
        raise InputError("features are listed twice")
    return names


#: The window statistics the features are made of (frame columns, and the same fields of a
#: :class:`~regimetune.models.WindowStats`), in the order the feature kernel reads them.
_RAW = ("reads", "writes", "length", "active_keys", "keyspace_size", "topk_share", "entropy")


class FeatureExtractor:
    """Turns windows into feature vectors, online or in bulk, with identical results.

    ``lag`` is how many windows back the keyspace growth rate looks; ``features`` picks and
    orders the columns (default :data:`FEATURES`). :meth:`transform` and
    :meth:`transform_one` advance the same state, so a frame cut in pieces gives the same
    features as the whole frame.
    """

    def __init__(
        self, *, lag: int = 5, features: Sequence[str] = FEATURES, units: Mapping[str, float] | None = None
    ) -> None:
        self.lag = lag
        self.features = features
        self.units = units

    # -- learnt state -----------------------------------------------------------------
    def _ensure(self) -> None:
        if not hasattr(self, "_ring"):
            if not isinstance(self.lag, int) or self.lag < 1:
                raise InputError(f"lag must be a positive integer, got {self.lag!r}")
            self._names = _check_names(self.features)
            units = {**UNITS, **(self.units or {})}
            if not all(isinstance(v, int | float) and v > 0 for v in units.values()):
                raise InputError("feature units must be positive numbers")
            self._units = np.array([float(units[n]) for n in self._names])
            self._codes = np.array([FEATURES.index(n) for n in self._names], dtype=np.int64)
            # keyspace sizes of the last ``lag`` windows. The very first window has no
            # earlier size, so its growth reads 0: detectors skip it (a warm-up window).
            self._ring: list[float] = []

    @property
    def names(self) -> tuple[str, ...]:
        self._ensure()
        return self._names

    def rate(self, x: np.ndarray, name: str) -> np.ndarray:
        """Column ``name`` of a feature matrix as the rate itself where it is a ``log1p``
        feature, else as it is."""
        self._ensure()
        j = self._names.index(name)
        return np.expm1(x[:, j] * self._units[j]) if name in LOG1P_FEATURES else x[:, j]

    def _growth(self, keyspace: np.ndarray, length: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """New keys per second against ``lag`` windows back (fewer at the very start), and
        the seconds that rate was counted over. The first window of a stream has no rate:
        its keys are new because observation began, not because they were discovered (NaN:
        a missing value to the detector)."""
        hist = np.concatenate([np.asarray(self._ring, dtype=np.float64), keyspace])
        n_prev = len(self._ring)
        pos = np.arange(n_prev, len(hist))
        back = np.maximum(pos - self.lag, 0)
        steps = pos - back
        delta = hist[pos] - hist[back]
        with np.errstate(invalid="ignore", divide="ignore"):
            g = np.where(steps > 0, delta / (np.maximum(steps, 1) * length), np.nan)
        self._ring = hist[-self.lag :].tolist()
        return g, np.maximum(steps, 1) * length

    def _growth_one(self, keyspace: float, length: float) -> tuple[float, float]:
        """:meth:`_growth` of one window, in floats (the per-window path: no array set-up,
        the same arithmetic)."""
        steps = min(len(self._ring), self.lag)
        seconds = max(steps, 1) * length
        rate = (keyspace - self._ring[-steps]) / seconds if steps else math.nan
        self._ring.append(keyspace)
        if len(self._ring) > self.lag:
            del self._ring[0]
        return rate, seconds

    def _check(self, x: np.ndarray) -> np.ndarray:
        if np.isfinite(x).all():
            return x
        missing = np.isnan(x)
        if "log_growth" in self._names:
            missing[:, self._names.index("log_growth")] = False  # the first window's: see _growth
        if np.isinf(x).any() or missing.any():
            bad = sorted({self._names[j] for j in np.nonzero(np.isinf(x) | missing)[1]})
            raise InputError(f"window statistics give non-finite features {bad}")
        return x

    # -- public ----------------------------------------------------------------------
    def transform(self, frame: WindowFrame) -> np.ndarray:
        """Feature matrix ``(len(frame), n_features)`` in feature units."""
        return self.transform_with_variance(frame)[0]

    def transform_with_variance(self, frame: WindowFrame) -> tuple[np.ndarray, np.ndarray]:
        """Feature matrix and the variance its counts imply, both ``(len(frame),
        n_features)`` in feature units (squared for the variance)."""
        self._ensure()
        raw = np.column_stack([frame[c].astype(np.float64) for c in _RAW])
        return self._both(raw)

    def _both(self, raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Features and variances of ``raw`` (windows x :data:`_RAW`), advancing the state."""
        from regimetune.regimes._feature_kernel import feature_rows  # compiled on first use

        growth, exposure = self._growth(raw[:, 4], raw[:, 2])
        x, v = feature_rows(self._codes, self._units, raw, growth, exposure)
        return self._check(x), v

    def transform_row(self, window: WindowStats) -> np.ndarray:
        """One window's feature vector (advances the state)."""
        return self.transform_row_with_variance(window)[0]

    def transform_row_with_variance(self, window: WindowStats) -> tuple[np.ndarray, np.ndarray]:
        """One window's feature vector and its counts' variance (advances the state)."""
        from regimetune.regimes._feature_kernel import feature_row  # compiled on first use

        self._ensure()
        raw = tuple(float(getattr(window, f)) for f in _RAW)
        growth, exposure = self._growth_one(raw[4], raw[2])
        x, v, finite = feature_row(self._codes, self._units, raw, growth, exposure)
        if not finite:
            self._check(x[None, :])
        return x, v

    def transform_one(self, window: WindowStats) -> dict[str, float]:
        """One window's features as a river-style dict (advances the state)."""
        return dict(zip(self.names, self.transform_row(window).tolist(), strict=True))

    def vector(self, x: Mapping[str, float]) -> np.ndarray:
        """A feature dict as a vector in this extractor's column order."""
        self._ensure()
        try:
            v = np.array([float(x[n]) for n in self._names])
        except KeyError as exc:
            raise InputError(f"feature {exc.args[0]!r} is missing") from exc
        except (TypeError, ValueError) as exc:
            raise InputError(f"features must be numbers: {exc}") from exc
        if not np.all(np.isfinite(v)):
            raise InputError("features must be finite (got NaN or infinity)")
        return v

    def to_state(self) -> dict[str, Any]:
        self._ensure()
        return {
            "lag": self.lag,
            "features": list(self._names),
            "units": dict(zip(self._names, self._units.tolist(), strict=True)),
            "ring": list(self._ring),
        }

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> FeatureExtractor:
        try:
            fx = cls(lag=int(state["lag"]), features=tuple(state["features"]), units=dict(state["units"]))
            fx._ensure()
            fx._ring = [float(v) for v in state["ring"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"bad feature extractor state: {exc}") from exc
        return fx


# -- series --------------------------------------------------------------------------------


def counter_columns(values: np.ndarray) -> tuple[int, ...]:
    """Columns of a series (``(n, d)``, or ``(n,)`` for one column) that are counters: they never decrease and do not
    stay constant (requests served, bytes written, distance run; a Prometheus counter
    exported without ``rate()``). A counter is all trend: what changes with a regime is
    how fast it grows, so the detector reads its increase per row (:func:`counter_rates`).
    A counter that was reset (fell back) during the series is read as it is.

    >>> counter_columns(np.array([[1.0, 5.0, 2.0], [1.0, 7.0, 1.0], [1.0, 7.0, 3.0]]))
    (1,)
    """
    x = np.asarray(values, dtype=np.float64)
    if x.ndim not in (1, 2) or len(x) < 3:
        return ()
    steps = np.diff(x.reshape(len(x), -1), axis=0)
    return tuple(int(j) for j in np.flatnonzero((steps >= 0).all(axis=0) & (steps > 0).any(axis=0)))


def counter_rates(values: np.ndarray, columns: Sequence[int]) -> np.ndarray:
    """A copy of ``values`` with each of ``columns`` replaced by its increase per row (the
    first row takes the second's increase: it has no predecessor).

    >>> counter_rates(np.array([[0.0, 1.0], [2.0, 1.0], [5.0, 2.0]]), [0]).tolist()
    [[2.0, 1.0], [2.0, 1.0], [3.0, 2.0]]
    """
    out = np.array(values, dtype=np.float64)
    cols = out.reshape(len(out), -1) if len(columns) else out  # a view: a series of one column too
    for j in columns:
        step = np.diff(cols[:, j])
        cols[:, j] = np.r_[step[:1], step]
    return out


def log_columns(values: np.ndarray, columns: Sequence[int], names: Sequence[str] | None = None) -> np.ndarray:
    """A copy of ``values`` with each of ``columns`` in log space (natural log), as the
    detector reads the rates of trace windows: a metric whose noise grows with its level (a
    request rate, a latency, a price) has about the same noise at every level there. A
    missing value stays missing; a value that is not positive has no log, and is an
    :class:`~regimetune.models.InputError` naming its column and row.

    >>> log_columns(np.array([[1.0, -1.0], [np.e, 2.0]]), [0]).round(3).tolist()
    [[0.0, -1.0], [1.0, 2.0]]
    """
    out = np.array(values, dtype=np.float64)
    cols = out.reshape(len(out), -1) if len(columns) else out  # a view: a series of one column too
    for j in columns:
        bad = np.flatnonzero(cols[:, j] <= 0.0)
        if len(bad):
            name = names[j] if names is not None else f"#{j}"
            raise InputError(
                f"column {name!r} has {cols[bad[0], j]:g} at row {bad[0]}: log space needs positive values"
            )
        cols[:, j] = np.log(cols[:, j])
    return out


class SeriesInputs(NamedTuple):
    """What the detector reads of a series, and how: the values, the columns read as
    counters (their increase per row) and the columns read in log space."""

    values: np.ndarray
    counters: tuple[int, ...]
    log: tuple[int, ...]


def series_inputs(
    values: np.ndarray,
    *,
    counters: bool = True,
    log: Sequence[int] = (),
    names: Sequence[str] | None = None,
) -> SeriesInputs:
    """What the detector reads of a series: each counter column (with ``counters``, see
    :func:`counter_columns`) as its increase per row, then each of ``log`` in log space (a
    counter's increase is a rate, so it may be both)."""
    x = np.asarray(values, dtype=np.float64)
    as_rates = counter_columns(x) if counters else ()
    x = counter_rates(x, as_rates)
    if isinstance(log, str):
        raise InputError(f"log is the indices of columns, got {log!r}")
    logged = tuple(dict.fromkeys(int(j) for j in log))
    return SeriesInputs(log_columns(x, logged, names), as_rates, logged)


__all__ = [
    "COUNT_FEATURES",
    "DEFAULT_FEATURES",
    "FEATURES",
    "LOG1P_FEATURES",
    "UNITS",
    "FeatureExtractor",
    "SeriesInputs",
    "counter_columns",
    "counter_rates",
    "log_columns",
    "series_inputs",
]
