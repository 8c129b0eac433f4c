"""Online regime detection with stable ids: a change test with a noise model in front of an
online clustering of the segments it finds.

* **Features** of a trace window are log rates and counts (reads/s, writes/s, keyspace
  growth, active keys), the top-k share and the key entropy
  (:mod:`regimetune.regimes.features`); each comes with the variance its counts imply,
  so a window with 1 active key and one with 2 differ by noise, and an edge window that
  covers part of a window length is rated by the time it covers. A series (``--series``,
  :func:`detect_series`, :meth:`OnlineRegimeDetector.learn_one`) uses its own columns.
* **Change test**: online PELT over lines with Gaussian noise learnt from first
  differences, a change costing the BIC of one more segment
  (:mod:`regimetune.regimes._segmenter`). Every change is dated to the start of the
  segment the test found, and confirmed once that segment has held ``dwell_s``.
* **Regimes** are clusters of those segments with stable ids: a segment returns to a known
  regime only when its level is consistent with that regime's (a chi-square test), a new
  level founds a regime once it has held ``min_regime_s``, and an excursion that lasts as
  long without settling, or whose line has moved as long, is a *transition* (a decline).
  K is learnt, up to ``max_regimes``.
* **In hindsight** (a replay, not ``update``): a steady regime that was a transition's slow
  tail takes the transition's id, a step within the level's wander is merged, and a
  transition ends where its line turned level (:mod:`regimetune.regimes.hindsight`).

All parameters are in :class:`~regimetune.regimes.params.DetectorParams`, durations in
seconds. :meth:`OnlineRegimeDetector.update` is the per-window call of the service;
:meth:`OnlineRegimeDetector.detect` replays a whole frame through the same compiled loop.
The detector is a river :class:`~river.base.Clusterer`, so it composes in river pipelines.

>>> from regimetune.regimes.synthetic import parsplice_like_frame
>>> frame = parsplice_like_frame(n_windows=1000, seed=1)  # read as windows of 10 s
>>> history = OnlineRegimeDetector(window_s=10.0).detect(frame)
>>> [(s.regime_id, s.start_window) for s in history.segments]
[(0, 0), (1, 150), (2, 250), (3, 600)]
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
from river import base

from regimetune.models import (
    SERIES_STEP_S,
    InputError,
    Regime,
    RegimeChange,
    RegimeSegment,
    WindowFrame,
    WindowStats,
)
from regimetune.models.regimes import RegimeHistory
from regimetune.regimes import _segmenter
from regimetune.regimes.features import FeatureExtractor, SeriesInputs, series_inputs
from regimetune.regimes.hindsight import Reading, in_hindsight, merged_changes, start_drift
from regimetune.regimes.params import DetectorParams

#: Version of :meth:`OnlineRegimeDetector.to_state`'s format. Formats 1 and 2 were the
#: line-test kernel's (before the change test was a penalised likelihood); they cannot be
#: converted and are refused with a message that says what to do. Later formats load, with
#: the kernel state added since their version at its initial value (:data:`_ADDED_IN`).
FORMAT_VERSION = 11
#: Kernel state and the format that added it: format 4 the window held back (the dip test)
#: and the run of segments at one level, format 5 the line a transition left at a jump,
#: format 6 the noise's autocorrelation (and lag columns in the segment sums, which
#: earlier states load without: :func:`~regimetune.regimes._segmenter.widen_sums`),
#: format 7 the difference before the latest (the mean of the differences lags by two),
#: format 8 the sums of an excursion's ended segments (whether it came back is judged on
#: all of it), format 9 the level each regime was founded at (an earlier state's regimes
#: take the level they hold as it, see :data:`_FOUNDED_AS`), format 10 the least step each
#: feature has shown (an earlier state's is unknown, 0, and its noise floor as before),
#: format 11 the window at which the last boundary was committed (an earlier state's is 0:
#: its boundary has stood).
_ADDED_IN = (
    dict.fromkeys(("pending", "pend_y", "pend_v", "pend_off", "run_start", "run_stats"), 4)
    | dict.fromkeys(("exc_line", "last_line"), 5)
    | dict.fromkeys(("diff_last", "diff_mean", "diff_var", "diff_cov"), 6)
    | {"diff_prev": 7, "exc_stats": 8}
    | dict.fromkeys(("reg_origin", "reg_origin_n"), 9)
    | {"quantum": 10, "boundary_t": 11}
)
#: Kernel state added since a saved format that starts as a copy of another field.
_FOUNDED_AS = {"reg_origin": "reg_level", "reg_origin_n": "reg_n"}
_D = DetectorParams()


class OnlineRegimeDetector(base.Clusterer):
    """Detects workload regimes window by window (parameters: :class:`DetectorParams`).

    >>> det = OnlineRegimeDetector(min_regime_s=60.0, window_s=1.0)
    >>> for v in [0.0] * 80 + [5.0] * 80:
    ...     det.learn_one({"load": v})
    >>> det.current, det.predict_one({"load": 0.1}), det.predict_one({"load": 5.0})
    (1, 0, 1)
    """

    #: The columns :meth:`detect_series` read in log space (``()``: none), ``None`` before
    #: it has read a series; learnt, like the levels, and saved in the state.
    series_log_: tuple[int, ...] | None = None

    def __init__(
        self,
        regime_s: float = _D.regime_s,
        dwell_s: float = _D.dwell_s,
        min_regime_s: float = _D.min_regime_s,
        match_p: float = _D.match_p,
        noise_half_life_s: float = _D.noise_half_life_s,
        noise_clip: float = _D.noise_clip,
        noise_floor: float = _D.noise_floor,
        level_spread: float = _D.level_spread,
        drift_half_life_s: float = _D.drift_half_life_s,
        trend_block_s: float = _D.trend_block_s,
        growth_lag_s: float = _D.growth_lag_s,
        max_regimes: int = _D.max_regimes,
        window_s: float | None = _D.window_s,
        features: tuple[str, ...] = _D.features,
        noise_model: str = _D.noise_model,
        candidates: int = _D.candidates,
    ) -> None:
        self.regime_s = regime_s
        self.dwell_s = dwell_s
        self.min_regime_s = min_regime_s
        self.match_p = match_p
        self.noise_half_life_s = noise_half_life_s
        self.noise_clip = noise_clip
        self.noise_floor = noise_floor
        self.level_spread = level_spread
        self.drift_half_life_s = drift_half_life_s
        self.trend_block_s = trend_block_s
        self.growth_lag_s = growth_lag_s
        self.max_regimes = max_regimes
        self.window_s = window_s
        self.features = features
        self.noise_model = noise_model
        self.candidates = candidates

    @classmethod
    def from_params(cls, params: DetectorParams) -> OnlineRegimeDetector:
        return cls(**{k: getattr(params, k) for k in cls._param_names()})

    @staticmethod
    def _param_names() -> tuple[str, ...]:
        return tuple(DetectorParams.__dataclass_fields__)

    @property
    def params(self) -> DetectorParams:
        """The parameters, validated."""
        return DetectorParams(**{k: getattr(self, k) for k in self._param_names()})

    def get_params(self) -> dict[str, Any]:
        """Every parameter (those of :class:`DetectorParams`), JSON-serialisable."""
        return self.params.as_dict()

    @classmethod
    def _unit_test_params(cls) -> Any:
        yield {}
        yield {"min_regime_s": 60.0, "window_s": 1.0}

    # -- learnt state ------------------------------------------------------------------
    def _started(self) -> bool:
        return hasattr(self, "_state")

    def _start(self, *, window_s: float, names: tuple[str, ...] | None) -> None:
        """Fix the window length and the columns on the first data; nothing is learnt before."""
        p = self.params
        if names is None:  # trace windows
            self._fx: FeatureExtractor | None = FeatureExtractor(features=p.features)
            self.feature_names_ = self._fx.names
        else:
            self._fx = None
            self.feature_names_ = names
        self._fix_window(p.window_s or window_s)
        self._state = _segmenter.new_state(len(self.feature_names_), self._kp)

    def _fix_window(self, window_s: float) -> None:
        """Set the window length and what depends on it: the kernel's durations in windows
        and the feature extractor's growth lag (neither is state: both may change after
        the first window, whose length may be partial)."""
        self.window_s_ = float(window_s)
        self._kp = self.params.kernel(
            window_s=self.window_s_, n_features=len(self.feature_names_), series=self._fx is None
        )
        if self._fx is not None:
            self._fx.lag = self.params.growth_lag(self.window_s_)

    def _ensure(self, *, window_s: float, names: tuple[str, ...] | None) -> None:
        if not self._started():
            self._start(window_s=window_s, names=names)
        elif (names is None) != (self._fx is not None):
            kind = "trace windows" if self._fx is not None else "series rows"
            raise InputError(f"this detector learns {kind}; it cannot mix them with the other kind")

    @property
    def n_seen(self) -> int:
        """Windows learnt so far."""
        return int(self._state.t[0] + self._state.pending[0]) if self._started() else 0

    @property
    def current(self) -> int | None:
        """The regime in force, ``None`` before the first is founded."""
        if not self._started() or self._state.current[0] < 0:
            return None
        return int(self._state.current[0])

    @property
    def regimes(self) -> list[Regime]:
        """Known regimes (ids in order of discovery) with their levels as centroids."""
        if not self._started():
            return []
        s = self._state
        return [
            Regime(
                id=r,
                centroid=tuple(s.reg_level[r].tolist()),
                features=self.feature_names_,
                n_windows=int(s.reg_n[r]),
                transition=bool(s.reg_kind[r] == _segmenter.TRANSITION),
            )
            for r in range(int(s.n_regimes[0]))
        ]

    @property
    def noise_ar1(self) -> dict[str, float]:
        """Each feature's noise as the change test models it, its AR(1) coefficient: 0 for
        white noise, 1 for a random walk (a series that wanders is not cut at every turn)."""
        if not self._started():
            return {}
        phi = _segmenter.ar_coefficients(self._state, self._kp)
        return {name: float(v) for name, v in zip(self.feature_names_, phi, strict=True)}

    @property
    def transitions(self) -> list[int]:
        """Ids of the regimes that are transitions (they moved, never levelled off)."""
        if not self._started():
            return []
        s = self._state
        return [r for r in range(int(s.n_regimes[0])) if s.reg_kind[r] == _segmenter.TRANSITION]

    def _run(self, x: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return _segmenter.run_fields(
            tuple(self._state),
            tuple(self._kp),
            np.ascontiguousarray(x, dtype=np.float64),
            np.ascontiguousarray(v, dtype=np.float64),
        )

    def _hindsight(
        self, labels: np.ndarray, x: np.ndarray, changes: np.ndarray, t0: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """A replay's labels and changes read in hindsight: every pass of
        :mod:`regimetune.regimes.hindsight` (:func:`in_hindsight`), then, where the whole
        recording was one regime, a start in a drift, whose transition is entered in the
        kernel's table."""
        p = self.params
        block = p.windows(p.trend_block_s, self.window_s_)
        if block > len(labels):  # no block of the recording to read: hindsight is off
            return labels, changes
        white = _segmenter.ar_coefficients(self._state, self._kp) == 0.0  # least squares fits them
        reading = Reading(
            set(self.transitions), block, p.match_p, p.windows(p.min_regime_s, self.window_s_), white
        )
        after = in_hindsight(labels, x, reading)
        rows = merged_changes(changes, after, t0)
        k = int(self._state.n_regimes[0])
        if t0 > 0 or k >= self._kp.max_regimes:  # not the recording's start; no id left
            return after, rows
        drift = start_drift(after, x, **reading._asdict(), new_id=k)
        if drift[0] != k or not len(rows):  # (no row: no regime was ever founded)
            return after, rows
        self._found_transition(k, x[drift == k])  # so no later regime takes its id
        turn = int(np.argmax(drift != k))  # the whole recording was one run: rows (-1, r, 0, c)
        rows = np.asarray([(-1, k, 0, rows[0, 3]), (k, drift[turn], turn, len(drift) - 1)], dtype=rows.dtype)
        return drift, rows

    def _found_transition(self, k: int, x: np.ndarray) -> None:
        """Enter regime ``k``, a transition known only in hindsight over the windows ``x``,
        in the kernel's table."""
        s = self._state
        s.reg_level[k] = np.nanmean(x, axis=0)
        s.reg_n[k] = len(x)
        s.reg_kind[k] = _segmenter.TRANSITION
        s.n_regimes[0] = k + 1

    # -- river API ------------------------------------------------------------------------
    def learn_one(self, x: Mapping[str, float]) -> None:  # type: ignore[override]
        """Learn one observation of a series (its values are the features, in the order of
        the first one's keys; no count variance)."""
        names = self.feature_names_ if self._started() else tuple(x)
        self._ensure(window_s=self.window_s or 1.0, names=names)
        row = _vector(x, self.feature_names_)
        self._run(row[None, :], np.zeros((1, len(row))))

    def predict_one(self, x: Mapping[str, float]) -> int:  # type: ignore[override]
        """The steady regime whose level is nearest to ``x`` in noise units (0 before any),
        without learning."""
        if not self._started() or self._state.n_regimes[0] == 0:
            return 0
        s = self._state
        v = _vector(x, self.feature_names_) if self._fx is None else self._fx.vector(x)
        k = int(s.n_regimes[0])
        w = 1.0 / np.maximum(s.noise_var, 1e-12)
        d = (((s.reg_level[:k] - v) ** 2) * w).sum(axis=1)
        d[s.reg_kind[:k] != _segmenter.STEADY] = np.inf
        return int(np.argmin(d)) if np.isfinite(d).any() else int(s.current[0])

    # -- service API ---------------------------------------------------------------------
    def update(self, window: WindowStats) -> RegimeChange | None:
        """Learn one trace window; return the change it confirms, if any (the latest, when
        a transition and the level it led to are confirmed at once)."""
        self._ensure(window_s=window.length, names=None)
        assert self._fx is not None
        if self.n_seen == 1 and self.params.window_s is None and window.length > self.window_s_:
            self._fix_window(window.length)  # the first window covered part of one: take the second's
        x, v = self._fx.transform_row_with_variance(window)
        t = self.n_seen
        _, _, changes = self._run(x[None, :], v[None, :])
        if len(changes) == 0:
            return None
        frm, to, at, _ = (int(c) for c in changes[-1])
        back = t - at
        return RegimeChange(
            from_id=None if frm < 0 else frm,
            to_id=to,
            at_window=window.index - back,
            at_time=window.start - back * self.window_s_,
            confirmed_window=window.index,
            confirmed_time=window.start,
        )

    def detect(self, frame: WindowFrame) -> RegimeHistory:
        """Replay ``frame`` through the detector (learning as it goes, exactly as
        :meth:`update` window by window would) and return its regime history: its
        ``online_labels`` are what :meth:`update` knew, its labels and changes are read
        in hindsight over this frame (changes dated back, then the passes of
        :mod:`regimetune.regimes.hindsight`)."""
        if len(frame) == 0:
            raise InputError("the trace has no windows")
        self._ensure(window_s=float(np.median(frame["length"])), names=None)
        assert self._fx is not None
        t0 = self.n_seen
        x, v = self._fx.transform_with_variance(frame)
        labels, online, changes = self._run(x, v)
        labels, changes = self._hindsight(labels, x, changes, t0)
        return _history(frame, labels, online, changes, t0, self.regimes)

    def detect_array(
        self, values: np.ndarray, *, names: tuple[str, ...] | None = None, step_s: float | None = None
    ) -> RegimeHistory:
        """Replay the rows of a series (``(n,)`` or ``(n, d)``), one row a window of
        ``step_s`` seconds (default: ``window_s``, else :data:`SERIES_STEP_S`)."""
        x = np.asarray(values, dtype=np.float64)
        if x.ndim == 1:
            x = x[:, None]
        if x.ndim != 2 or len(x) == 0:
            raise InputError("a series is a non-empty (n,) or (n, d) array")
        if not np.all(np.isfinite(x)):
            rows = np.flatnonzero(~np.isfinite(x).all(axis=1))
            raise InputError(f"the series has non-finite values (first at row {int(rows[0])})")
        cols = names or tuple(f"x{j}" for j in range(x.shape[1]))
        step = step_s or self.window_s or SERIES_STEP_S
        self._ensure(window_s=step, names=cols)
        if len(cols) != len(self.feature_names_):
            raise InputError(f"the series has {len(cols)} columns, the detector {len(self.feature_names_)}")
        t0 = self.n_seen
        labels, online, changes = self._run(x, np.zeros_like(x))
        labels, changes = self._hindsight(labels, x, changes, t0)
        frame = _series_frame(len(x), t0, self.window_s_)
        stats = {f"mean_{name}": x[:, j] for j, name in enumerate(cols)}
        return _history(frame, labels, online, changes, t0, self.regimes, stats=stats)

    def detect_series(
        self,
        values: np.ndarray,
        *,
        names: tuple[str, ...] | None = None,
        step_s: float | None = None,
        counters: bool = True,
        log: Sequence[int] | Literal["auto"] = "auto",
    ) -> tuple[RegimeHistory, SeriesInputs]:
        """:meth:`detect_array` on a series as :func:`detect_series` reads it, and what was
        read. ``log="auto"`` needs the change rows of the series read raw: a copy of this
        detector replays it raw first; where that logs no column, the copy's reading is the
        reading and this detector takes what the copy learnt (one replay), else it replays
        the series in log space. The columns read in log space are learnt with the levels
        (:attr:`series_log_`): a detector that has read a series reads the next one in the
        same space under ``log="auto"``, and refuses another ``log``."""
        known = self.series_log_
        if known is not None:
            if not isinstance(log, str) and tuple(dict.fromkeys(int(j) for j in log)) != known:
                raise InputError(
                    f"this detector has read columns {list(known)} in log space and learnt its levels "
                    f"there; it cannot read columns {list(log)} so (pass log='auto' to go on as before)"
                )
            log = known
        if isinstance(log, str):
            raw = series_inputs(values, counters=counters, names=names)
            twin = copy.deepcopy(self)
            h = twin.detect_array(raw.values, names=names, step_s=step_s)
            changes = [c.at_window - self.n_seen for c in h.changes if c.from_id is not None]
            inputs = series_inputs(values, counters=counters, log=log, names=names, changes=changes)
            if not inputs.log:  # the raw reading is the reading: keep what the copy learnt
                vars(self).update(vars(twin))
                self.series_log_ = ()
                return h, inputs
        else:
            inputs = series_inputs(values, counters=counters, log=log, names=names)
        h = self.detect_array(inputs.values, names=names, step_s=step_s)
        self.series_log_ = inputs.log
        return h, inputs

    # -- persistence ---------------------------------------------------------------------
    def to_state(self) -> dict[str, Any]:
        """Everything learnt, as JSON-serialisable data with a ``format_version``."""
        out: dict[str, Any] = {
            "format_version": FORMAT_VERSION,
            "kind": "OnlineRegimeDetector",
            "params": self.get_params(),
        }
        if self._started():
            out["window_s"] = self.window_s_
            out["columns"] = None if self._fx is not None else list(self.feature_names_)
            out["extractor"] = None if self._fx is None else self._fx.to_state()
            out["kernel"] = {k: _json_list(v) for k, v in self._state._asdict().items()}
        if self.series_log_ is not None:
            out["series_log"] = list(self.series_log_)
        return out

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> OnlineRegimeDetector:
        """Rebuild a detector saved by :meth:`to_state`."""
        if not isinstance(state, Mapping) or state.get("kind") != "OnlineRegimeDetector":
            raise InputError("not a saved OnlineRegimeDetector state")
        version = state.get("format_version")
        if version in (1, 2):
            raise InputError(
                f"detector state format {version} was written by the line-test detector of regimetune "
                f"0.1 and cannot be converted to format {FORMAT_VERSION}: re-run `regimetune detect "
                "TRACE --state FILE` on the trace (or start the service without it) to learn a new one"
            )
        if not isinstance(version, int) or version not in range(3, FORMAT_VERSION + 1):
            raise InputError(
                f"detector state format {version!r} is not supported (this version reads {FORMAT_VERSION})"
            )
        try:
            det = cls.from_params(DetectorParams.from_dict(dict(state["params"])))
            if "kernel" not in state:
                return det
            cols = state["columns"]
            det._start(window_s=float(state["window_s"]), names=None if cols is None else tuple(cols))
            if cols is None:
                det._fx = FeatureExtractor.from_state(state["extractor"])
                det.feature_names_ = det._fx.names
            fresh = det._state._asdict()
            loaded = {}
            for name, arr in fresh.items():
                if _ADDED_IN.get(name, 0) > version:
                    loaded[name] = arr
                    continue
                a = np.asarray(state["kernel"][name], dtype=arr.dtype)
                if name == "cand_sums" and version < 6:
                    a = _segmenter.widen_sums(a)
                if a.shape != arr.shape:
                    raise InputError(f"detector state {name!r} has shape {a.shape}, expected {arr.shape}")
                loaded[name] = np.ascontiguousarray(a)
            for name, source in _FOUNDED_AS.items():
                if _ADDED_IN[name] > version:
                    loaded[name] = loaded[source].copy()
            det._state = _segmenter.KernelState(**loaded)
            if state.get("series_log") is not None:  # (states before the seventeenth sitting have none)
                det.series_log_ = tuple(int(j) for j in state["series_log"])
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, InputError):
                raise
            raise InputError(f"bad detector state: {exc!r}") from exc
        return det

    def save(self, path: str | Path) -> None:
        """Write the state as JSON (atomically: a temporary file, then a rename)."""
        p = Path(path)
        tmp = p.with_name(p.name + ".tmp")
        tmp.write_text(json.dumps(self.to_state(), allow_nan=False))
        tmp.replace(p)

    @classmethod
    def load(cls, path: str | Path) -> OnlineRegimeDetector:
        try:
            state = json.loads(Path(path).read_text())
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}: not a JSON detector state ({exc})") from exc
        return cls.from_state(state)


