"""Online regime detection with stable ids, dwell and hysteresis, transitions, and state that
survives a restart.

The detector is a streaming nearest-centroid clusterer over the features of
:mod:`regimetune.regimes.features`, with a change test in front of it:

* a warm-up of ``warmup`` windows founds regime 0. Distances are in the fixed feature
  units by default (with ``noise_floor > 0``, in the warm-up's noise units instead), so the
  scale never drifts with the trace length;
* a change opens when the smoothed point is farther than ``radius`` from every known regime,
  or when the mean of the last ``dwell`` windows left the line of the current regime's
  recent past by ``z`` standard errors in features that moved by ``min_shift`` feature
  units together, or by ``1.2 z`` in two or more features at once, none of them alone
  beyond ``z`` (each regime learns its features' noise as it goes): a large step is
  confirmed as soon as ``dwell`` windows show it, a slow drift or a run of odd windows in a
  single statistic is not;
* once ``dwell`` windows sit at one level, that level is matched: a known regime within
  ``radius`` returns with its old id, the current one holds when the level does not differ
  from it significantly, else a new regime is founded there (K is learnt, up to ``k`` or
  ``max_regimes``);
* a young regime that keeps moving (a significant slope over its life) is a *transition*,
  such as the decline after a flash crowd: it differs from a plateau in slope, not level.
  Its centroid follows the windows, and it ends when its ``trend_feature`` (the log read
  rate) has levelled off in the transition's own time scale (flat over the last part of
  it, at most ``span`` windows); the new plateau is dated back to where the rate levelled
  off;
* between changes, a known regime takes over only after ``dwell`` windows in a row nearer
  to it than to the current one by ``margin`` (hysteresis), and centroids follow slow drift
  (step floored at ``1 / n_cap``) while keeping their ids. A regime founded by a change is,
  for its first ``n_cap`` windows, the mean of its own windows from ``dwell`` windows after
  the change on: the level it was founded at may hold windows that straddle the change (the
  first regime likewise, once half the warm-up's worth of windows are its own).

Every change is dated to where its evidence began (:attr:`RegimeChange.at_window`) and
confirmed later (:attr:`RegimeChange.confirmed_window`); history labels are back-dated to
the change, online labels are not.

:meth:`OnlineRegimeDetector.update` is the per-window call of the service;
:meth:`OnlineRegimeDetector.detect` replays a whole frame through the same compiled loop.

>>> import numpy as np
>>> from regimetune.regimes.synthetic import parsplice_like_frame
>>> frame = parsplice_like_frame(n_windows=1000, seed=1)
>>> history = OnlineRegimeDetector().detect(frame)
>>> [s.regime_id for s in history.segments]
[0, 1, 2, 3]
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from regimetune.models import InputError, Regime, RegimeChange, RegimeSegment, WindowFrame, WindowStats
from regimetune.models.regimes import RegimeHistory
from regimetune.regimes import _kernel
from regimetune.regimes.features import DEFAULT_FEATURES, FeatureExtractor
from regimetune.regimes.hindsight import redate_transition_ends

FORMAT_VERSION = 2
#: Windows at the start of a stream whose features are incomplete (the first window has no
#: keyspace growth rate); they join the first regime once it is founded.
_SKIP = 1
#: Windows of recent past that the change test compares the last ``dwell`` windows with.
_BASE = 30
#: Smallest noise of a feature (feature units): a feature that hardly moves, such as the
#: keyspace growth rate, cannot make a tiny wobble significant.
_SIGMA_FLOOR = 0.01
#: A transition has ended when, over the last _SETTLE_FRAC of its age (at most ``span``
#: windows), its trend's slope plus _SETTLE_T standard errors is below _SETTLE_SHARE of
#: its mean slope so far: flat for a while, in its own time scale.
_SETTLE_FRAC = 0.4
_SETTLE_T = 2.0
_SETTLE_SHARE = 0.3
#: A young regime is a transition when some feature's slope over its life is significant
#: (|t| >= _MOVE_T) and amounts to _MOVE_MIN feature units.
_MOVE_T = 5.0
_MOVE_MIN = 0.2
#: A transition's centroid follows the windows with a step of at least 1 / _N_FOLLOW.
_N_FOLLOW = 4.0


class OnlineRegimeDetector:
    """Detects workload regimes window by window.

    ``k`` fixes the largest number of regimes (default: learnt from the data, at most
    ``max_regimes``); ``dwell`` is how many windows a change must hold (the stabilization
    window); ``margin`` the hysteresis and ``radius`` the distance from every known regime
    at which a point is novel, both in feature units (noise units with ``noise_floor > 0``);
    ``z`` the significance of the change test in noise units and ``min_shift`` the smallest
    shift (feature units) it takes for a change; ``alpha`` the EWMA smoothing weight of a
    new window; ``n_cap`` floors the centroid learning rate at ``1 / n_cap`` so centroids
    follow slow drift; ``warmup`` windows found the first regime (and, with
    ``noise_floor > 0``, set the noise units, floored at ``noise_floor``);
    ``trend_feature`` is the feature whose levelling off ends a transition (``None``, or a
    feature that is not used, turns transitions off) and ``span`` the most windows its
    flatness test looks at (and how long a new regime may still turn out to be a
    transition); ``lag`` and ``features`` configure the features.
    """

    def __init__(
        self,
        k: int | None = None,
        *,
        dwell: int = 3,
        margin: float = 0.3,
        radius: float = 0.4,
        alpha: float = 0.5,
        n_cap: int = 100,
        warmup: int = 20,
        noise_floor: float = 0.0,
        z: float = 5.0,
        min_shift: float = 0.05,
        span: int = 250,
        trend_feature: str | None = "log_reads",
        lag: int = 3,
        max_regimes: int = 8,
        features: Sequence[str] = DEFAULT_FEATURES,
        units: Mapping[str, float] | None = None,
    ) -> None:
        self.k = k
        self.dwell = dwell
        self.margin = margin
        self.radius = radius
        self.alpha = alpha
        self.n_cap = n_cap
        self.warmup = warmup
        self.noise_floor = noise_floor
        self.z = z
        self.min_shift = min_shift
        self.span = span
        self.trend_feature = trend_feature
        self.lag = lag
        self.max_regimes = max_regimes
        self.features = features
        self.units = units

    def get_params(self) -> dict[str, Any]:
        return {
            "k": self.k,
            "dwell": self.dwell,
            "margin": self.margin,
            "radius": self.radius,
            "alpha": self.alpha,
            "n_cap": self.n_cap,
            "warmup": self.warmup,
            "noise_floor": self.noise_floor,
            "z": self.z,
            "min_shift": self.min_shift,
            "span": self.span,
            "trend_feature": self.trend_feature,
            "lag": self.lag,
            "max_regimes": self.max_regimes,
            "features": list(self.features),
            "units": dict(self.units) if self.units else None,
        }

    # -- state ------------------------------------------------------------------------
    def _validate(self) -> None:
        def positive_int(name: str, v: Any) -> None:
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise InputError(f"{name} must be a positive integer, got {v!r}")

        def non_negative(name: str, v: Any, *, strict: bool = False) -> None:
            if not isinstance(v, int | float) or not math.isfinite(v) or v < 0 or (strict and v == 0):
                raise InputError(f"{name} must be a {'positive' if strict else 'non-negative'} number")

        if self.k is not None:
            positive_int("k", self.k)
        positive_int("dwell", self.dwell)
        positive_int("n_cap", self.n_cap)
        positive_int("warmup", self.warmup)
        if self.warmup < 3:
            raise InputError("warmup must be at least 3 windows (noise needs differences)")
        non_negative("noise_floor", self.noise_floor)
        positive_int("max_regimes", self.max_regimes)
        non_negative("margin", self.margin)
        non_negative("radius", self.radius, strict=True)
        non_negative("alpha", self.alpha, strict=True)
        if self.alpha > 1:
            raise InputError("alpha must be in (0, 1]")
        non_negative("z", self.z, strict=True)
        non_negative("min_shift", self.min_shift)
        positive_int("span", self.span)
        if self.span < 8 * self.dwell:
            raise InputError(f"span must be at least 8 * dwell = {8 * self.dwell} windows")
        if self.trend_feature is not None and not isinstance(self.trend_feature, str):
            raise InputError("trend_feature must be a feature name or None")

    def _ensure(self) -> None:
        if hasattr(self, "_state"):
            return
        self._validate()
        self._fx = FeatureExtractor(lag=self.lag, features=self.features, units=self.units)
        names = self._fx.names
        self._trend_j = names.index(self.trend_feature) if self.trend_feature in names else -1
        self._params = self._param_array()
        self._state = _kernel.new_state(
            self.k_max, len(names), self.warmup, _BASE + 5 * self.dwell, 2 * self.span
        )

    def _param_array(self) -> np.ndarray:
        p = np.zeros(_kernel.N_PARAMS)
        p[_kernel.P_ALPHA] = self.alpha
        p[_kernel.P_RADIUS] = self.radius
        p[_kernel.P_MARGIN] = self.margin
        p[_kernel.P_DWELL] = self.dwell
        p[_kernel.P_N_CAP] = self.n_cap
        p[_kernel.P_SKIP] = _SKIP
        p[_kernel.P_FLOOR] = self.noise_floor
        p[_kernel.P_Z] = self.z
        p[_kernel.P_MIN_SHIFT] = self.min_shift
        p[_kernel.P_BASE] = _BASE
        p[_kernel.P_SIGMA_FLOOR] = _SIGMA_FLOOR
        p[_kernel.P_TREND_J] = self._trend_j
        p[_kernel.P_SPAN] = self.span
        p[_kernel.P_SETTLE_T] = _SETTLE_T
        p[_kernel.P_SETTLE_FRAC] = _SETTLE_FRAC
        p[_kernel.P_SETTLE_SHARE] = _SETTLE_SHARE
        p[_kernel.P_MOVE_T] = _MOVE_T
        p[_kernel.P_MOVE_MIN] = _MOVE_MIN
        p[_kernel.P_N_FOLLOW] = _N_FOLLOW
        return p

    @property
    def k_max(self) -> int:
        return self.k if self.k is not None else self.max_regimes

    @property
    def feature_names(self) -> tuple[str, ...]:
        self._ensure()
        return self._fx.names

    @property
    def n_seen(self) -> int:
        """Windows learnt so far."""
        self._ensure()
        return int(self._state["istate"][_kernel.T])

    @property
    def current(self) -> int | None:
        """The confirmed regime, ``None`` before the first window."""
        self._ensure()
        cur = int(self._state["istate"][_kernel.CUR])
        return None if cur < 0 else cur

    @property
    def regimes(self) -> list[Regime]:
        """Known regimes (ids in order of discovery) with centroids in feature units; a
        transition's centroid is the mean of its windows."""
        self._ensure()
        k = int(self._state["istate"][_kernel.K_ACTIVE])
        names = self._fx.names
        s = self._state
        return [
            Regime(
                id=i,
                centroid=tuple((s["means"][i] if s["moving"][i] > 0 else s["centroids"][i]).tolist()),
                features=names,
                n_windows=int(s["counts"][i]),
            )
            for i in range(k)
        ]

    @property
    def transitions(self) -> list[int]:
        """Ids of the regimes that are transitions (their trend feature kept moving)."""
        self._ensure()
        k = int(self._state["istate"][_kernel.K_ACTIVE])
        return [i for i in range(k) if self._state["moving"][i] > 0]

    def _run(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        s = self._state
        labels, online, changes, _ = _kernel.run(
            np.ascontiguousarray(x, dtype=np.float64),
            s["istate"],
            s["scale"],
            s["buf"],
            s["ewma"],
            s["noise"],
            s["noise_n"],
            s["late_sum"],
            s["anchor"],
            s["msum"],
            s["centroids"],
            s["counts"],
            s["moving"],
            s["founded"],
            s["means"],
            s["hist"],
            s["trend"],
            self._params,
        )
        return labels, online, changes

    # -- river API --------------------------------------------------------------------
    def learn_one(self, x: Mapping[str, float]) -> None:
        """Learn from one feature dict (names of :attr:`feature_names`, feature units)."""
        self._ensure()
        self._run(self._fx.vector(x)[None, :])

    def predict_one(self, x: Mapping[str, float]) -> int:
        """The nearest known regime of a feature dict, without learning (0 before any); a
        transition that is over is not a candidate (its centroid is where it stopped)."""
        self._ensure()
        v = self._fx.vector(x)
        k = int(self._state["istate"][_kernel.K_ACTIVE])
        if k == 0:
            return 0
        d = np.linalg.norm(self._state["centroids"][:k] - v, axis=1)
        over = (self._state["moving"][:k] > 0) & (np.arange(k) != self.current)
        d[over] = np.inf
        return int(np.argmin(d))

    # -- service API ------------------------------------------------------------------
    def update(self, window: WindowStats) -> RegimeChange | None:
        """Learn one window; return the change it confirms, if any."""
        self._ensure()
        x = self._fx.transform_row(window)
        t = self.n_seen
        _, _, changes = self._run(x[None, :])
        if len(changes) == 0:
            return None
        frm, to, at, _ = (int(v) for v in changes[-1])
        back = t - at
        return RegimeChange(
            from_id=None if frm < 0 else frm,
            to_id=to,
            at_window=window.index - back,
            at_time=window.start - back * window.length,
            confirmed_window=window.index,
            confirmed_time=window.start,
        )

    def detect(self, frame: WindowFrame, *, hindsight: bool = True) -> RegimeHistory:
        """Replay ``frame`` through the detector (learning as it goes, exactly as
        :meth:`update` window by window would) and return its regime history. With
        ``hindsight``, the end of a transition is re-dated with the windows that followed
        it (:mod:`regimetune.regimes.hindsight`); confirmations and online labels are
        those of :meth:`update` either way."""
        self._ensure()
        n = len(frame)
        if n == 0:
            raise InputError("the trace has no windows")
        if n < 2 and self.n_seen == 0:
            raise InputError("a single window cannot show a regime; feed single windows with update()")
        if self.k is not None and self.n_seen == 0 and self.k > n:
            raise InputError(f"k={self.k} regimes cannot be found in {n} windows")
        t0 = self.n_seen
        x = self._fx.transform(frame)
        labels, online, changes = self._run(x)
        if hindsight and self._trend_j >= 0:
            rate = self._fx.rate(x, self._fx.names[self._trend_j])
            redate_transition_ends(rate, labels, changes, set(self.transitions), t0, min_seg=self.dwell)
        return _history(frame, labels, online, changes, t0, self.regimes)

    # -- persistence ------------------------------------------------------------------
    def to_state(self) -> dict[str, Any]:
        """Everything learnt, as JSON-serialisable data with a ``format_version``."""
        self._ensure()
        return {
            "format_version": FORMAT_VERSION,
            "kind": "OnlineRegimeDetector",
            "params": self.get_params(),
            "extractor": self._fx.to_state(),
            "kernel": {k: v.tolist() for k, v in self._state.items()},
        }

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> OnlineRegimeDetector:
        """Rebuild a detector saved by :meth:`to_state`."""
        if not isinstance(state, Mapping) or state.get("kind") != "OnlineRegimeDetector":
            raise InputError("not a saved OnlineRegimeDetector state")
        version = state.get("format_version")
        if version not in (1, FORMAT_VERSION):
            raise InputError(
                f"detector state format {version!r} is not supported "
                f"(this version reads 1 and {FORMAT_VERSION})"
            )
        try:
            params = dict(state["params"])
            params["features"] = tuple(params["features"])
            det = cls(**params)
            det._ensure()
            det._fx = FeatureExtractor.from_state(state["extractor"])
            kernel = _upgrade_v1(det, state["kernel"]) if version == 1 else state["kernel"]
            fresh = det._state
            for name, arr in fresh.items():
                loaded = np.asarray(kernel[name], dtype=arr.dtype)
                if loaded.shape != arr.shape:
                    raise InputError(
                        f"detector state {name!r} has shape {loaded.shape}, expected {arr.shape}"
                    )
                fresh[name] = np.ascontiguousarray(loaded)
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, InputError):
                raise
            raise InputError(f"bad detector state: {exc}") from exc
        return det

    def save(self, path: str | Path) -> None:
        """Write the state as JSON (atomically: a temporary file, then a rename)."""
        p = Path(path)
        tmp = p.with_name(p.name + ".tmp")
        tmp.write_text(json.dumps(self.to_state()))
        tmp.replace(p)

    @classmethod
    def load(cls, path: str | Path) -> OnlineRegimeDetector:
        try:
            state = json.loads(Path(path).read_text())
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}: not a JSON detector state ({exc})") from exc
        return cls.from_state(state)


