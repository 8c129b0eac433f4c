"""Online regime detection with stable ids.

**The model.** The workload is read at one time scale, ``block_s`` seconds (default 60):
windows are pooled into blocks on the clock's grid (:mod:`regimetune.regimes.blocks`), so a
trace gives the same blocks, hence the same regimes, at any window length that divides the
block; the window length only changes how soon a block is complete. Each block's features
(log rates by default, in fixed units: :mod:`regimetune.regimes.features`) pass a running
median of three blocks (a one-block burst, a stalled worker, is no change; a block is read
one block late).

Between changes, every feature follows a line; blocks scatter about it with variance
``v = noise + wander^2``: the block-to-block noise learnt from the blocks themselves
(second differences, :func:`~regimetune.regimes.changes.block_noise`) and the wander a
level shows without being a change. The **change test** is the least-cost partition into
such lines, a change costing the BIC of one more line per feature
(:mod:`regimetune.regimes.changes`). The **regime layer** turns its segments into regimes
(:mod:`regimetune.regimes.levels`): a segment lasting ``min_regime_s`` is a *level* unless
its line moves faster than ``drift_per_h`` (a *transition*); segments joined without a
step of ``min_step`` (significant at ``match_p``) are one regime; shorter segments are
bursts of the regime around them; a level the trace returns to takes its known id.

**Online** (:meth:`OnlineRegimeDetector.update`, the service): the partition is kept up to
date block by block; its older segments are frozen into the regime layer, the last two are
read as they stand, and the regime in force is the regime layer's last. A change is known
once the new regime's segment has lasted ``min_regime_s`` (a return to a known level, or a
transition, likewise) and dated to the block where it began.

**Replay** (:meth:`OnlineRegimeDetector.detect`, a recording): the same model in one pass
over the whole recording: the partition of all its blocks, with the noise learnt from all
of them, read by the same regime layer, starting from what the detector knew before. Its
``online_labels`` are what ``update`` knew window by window.

>>> from regimetune.regimes.synthetic import parsplice_like_frame
>>> frame = parsplice_like_frame(n_windows=1440, seed=1, window_s=10.0)  # 4 hours
>>> history = OnlineRegimeDetector().detect(frame)
>>> [(s.regime_id, s.kind, s.start_window) for s in history.segments]
[(0, 'level', 0), (1, 'transition', 216), (2, 'level', 360), (3, 'level', 864)]
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

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
from regimetune.regimes.blocks import Block, BlockPooler, median3
from regimetune.regimes.changes import Partition, block_noise
from regimetune.regimes.features import LOG1P_FEATURES, UNITS, FeatureExtractor, SeriesInputs, series_inputs
from regimetune.regimes.levels import TRANSITION, Piece, RegimeLayer, Rules
from regimetune.regimes.params import DetectorParams

#: Version of :meth:`OnlineRegimeDetector.to_state`'s format. Formats 1-12 were written by
#: earlier detectors (a per-window kernel; series filtered and read in a learnt log space);
#: they cannot be converted and are refused with a message that says what to do.
FORMAT_VERSION = 13
#: Blocks of noise history kept (a day of 60-s blocks): the noise is learnt from these.
NOISE_BLOCKS = 1440
#: How far (in log) the variances move before the change test's table is worked out again.
_REREAD = 0.25
#: Variance below which no feature is read (a series of exact repeats is not infinitely precise).
_FLOOR = 1e-10

_D = DetectorParams()


class OnlineRegimeDetector(base.Clusterer):
    """Detects workload regimes window by window (parameters: :class:`DetectorParams`).

    >>> det = OnlineRegimeDetector(min_regime_s=600.0)
    >>> for v in [0.0] * 30 + [5.0] * 30:
    ...     det.learn_one({"load": v + 0.01 * (len(str(v)) % 2)})
    >>> det.current, det.predict_one({"load": 0.1}), det.predict_one({"load": 5.0})
    (1, 0, 1)
    """

    def __init__(
        self,
        block_s: float = _D.block_s,
        regime_s: float = _D.regime_s,
        min_regime_s: float = _D.min_regime_s,
        min_step: float = _D.min_step,
        min_count_step: float = _D.min_count_step,
        wander: float = _D.wander,
        drift_per_h: float = _D.drift_per_h,
        match_p: float = _D.match_p,
        max_regimes: int = _D.max_regimes,
        window_s: float | None = _D.window_s,
        features: tuple[str, ...] = _D.features,
    ) -> None:
        self.block_s = block_s
        self.regime_s = regime_s
        self.min_regime_s = min_regime_s
        self.min_step = min_step
        self.min_count_step = min_count_step
        self.wander = wander
        self.drift_per_h = drift_per_h
        self.match_p = match_p
        self.max_regimes = max_regimes
        self.window_s = window_s
        self.features = features

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
        yield {"min_regime_s": 300.0, "window_s": 1.0}

    # -- learnt state ------------------------------------------------------------------
    def _started(self) -> bool:
        return hasattr(self, "_part")

    def _start(self, *, window_s: float, names: tuple[str, ...] | None) -> None:
        """Fix the columns on the first data; nothing is learnt before."""
        p = self._p = self.params
        if names is None:  # trace windows: lag 1, so the keyspace growth pools exactly
            self._fx: FeatureExtractor | None = FeatureExtractor(lag=1, features=p.features)
            self.feature_names_ = self._fx.names
            units = tuple(UNITS[n] for n in self.feature_names_)
            log1p = tuple(n in LOG1P_FEATURES for n in self.feature_names_)
            growth = self.feature_names_.index("log_growth") if "log_growth" in self.feature_names_ else None
            self._pool: BlockPooler | None = BlockPooler(
                log1p=log1p, units=units, block_s=p.block_s, growth=growth
            )
        else:
            self._fx = None
            self._pool = None
            self.feature_names_ = names
        self.window_s_ = float(p.window_s or window_s)
        d = len(self.feature_names_)
        self._part = self._partition()
        self._rules = self._layer_rules()
        self._layer = RegimeLayer()
        self._raw: list[Block] = []  # the last two blocks before the median (one is waiting)
        self._noise: deque[list[float]] = deque(maxlen=NOISE_BLOCKS)  # filtered blocks
        self._read_with = np.ones(d)  # the variances the change test's table was worked out with
        self._blocks = 0  # blocks learnt
        self._seen = 0  # windows (or rows) learnt
        self._dates: dict[int, tuple[int, float]] = {}  # block counter -> its first window
        self._current = -1
        self._since = -1  # block counter where the regime in force began
        self._absorbed: dict[int, int] = {}  # blocks learnt while each regime was in force
        self._changes: list[tuple[int, int, int, int]] = []  # (from, to, at block, learnt block)

    def _ensure(self, *, window_s: float, names: tuple[str, ...] | None) -> None:
        if not self._started():
            self._start(window_s=window_s, names=names)
        elif (names is None) != (self._fx is not None):
            kind = "trace windows" if self._fx is not None else "series rows"
            raise InputError(f"this detector learns {kind}; it cannot mix them with the other kind")

    @property
    def _series(self) -> bool:
        return self._fx is None

    @property
    def _block_s(self) -> float:
        """Seconds a block stands for: ``block_s``, or a series' row."""
        return self.window_s_ if self._series else self._p.block_s

    def _partition(self, origin: int = 0) -> Partition:
        """The change test: lines, a change costing the BIC of one more line per feature over
        a typical regime's blocks."""
        p, d = self._p, len(self.feature_names_)
        return Partition(d=d, penalty=p.penalty(d, regime_blocks=p.regime_s / self._block_s), origin=origin)

    def _layer_rules(self) -> Rules:
        p = self._p
        if self._series:  # a series' row is no block of known length: every cut is a change
            return Rules(1, 0.0, 0.0, p.z, p.max_regimes, join=False)
        return Rules(
            p.blocks(p.min_regime_s), p.steps(), p.drift_per_h * p.block_s / 3600.0, p.z, p.max_regimes
        )

    def _rules_at(self, var: np.ndarray) -> Rules:
        """The regime layer's rules; a series' least step, having no unit, is its columns'
        standard deviation."""
        return self._rules._replace(min_step=np.sqrt(var)) if self._series else self._rules

    def _variance(self, rows: np.ndarray | None = None) -> np.ndarray:
        """Each feature's variance about a segment's line, from ``rows`` (default: the
        blocks kept): for trace features the noise learnt from the blocks plus the wander's
        square; a series' noise nobody vouches for, so its columns are read on their
        variance over those rows (the scale a standardised series is read on)."""
        y = np.asarray(self._noise if rows is None else rows, dtype=np.float64).reshape(
            -1, len(self.feature_names_)
        )
        if self._series:
            return np.maximum(y.var(axis=0) if len(y) > 1 else np.ones(y.shape[1]), _FLOOR)
        return np.maximum(block_noise(y) + self._p.wander**2, _FLOOR)

    @property
    def n_seen(self) -> int:
        """Windows (or series rows) learnt so far."""
        return self._seen if self._started() else 0

    @property
    def current(self) -> int | None:
        """The regime in force, ``None`` before the first is founded."""
        return None if not self._started() or self._current < 0 else self._current

    @property
    def regimes(self) -> list[Regime]:
        """Known regimes (ids in order of discovery) with their levels as centroids, and the
        windows each absorbed while in force."""
        if not self._started():
            return []
        windows = {r: round(n * self._block_s / self.window_s_) for r, n in self._absorbed.items()}
        return self._regimes_of(self._layer, windows)

    def _regimes_of(self, layer: RegimeLayer, windows: Mapping[int, int]) -> list[Regime]:
        """The regimes ``layer`` knows, each with its centroid, kind and ``windows``."""
        return [
            Regime(
                id=r,
                centroid=layer.centroids.get(r, tuple(0.0 for _ in self.feature_names_)),
                features=self.feature_names_,
                n_windows=windows.get(r, 0),
                transition=kind == TRANSITION,
            )
            for r, kind in sorted(layer.kinds.items())
        ]

    @property
    def noise_sd(self) -> dict[str, float]:
        """Each feature's block-to-block noise as learnt (a standard deviation, without the
        wander)."""
        if not self._started():
            return {}
        sd = np.sqrt(
            block_noise(np.asarray(self._noise, dtype=np.float64).reshape(-1, len(self.feature_names_)))
        )
        return {name: float(v) for name, v in zip(self.feature_names_, sd, strict=True)}

    @property
    def transitions(self) -> list[int]:
        """Ids of the regimes that are transitions (they moved, never levelled off)."""
        return [r.id for r in self.regimes if r.transition]

    # -- the online step ----------------------------------------------------------------
    def _learn_block(self, b: Block) -> None:
        """A complete block: the median waits for the next; the one before it is learnt (a
        value missing from it, the first block's keyspace growth, taken from this one). A
        series' row is learnt as it is: it has no bursts to filter (every cut is a change)."""
        if self._series:
            self._learn_filtered(b.values, b)
            return
        for r in self._raw:
            missing = np.isnan(r.values)
            if missing.any():
                r.values[missing] = b.values[missing]
        self._raw.append(b)
        if len(self._raw) < 2:
            return
        if len(self._raw) == 2:
            prev2, prev, new = None, self._raw[0], self._raw[1]
            values = self._raw[0].values
        else:
            prev2, prev, new = self._raw[0], self._raw[1], self._raw[2]
            values = median3(prev2.values, prev.values, new.values)
            self._raw.pop(0)
        self._learn_filtered(values, prev)

    def _learn_filtered(self, values: np.ndarray, b: Block) -> None:
        k = self._blocks
        self._blocks += 1
        self._dates[k] = (b.first_window, b.first_start)
        self._noise.append([float(v) for v in values])
        var = self._variance()
        if np.any(np.abs(np.log(var / self._read_with)) > _REREAD):
            self._part.reread(1.0 / var)
            self._read_with = var
        self._part.push(values, 1.0 / var)
        rules = self._rules_at(var)
        segs = self._part.segments()
        if len(segs) > 2:  # freeze all but the last two into the regime layer
            self._commit(segs[:-2], segs[-2][0], var, rules)
            segs = segs[-2:]
        now = self._layer.copy()
        for s, t in segs:
            now.feed(self._piece(s, t, var, rules), rules)
        now.finish(rules, growing=True)
        start, _, rid = now.runs[-1] if now.runs else (0, 0, -1)
        if rid != self._current:  # a new regime in force: what it stands on is committed
            self._commit(segs, segs[-1][0], var, rules)
            self._layer.finish(rules, growing=True)
            start, _, rid = self._layer.runs[-1]
            self._changes.append((self._current, rid, start, k))
            self._current, self._since = rid, start
        if self._current >= 0:
            self._absorbed[self._current] = self._absorbed.get(self._current, 0) + 1
        keep = min(self._part.origin, self._since, *(q.start for q in self._layer.held), k)
        for old in [c for c in self._dates if c < keep]:
            del self._dates[old]

    def _commit(self, segs: list[tuple[int, int]], cut: int, var: np.ndarray, rules: Rules) -> None:
        """Feed ``segs`` to the regime layer for good and fix the partition's cut at ``cut``."""
        for s, t in segs:
            self._layer.feed(self._piece(s, t, var, rules), rules)
        self._part.freeze(cut, 1.0 / var)
        self._layer.runs = self._layer.runs[-1:]

    def _piece(self, s: int, t: int, var: np.ndarray, rules: Rules) -> Piece:
        o = self._part.origin
        return Piece.of(np.asarray(self._part.rows[s - o : t - o]), s, var, rules)

    # -- river API ------------------------------------------------------------------------
    def learn_one(self, x: Mapping[str, float]) -> None:  # type: ignore[override]
        """Learn one observation of a series (one row a block; its values are the features,
        in the order of the first one's keys)."""
        names = self.feature_names_ if self._started() else tuple(x)
        self._ensure(window_s=self.window_s or 1.0, names=names)
        row = _vector(x, self.feature_names_)
        self._changes = []
        self._learn_block(Block(self._seen, row, self._seen, float(self._seen)))
        self._seen += 1

    def predict_one(self, x: Mapping[str, float]) -> int:  # type: ignore[override]
        """The level regime whose level is nearest to ``x`` in noise units (0 before any),
        without learning."""
        if not self._started() or not self._layer.levels:
            return 0 if not self._started() or self._current < 0 else self._current
        v = _vector(x, self.feature_names_) if self._fx is None else self._fx.vector(x)
        w = 1.0 / self._variance()
        ids = list(self._layer.levels)
        d = [float((((np.asarray(self._layer.levels[r]) - v) ** 2) * w).sum()) for r in ids]
        return ids[int(np.argmin(d))]

    # -- service API ---------------------------------------------------------------------
    def update(self, window: WindowStats) -> RegimeChange | None:
        """Learn one trace window; return the change it confirms, if any (the latest)."""
        self._ensure(window_s=window.length, names=None)
        assert self._fx is not None and self._pool is not None
        x = self._fx.transform_row(window)
        self._changes = []
        for b in self._pool.add(window.index, window.start, window.length, x, window.keyspace_size):
            self._learn_block(b)
        self._seen += 1
        if not self._changes:
            return None
        frm, to, at, _ = self._changes[-1]
        at_window, at_time = self._dates.get(at, (window.index, window.start))
        return RegimeChange(
            from_id=None if frm < 0 else frm,
            to_id=to,
            at_window=min(at_window, window.index),
            at_time=min(at_time, window.start),
            confirmed_window=window.index,
            confirmed_time=window.start,
        )

    def detect(self, frame: WindowFrame) -> RegimeHistory:
        """Replay ``frame`` (learning as :meth:`update` window by window would) and return
        its regime history: ``online_labels`` are what :meth:`update` knew; ``labels`` and
        the segments are the replay's (the model over the whole frame); each change is
        dated where the replay puts it and confirmed where the online pass knew it (at the
        frame's last window where it was known only in hindsight)."""
        if len(frame) == 0:
            raise InputError("the trace has no windows")
        self._ensure(window_s=float(np.median(frame["length"])), names=None)
        assert self._fx is not None and self._pool is not None
        x = self._fx.transform(frame)
        idx, start = frame["index"], frame["start"].astype(np.float64)
        arrivals = self._pool.add_frame(
            idx, start, frame["length"].astype(np.float64), x, frame["keyspace_size"].astype(np.float64)
        )
        blocks, online, confirmed, before, first = self._learn_all(arrivals, idx)
        blocks += self._pool.flush()  # the recording's end: its partial block counts
        per_block, layer = self._replay(blocks, before, first)
        where = {b.clock: j for j, b in enumerate(blocks)}
        clock = np.floor(start / self._p.block_s).astype(np.int64)
        labels = per_block[[where[int(c)] for c in clock]]
        return self._history(frame, labels, online, confirmed, before.current_id, layer)

    def _learn_all(
        self, arrivals: list[tuple[int, Block]], idx: np.ndarray
    ) -> tuple[list[Block], np.ndarray, dict[int, list[int]], RegimeLayer, int]:
        """Learn the blocks ``arrivals`` complete (each with the position of the window or
        row whose arrival completed it) as :meth:`update` would, window by window. Returns
        the blocks, the regime in force after each window, the windows each regime's change
        was known at, the regime layer as it was before, and the first block's counter."""
        before = self._layer.copy()
        first = self._blocks + (1 if self._raw else 0)  # the counter of the next block completed
        online = np.empty(len(idx), dtype=np.int64)
        confirmed: dict[int, list[int]] = {}
        done = 0  # windows whose regime in force is written
        for i, b in arrivals:
            online[done:i] = self._current
            done = i
            self._changes = []
            self._learn_block(b)
            for _, to, _at, _k in self._changes:
                confirmed.setdefault(to, []).append(int(idx[i]))
        online[done:] = self._current
        self._seen += len(idx)
        return [b for _, b in arrivals], online, confirmed, before, first

    def _replay(self, blocks: list[Block], before: RegimeLayer, first: int) -> tuple[np.ndarray, RegimeLayer]:
        """The regime of each of ``blocks`` (the frame's, in order; at least one) by the model
        over all of them, from the regime layer as it was before the frame, and that layer
        after them."""
        raw = _filled(np.stack([b.values for b in blocks]))
        y = raw.copy()
        if len(y) >= 3 and not self._series:
            y[1:-1] = median3(raw[:-2], raw[1:-1], raw[2:])
        var = self._variance(y)
        part = self._partition(origin=first)
        for row in y:
            part.push(row, 1.0 / var)
        rules = self._rules_at(var)
        layer = before.copy()
        layer.runs = []
        for s, t in part.segments():
            layer.feed(Piece.of(y[s - first : t - first], s, var, rules), rules)
        layer.finish(rules)
        out = np.full(len(y), -1, dtype=np.int64)  # -1: before the first regime
        for s, t, rid in layer.runs:
            out[max(s - first, 0) : t - first] = rid
        return out, layer

    def detect_array(
        self, values: np.ndarray, *, names: tuple[str, ...] | None = None, step_s: float | None = None
    ) -> RegimeHistory:
        """Replay the rows of a series (``(n,)`` or ``(n, d)``), one row a block of
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
        t0 = self._seen
        idx = np.arange(t0, t0 + len(x))
        arrivals = [(i, Block(t0 + i, row, t0 + i, float(t0 + i))) for i, row in enumerate(x)]
        blocks, online, confirmed, before, first = self._learn_all(arrivals, idx)
        labels, layer = self._replay(blocks, before, first)
        frame = _series_frame(len(x), t0, self.window_s_)
        stats = {f"mean_{name}": x[:, j] for j, name in enumerate(cols)}
        return self._history(frame, labels, online, confirmed, before.current_id, layer, stats=stats)

    def _history(
        self,
        frame: WindowFrame,
        labels: np.ndarray,
        online: np.ndarray,
        confirmed: dict[int, list[int]],
        before: int,
        layer: RegimeLayer,
        *,
        stats: Mapping[str, np.ndarray] | None = None,
    ) -> RegimeHistory:
        """The history of a replayed frame: its changes where ``labels`` change (and at its
        start, where its first regime is not the one in force ``before`` it), each confirmed
        at the first window the online pass knew its regime from, else at the last; the
        regimes of the replay's ``layer``."""
        idx = frame["index"]
        starts = frame["start"].astype(np.float64)
        last = len(frame) - 1
        changes = []
        for i in np.r_[0, np.flatnonzero(labels[1:] != labels[:-1]) + 1].tolist():
            frm = int(labels[i - 1]) if i > 0 else before
            to = int(labels[i])
            if frm == to:
                continue
            known = [w for w in confirmed.get(to, []) if w >= int(idx[i])]
            c = int(np.searchsorted(idx, min(known))) if known else last
            changes.append(
                RegimeChange(
                    from_id=None if frm < 0 else frm,
                    to_id=to,
                    at_window=int(idx[i]),
                    at_time=float(starts[i]),
                    confirmed_window=int(idx[c]),
                    confirmed_time=float(starts[c]),
                )
            )
        ids, counts = np.unique(labels[labels >= 0], return_counts=True)
        regimes = self._regimes_of(layer, dict(zip(ids.tolist(), counts.tolist(), strict=True)))
        cents = {r.id: r.centroid for r in regimes}
        return RegimeHistory(
            labels=labels,
            segments=segments_of(labels, frame, cents, stats, dict(layer.kinds)),
            changes=changes,
            regimes=regimes,
            online_labels=online,
        )

    def detect_series(
        self,
        values: np.ndarray,
        *,
        names: tuple[str, ...] | None = None,
        step_s: float | None = None,
        counters: bool = True,
        log: Sequence[int] = (),
    ) -> tuple[RegimeHistory, SeriesInputs]:
        """:meth:`detect_array` on a series as :func:`detect_series` reads it, and what was
        read."""
        inputs = series_inputs(values, counters=counters, log=log, names=names)
        return self.detect_array(inputs.values, names=names, step_s=step_s), inputs

    # -- persistence ---------------------------------------------------------------------
    def to_state(self) -> dict[str, Any]:
        """Everything learnt, as JSON-serialisable data with a ``format_version``."""
        out: dict[str, Any] = {
            "format_version": FORMAT_VERSION,
            "kind": "OnlineRegimeDetector",
            "params": self.get_params(),
        }
        if self._started():
            out["learnt"] = {
                "window_s": self.window_s_,
                "columns": None if self._fx is not None else list(self.feature_names_),
                "extractor": None if self._fx is None else self._fx.to_state(),
                "pool": None if self._pool is None else self._pool.to_state(),
                "raw": [[b.clock, _json_list(b.values), b.first_window, b.first_start] for b in self._raw],
                "noise": list(self._noise),
                "read_with": self._read_with.tolist(),
                "partition": self._part.to_state(),
                "layer": self._layer.to_state(),
                "blocks": self._blocks,
                "seen": self._seen,
                "dates": [[k, w, s] for k, (w, s) in sorted(self._dates.items())],
                "current": self._current,
                "since": self._since,
                "absorbed": {str(r): n for r, n in self._absorbed.items()},
            }
        return out

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> OnlineRegimeDetector:
        """Rebuild a detector saved by :meth:`to_state`."""
        if not isinstance(state, Mapping) or state.get("kind") != "OnlineRegimeDetector":
            raise InputError("not a saved OnlineRegimeDetector state")
        version = state.get("format_version")
        if isinstance(version, int) and 1 <= version < FORMAT_VERSION:
            raise InputError(
                f"detector state format {version} was written by an earlier detector of regimetune and "
                f"cannot be converted to format {FORMAT_VERSION}: re-run `regimetune detect TRACE --state "
                "FILE` on the trace (or start the service without it) to learn a new one"
            )
        if version != FORMAT_VERSION:
            raise InputError(
                f"detector state format {version!r} is not supported (this version reads {FORMAT_VERSION})"
            )
        try:
            det = cls.from_params(DetectorParams.from_dict(dict(state["params"])))
            s = state.get("learnt")
            if s is None:
                return det
            cols = s["columns"]
            det._start(window_s=float(s["window_s"]), names=None if cols is None else tuple(cols))
            if cols is None:
                assert det._pool is not None
                det._fx = FeatureExtractor.from_state(s["extractor"])
                det._pool.load(s["pool"])
            det._raw = [Block(int(c), _floats(v), int(w), float(t)) for c, v, w, t in s["raw"]]
            det._noise.extend([float(v) for v in row] for row in s["noise"])
            det._read_with = np.asarray(s["read_with"], dtype=np.float64)
            det._part = Partition.from_state(det._part.d, det._part.penalty, det._part.lines, s["partition"])
            det._layer = RegimeLayer.from_state(s["layer"])
            det._blocks, det._seen = int(s["blocks"]), int(s["seen"])
            det._dates = {int(k): (int(w), float(t)) for k, w, t in s["dates"]}
            det._current, det._since = int(s["current"]), int(s["since"])
            det._absorbed = {int(r): int(n) for r, n in s["absorbed"].items()}
        except (KeyError, TypeError, ValueError, AssertionError) as exc:
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
    log: Sequence[int] = (),
) -> RegimeHistory:
    """Regimes of a numeric series (rows are steps, columns features): each row is one
    block. With ``counters``, a column that never decreases is read as its increase per row
    (:func:`~regimetune.regimes.features.counter_columns`); ``log=[j, ...]`` reads those
    columns in log space (a rate, a latency, a price: noise that grows with the level), the
    others raw. A series' columns have no known unit: its steps and drifts count where they
    are significant (``min_step`` and ``wander`` are for trace features).

    >>> x = np.r_[np.zeros(100), np.full(100, 3.0)] + np.random.default_rng(0).normal(0, 0.3, 200)
    >>> [(c.from_id, c.to_id, c.at_window) for c in detect_series(x).changes]
    [(None, 0, 0), (0, 1, 100)]
    """
    det = OnlineRegimeDetector.from_params(params or DetectorParams())
    return det.detect_series(values, names=names, step_s=step_s, counters=counters, log=log)[0]


