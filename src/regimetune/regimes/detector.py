"""Online regime detection with stable ids, dwell and hysteresis, and state that survives a
restart.

The detector is a streaming nearest-centroid clusterer over the features of
:mod:`regimetune.regimes.features`:

* a warm-up of ``warmup`` windows founds regime 0. Distances are in the fixed feature
  units by default; with ``noise_floor > 0`` the warm-up also measures each feature's noise
  (MAD of first differences, floored at ``noise_floor``) and distances are in noise units.
  Either way the scale is frozen, so it never drifts with the trace length;
* ``dwell`` smoothed points in a row farther than ``radius`` from every known centroid found
  a new regime at their mean (so K is learnt from the data, up to ``k`` or ``max_regimes``),
  unless that mean lies within ``radius`` of a known regime, which then returns;
* a known regime takes over only after ``dwell`` windows in a row nearer to it than to the
  current one by ``margin`` (a stabilization window with hysteresis, as Kubernetes' HPA);
* centroids follow the data (running mean with the step floored at ``1 / n_cap``) but keep
  their ids: ids are never renumbered, and a regime that returns is matched to its old
  centroid and gets its old id back.

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

FORMAT_VERSION = 1
#: Windows at the start of a stream whose features are incomplete (the first window has no
#: keyspace growth rate); they join the first regime once it is founded.
_SKIP = 1


class OnlineRegimeDetector:
    """Detects workload regimes window by window.

    ``k`` fixes the largest number of regimes (default: learnt from the data, at most
    ``max_regimes``); ``dwell`` is the stabilization window in windows; ``margin`` the
    hysteresis and ``radius`` the distance from every known regime at which a point is
    novel, both in feature units (noise units with ``noise_floor > 0``); ``alpha`` the EWMA smoothing weight of a new window;
    ``n_cap`` floors the centroid learning rate at ``1 / n_cap`` so centroids follow slow
    drift; ``warmup`` windows measure the noise, floored at ``noise_floor`` feature units;
    ``lag`` and ``features`` configure the features.
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

    def _ensure(self) -> None:
        if hasattr(self, "_state"):
            return
        self._validate()
        self._fx = FeatureExtractor(lag=self.lag, features=self.features, units=self.units)
        self._state = _kernel.new_state(self.k_max, len(self._fx.names), self.warmup)

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
        """Known regimes (ids in order of discovery) with centroids in feature units."""
        self._ensure()
        k = int(self._state["istate"][_kernel.K_ACTIVE])
        names = self._fx.names
        return [
            Regime(
                id=i,
                centroid=tuple(self._state["centroids"][i].tolist()),
                features=names,
                n_windows=int(self._state["counts"][i]),
            )
            for i in range(k)
        ]

    def _run(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        s = self._state
        labels, online, changes, _ = _kernel.run(
            np.ascontiguousarray(x, dtype=np.float64),
            s["istate"],
            s["scale"],
            s["buf"],
            s["ewma"],
            s["nov_sum"],
            s["late_sum"],
            s["centroids"],
            s["counts"],
            float(self.alpha),
            float(self.radius),
            float(self.margin),
            int(self.dwell),
            float(self.n_cap),
            _SKIP,
            float(self.noise_floor),
        )
        return labels, online, changes

    # -- river API --------------------------------------------------------------------
    def learn_one(self, x: Mapping[str, float]) -> None:
        """Learn from one feature dict (names of :attr:`feature_names`, feature units)."""
        self._ensure()
        self._run(self._fx.vector(x)[None, :])

    def predict_one(self, x: Mapping[str, float]) -> int:
        """The nearest known regime of a feature dict, without learning (0 before any)."""
        self._ensure()
        v = self._fx.vector(x)
        k = int(self._state["istate"][_kernel.K_ACTIVE])
        if k == 0:
            return 0
        d = np.linalg.norm(self._state["centroids"][:k] - v, axis=1)
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

    def detect(self, frame: WindowFrame) -> RegimeHistory:
        """Replay ``frame`` through the detector (learning as it goes, exactly as
        :meth:`update` window by window would) and return its regime history."""
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
        if state.get("format_version") != FORMAT_VERSION:
            raise InputError(
                f"detector state format {state.get('format_version')!r} is not supported "
                f"(this version reads {FORMAT_VERSION})"
            )
        try:
            params = dict(state["params"])
            params["features"] = tuple(params["features"])
            det = cls(**params)
            det._ensure()
            det._fx = FeatureExtractor.from_state(state["extractor"])
            fresh = det._state
            for name, arr in fresh.items():
                loaded = np.asarray(state["kernel"][name], dtype=arr.dtype)
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