def detect_series(
    values: np.ndarray,
    *,
    names: tuple[str, ...] | None = None,
    step_s: float = SERIES_STEP_S,
    params: DetectorParams | None = None,
    counters: bool = True,
    log: Sequence[int] | Literal["auto"] = "auto",
) -> RegimeHistory:
    """Regimes of a numeric series (rows are steps, columns features): each row is one
    window of ``step_s`` seconds, so the detector's durations count rows (``min_regime_s``
    900 s = 18 rows at the default 50 s; pass a metric's scrape interval as ``step_s`` to
    keep the service's durations). With ``counters``, a column that never decreases is
    read as its increase per row (:func:`~regimetune.regimes.features.counter_columns`).
    With ``log="auto"`` (the default) each positive column whose noise grows with its level
    is read in log space (:func:`~regimetune.regimes.features.level_scaled_columns`, judged
    inside the segments of the series read raw); ``log=[j, ...]`` reads those columns in log
    space (rates, latencies; :func:`~regimetune.regimes.features.log_columns`) and
    ``log=()`` every column raw.

    >>> x = np.r_[np.zeros(100), np.full(100, 3.0)] + np.random.default_rng(0).normal(0, 0.3, 200)
    >>> [(c.from_id, c.to_id, c.at_window) for c in detect_series(x).changes]
    [(None, 0, 0), (0, 1, 100)]
    """
    det = OnlineRegimeDetector.from_params(params or DetectorParams())
    return det.detect_series(values, names=names, step_s=step_s, counters=counters, log=log)[0]