def _upgrade_v1(det: OnlineRegimeDetector, old: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Kernel arrays of a format-1 state (no change test, no transitions) in format 2: the
    regimes, centroids and warm-up carry over; the noise is measured on the warm-up; the
    history starts empty, so the change test waits until it has seen enough windows."""
    new = {k: v.copy() for k, v in det._state.items()}
    ist = np.asarray(old["istate"], dtype=np.int64)
    if ist.shape != (10,):
        raise InputError(f"detector state 'istate' has shape {ist.shape}, expected (10,)")
    new["istate"][:10] = ist
    new["istate"][_kernel.PREV] = -1
    new["istate"][_kernel.CUR_SINCE] = ist[_kernel.T]
    new["istate"][_kernel.M_ORIGIN] = ist[_kernel.T] + det.dwell
    if ist[_kernel.NOV_RUN] == 0:
        new["istate"][_kernel.NOV_START] = -1
    for name in ("scale", "buf", "ewma", "late_sum", "centroids", "counts"):
        new[name] = np.asarray(old[name], dtype=np.float64)
    new["means"] = new["centroids"].copy()
    if ist[_kernel.CUR] >= 0:
        new["anchor"] = new["centroids"][ist[_kernel.CUR]].copy()
    new["founded"][:] = ist[_kernel.T] - det.span - 1  # none of them is young
    if ist[_kernel.N_BUF] >= det.warmup:
        scale = np.empty_like(new["scale"])
        for c in range(int(ist[_kernel.K_ACTIVE])):
            _kernel._noise_scale(new["buf"], float(det.noise_floor), scale, new["noise"][c], _SIGMA_FLOOR)
    return new


def segments_of(
    labels: np.ndarray,
    frame: WindowFrame,
    centroids: Mapping[int, tuple[float, ...]] | None = None,
) -> list[RegimeSegment]:
    """Maximal runs of equal labels as segments, with mean rates as summary statistics."""
    n = len(labels)
    if n == 0:
        return []
    starts = np.flatnonzero(np.r_[True, labels[1:] != labels[:-1]])
    ends = np.r_[starts[1:], n]
    length = frame["length"].astype(np.float64)
    begin = frame["start"].astype(np.float64)
    idx = frame["index"]
    stats = {
        "mean_reads_per_s": frame.reads_per_s,
        "mean_writes_per_s": frame.writes_per_s,
        "mean_active_keys": frame["active_keys"].astype(np.float64),
        "mean_entropy": frame["entropy"].astype(np.float64),
    }
    sums = {k: np.add.reduceat(v, starts) / (ends - starts) for k, v in stats.items()}
    ks = frame["keyspace_size"]
    out = []
    for s_i, (a, b) in enumerate(zip(starts.tolist(), ends.tolist(), strict=True)):
        rid = int(labels[a])
        summary = {k: float(v[s_i]) for k, v in sums.items()}
        summary["keyspace_at_start"] = float(ks[a])
        summary["keyspace_at_end"] = float(ks[b - 1])
        out.append(
            RegimeSegment(
                regime_id=max(rid, 0),
                start_window=int(idx[a]),
                end_window=int(idx[b - 1]) + 1,
                start=float(begin[a]),
                end=float(begin[b - 1] + length[b - 1]),
                centroid=(centroids or {}).get(rid, ()),
                summary=summary,
            )
        )
    return out


def _history(
    frame: WindowFrame,
    labels: np.ndarray,
    online: np.ndarray,
    changes: np.ndarray,
    t0: int,
    regimes: list[Regime],
) -> RegimeHistory:
    idx0 = int(frame["index"][0])
    start0 = float(frame["start"][0])
    length0 = float(frame["length"][0])
    starts = frame["start"]

    def where(counter: int) -> tuple[int, float]:
        off = counter - t0
        if 0 <= off < len(frame):
            return idx0 + off, float(starts[off])
        return idx0 + off, start0 + off * length0

    out = []
    for frm, to, at, conf in changes.tolist():
        aw, at_t = where(at)
        cw, cf_t = where(conf)
        out.append(
            RegimeChange(
                from_id=None if frm < 0 else frm,
                to_id=to,
                at_window=aw,
                at_time=at_t,
                confirmed_window=cw,
                confirmed_time=cf_t,
            )
        )
    cents = {r.id: r.centroid for r in regimes}
    return RegimeHistory(
        labels=labels,
        segments=segments_of(labels, frame, cents),
        changes=out,
        regimes=regimes,
        online_labels=online,
    )


__all__ = ["FORMAT_VERSION", "OnlineRegimeDetector", "segments_of"]