def compile_kernel() -> None:
    """Compile the features' numba kernels now (they are cached beside the package), so a
    service started later reads its first window without compiling."""
    from regimetune.regimes.synthetic import parsplice_like_frame

    frame = parsplice_like_frame(8)
    FeatureExtractor().transform(frame)  # the features' kernels: a frame's, and a window's
    FeatureExtractor().transform_row(next(iter(frame.records())))


def _filled(y: np.ndarray) -> np.ndarray:
    """Missing values (NaN) taken from the next block that has one, else the last before."""
    y = y.copy()
    for j in range(y.shape[1]):
        col = y[:, j]
        ok = np.flatnonzero(~np.isnan(col))
        if len(ok) == 0:
            col[:] = 0.0
        elif len(ok) < len(col):
            nxt = np.minimum(np.searchsorted(ok, np.arange(len(col))), len(ok) - 1)
            col[:] = col[ok[nxt]]
    return y


def _json_list(a: np.ndarray) -> list[float | None]:
    """An array as JSON data, a missing value (NaN, which JSON cannot carry) as ``null``."""
    return [None if v != v else float(v) for v in a.tolist()]


def _floats(v: list[float | None]) -> np.ndarray:
    return np.asarray([np.nan if x is None else x for x in v], dtype=np.float64)


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


__all__ = [
    "FORMAT_VERSION",
    "SERIES_STEP_S",
    "OnlineRegimeDetector",
    "compile_kernel",
    "detect_series",
    "segments_of",
]