def compile_kernel() -> None:
    """Compile the detector's loop and the features' kernel now. numba caches them on disk
    beside the package, so a service (or a test's subprocess) started later loads them in
    well under a second instead of compiling on its first window (tens of CPU-seconds on a
    cold cache)."""
    OnlineRegimeDetector(window_s=SERIES_STEP_S).detect_array(np.linspace(0.0, 1.0, 40))
    from regimetune.regimes.synthetic import parsplice_like_frame

    frame = parsplice_like_frame(8)
    FeatureExtractor().transform(frame)  # the features' kernels: a frame's, and a window's
    FeatureExtractor().transform_row(next(iter(frame.records())))


def _json_list(a: np.ndarray) -> list[Any]:
    """An array as JSON data; a missing value (NaN, which JSON cannot carry) as ``null``,
    which ``np.asarray(..., dtype=float)`` reads back as NaN."""
    if a.dtype.kind == "f" and np.isnan(a).any():
        boxed = a.astype(object)
        boxed[np.isnan(a)] = None
        return list(boxed.tolist())
    return list(a.tolist())


def _vector(x: Mapping[str, float], names: tuple[str, ...]) -> np.ndarray:
    try:
        v = np.array([float(x[n]) for n in names])
    except KeyError as exc:
        raise InputError(f"feature {exc.args[0]!r} is missing") from exc
    except (TypeError, ValueError) as exc:
        raise InputError(f"features must be numbers: {exc}") from exc
    if not np.all(np.isfinite(v)):
        raise InputError("features must be finite (got NaN or infinity)")
    return v


def _series_frame(n: int, t0: int, step_s: float) -> WindowFrame:
    """Window columns (times, no counts) for ``n`` rows of a series, so its history has
    segments and times."""
    idx = np.arange(t0, t0 + n, dtype=np.int64)
    zeros = np.zeros(n, dtype=np.int64)
    cols = {
        "index": idx,
        "start": idx * step_s,
        "length": np.full(n, step_s),
        "reads": zeros,
        "writes": zeros,
        "active_keys": zeros,
        "keyspace_size": zeros,
        "topk_share": np.zeros(n),
        "entropy": np.zeros(n),
        "label": np.full(n, -1, dtype=np.int64),
        "exact": np.ones(n, dtype=bool),
    }
    return WindowFrame(columns=cols, bucket_load=np.zeros((n, 0)), bucket_bytes=np.zeros((n, 0)))


def segments_of(
    labels: np.ndarray,
    frame: WindowFrame,
    centroids: Mapping[int, tuple[float, ...]] | None = None,
    stats: Mapping[str, np.ndarray] | None = None,
    kinds: Mapping[int, str] | None = None,
) -> list[RegimeSegment]:
    """Maximal runs of equal labels as segments, with the mean of each of ``stats`` (by
    default the window rates) and the keyspace as summary statistics, and each regime's
    kind (``kinds``, by id; unknown ids ``""``)."""
    n = len(labels)
    if n == 0:
        return []
    starts = np.flatnonzero(np.r_[True, labels[1:] != labels[:-1]])
    ends = np.r_[starts[1:], n]
    length = frame["length"].astype(np.float64)
    begin = frame["start"].astype(np.float64)
    idx = frame["index"]
    windows = stats is None
    if stats is None:
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
        if windows:
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
                kind=(kinds or {}).get(rid, ""),
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
    *,
    stats: Mapping[str, np.ndarray] | None = None,
) -> RegimeHistory:
    idx0 = int(frame["index"][0])
    starts = frame["start"]
    step = float(np.median(frame["length"]))

    def where(counter: int) -> tuple[int, float]:
        off = counter - t0
        if 0 <= off < len(frame):
            return idx0 + off, float(starts[off])
        return idx0 + off, float(starts[0]) + off * step

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
    kinds = {r.id: r.kind for r in regimes}
    return RegimeHistory(
        labels=labels,
        segments=segments_of(labels, frame, cents, stats, kinds),
        changes=out,
        regimes=regimes,
        online_labels=online,
    )


__all__ = [
    "FORMAT_VERSION",
    "SERIES_STEP_S",
    "OnlineRegimeDetector",
    "compile_kernel",
    "detect_series",
    "segments_of",
]
