"""Turn a stream of events (or per-key counts) into per-window statistics, in bounded memory.

Windows are ``[origin + i * window_s, origin + (i + 1) * window_s)``; ``origin`` defaults to
the first event's time rounded down to a multiple of ``window_s``. The edge windows of a trace
of events say how much time they cover: the first one starts at the first event (when that is
inside its window) and the last one, closed by :meth:`WindowAggregator.flush`, ends at the trace's
end (``flush(end=...)``, else the last event's time), so ``reads / length`` rates them by the time
they cover rather than diluting a partial window over a whole one. Per-window statistics are
exact (numpy over the window's keys). The cumulative keyspace is an exact set until it holds
``exact_key_limit`` keys; beyond that it is a HyperLogLog sketch (datasketches) and windows
carry ``exact=False``. Events that arrive a little late (time before the open window) are
counted in the open window.

>>> agg = WindowAggregator(window_s=1.0)
>>> b = EventBatch.from_columns(ts=[0.1, 0.2, 0.3, 2.5], key=[1, 1, 2, 3], op=[0, 0, 1, 0])
>>> ws = agg.push(b) + agg.flush(end=2.75)
>>> [(w.index, w.reads, w.writes, w.active_keys, w.keyspace_size) for w in ws]
[(0, 2, 1, 2, 2), (1, 0, 0, 0, 2), (2, 1, 0, 1, 3)]
>>> [(w.start, w.length) for w in ws]
[(0.1, 0.9), (1.0, 1.0), (2.0, 0.75)]
"""

from __future__ import annotations

import atexit
import functools
import math
import weakref
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import numpy.typing as npt

from regimetune.collectors._hashing import KeySet, bucket_of, window_stats
from regimetune.models.errors import ConfigError, InputError
from regimetune.models.events import NO_LABEL, EventBatch, Op
from regimetune.models.windows import SCALAR_COLUMNS, WindowFrame, WindowStats

_COMPACT_AT = 1 << 22
"""Raw keys buffered in the open window before they are folded into per-key counts; after a
fold, again once the buffer holds twice what the fold left (a window of more distinct keys
than this is folded O(log n) times, not at every batch)."""
MAX_GAP_WINDOWS = 10_000_000
"""A jump in time over more windows than this is refused rather than filled with empty ones."""
HOT_LG_MAX_K = 12
"""Size of the hot-key sketch (up to 0.75 * 2^12 tracked keys)."""
HLL_LG_K = 14
"""HyperLogLog precision once the keyspace is sketched: relative standard error about 0.8%."""


class _Open:
    """What has arrived for the open window: keys with weights, op counts, labels, buckets."""

    def __init__(self, n_buckets: int) -> None:
        self.reads = 0
        self.writes = 0
        self.keys: list[np.ndarray] = []
        self.weights: list[np.ndarray | None] = []
        self.n = 0
        self.fold_at = _COMPACT_AT
        self.labels: dict[int, int] = {}
        self.load = np.zeros(n_buckets)
        self.bytes = np.zeros(n_buckets)

    @property
    def empty(self) -> bool:
        return self.reads + self.writes == 0 and self.n == 0

    def add(self, keys: np.ndarray, weights: np.ndarray | None = None) -> None:
        if not len(keys):
            return
        self.keys.append(keys)
        self.weights.append(weights)
        self.n += len(keys)
        if self.n >= self.fold_at and len(self.keys) > 1:
            k, w = self.arrays()
            uk, inv = np.unique(k, return_inverse=True)
            self.keys = [uk]
            self.weights = [np.bincount(inv, weights=w, minlength=len(uk)).astype(np.int64)]
            self.n = len(uk)
            self.fold_at = max(_COMPACT_AT, 2 * self.n)

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        if not self.keys:
            return np.empty(0, dtype=np.uint64), np.empty(0, dtype=np.int64)
        k = np.concatenate(self.keys) if len(self.keys) > 1 else self.keys[0]
        ws = [
            np.ones(len(kk), dtype=np.int64) if w is None else w
            for kk, w in zip(self.keys, self.weights, strict=True)
        ]
        w = np.concatenate(ws) if len(ws) > 1 else ws[0]
        return k, w


class WindowAggregator:
    """Online windowing: ``push`` batches (or ``push_counts`` per-key counts) in time order,
    get back the windows each call closed; ``flush`` closes the last one.

    Pushing a trace batch by batch gives the same windows as pushing it in one batch.
    """

    def __init__(
        self,
        window_s: float = 1.0,
        *,
        top_k: int = 10,
        exact_key_limit: int = 1_000_000,
        n_buckets: int = 0,
        origin: float | None = None,
    ) -> None:
        self.window_s = window_s
        self.top_k = top_k
        self.exact_key_limit = exact_key_limit
        self.n_buckets = n_buckets
        self.origin = origin
        self._started = False

    def get_params(self) -> dict[str, Any]:
        return {
            "window_s": self.window_s,
            "top_k": self.top_k,
            "exact_key_limit": self.exact_key_limit,
            "n_buckets": self.n_buckets,
            "origin": self.origin,
        }

    # -- state ----------------------------------------------------------------------------------
    def _start(self, t0: float, *, partial_first: bool = False) -> None:
        """Validate the parameters and open window 0; with ``partial_first`` (a stream of events
        starting at ``t0``), the first window covers only ``[t0, its end)``."""
        ws = self.window_s
        if isinstance(ws, bool) or not isinstance(ws, int | float) or not math.isfinite(ws) or ws <= 0:
            raise ConfigError(f"window_s must be a positive number, got {ws!r}")
        for name, lo in (("top_k", 1), ("exact_key_limit", 0), ("n_buckets", 0)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise ConfigError(f"{name} must be an integer >= {lo}, got {v!r}")
        self.origin_ = float(self.origin) if self.origin is not None else math.floor(t0 / ws) * ws
        self._cur = 0
        self._open = _Open(self.n_buckets)
        inside = self.origin_ < t0 < self.origin_ + ws
        self._first_start: float | None = float(t0) if partial_first and inside else None
        self._last_ts: float | None = None
        self._seen: KeySet | None = KeySet()
        self._hll: Any = None
        self._freq: Any = None
        self._started = True

    @property
    def keyspace_size(self) -> int:
        """Distinct keys in the closed windows; an estimate once sketched."""
        if not self._started:
            return 0
        if self._seen is not None:
            return len(self._seen)
        return round(self._hll.get_estimate())

    def keyspace_bounds(self, num_std_dev: int = 2) -> tuple[float, float]:
        """Bounds on the distinct keys seen, at ``num_std_dev`` (1-3) standard deviations of the
        sketch (the exact count twice while exact)."""
        if getattr(self, "_hll", None) is None:
            n = float(self.keyspace_size)
            return n, n
        return self._hll.get_lower_bound(num_std_dev), self._hll.get_upper_bound(num_std_dev)

    @property
    def exact(self) -> bool:
        """Whether ``keyspace_size`` is still exact."""
        return not self._started or self._seen is not None

    def _check_jump(self, idx: int, t: float) -> None:
        if idx - self._cur > MAX_GAP_WINDOWS:
            raise InputError(
                f"time {t:g} is {idx - self._cur:,} windows after the open window: more than "
                f"{MAX_GAP_WINDOWS:,} empty windows (wrong --time-unit?)"
            )

    def _index(self, ts: np.ndarray) -> np.ndarray:
        return np.floor((ts - self.origin_) / self.window_s).astype(np.int64)

    # -- input ----------------------------------------------------------------------------------
    def push(self, batch: EventBatch) -> list[WindowStats]:
        """Add a batch of events; returns the windows that ended before its last event."""
        cols = self.push_columns(batch)
        return _records(cols) if cols is not None else []

    def push_columns(self, batch: EventBatch) -> dict[str, np.ndarray] | None:
        """Like :meth:`push`, but the closed windows come as columns (``SCALAR_COLUMNS`` plus
        ``bucket_load``/``bucket_bytes`` matrices), or ``None`` when none closed: the fast path
        for offline use, with no object per window."""
        if not isinstance(batch, EventBatch):
            raise InputError(f"push expects an EventBatch, got {type(batch).__name__}")
        if not len(batch):
            return None
        if not np.isfinite(batch.ts).all():
            raise InputError("event times must be finite")
        if not self._started:
            self._start(float(batch.ts[0]), partial_first=True)
        self._note_end(float(batch.ts.max()))
        widx = np.maximum.accumulate(np.maximum(self._index(batch.ts), self._cur))
        last = int(widx[-1])
        self._check_jump(last, float(batch.ts[-1]))
        split = int(np.searchsorted(widx, last, side="left"))
        out = self._close_through(last, batch.slice(0, split), widx[:split]) if last > self._cur else None
        self._add_open(batch.slice(split, len(batch)))
        return out

    def push_counts(
        self,
        window_start: float,
        keys: npt.ArrayLike,
        reads: npt.ArrayLike,
        writes: npt.ArrayLike | None = None,
        bucket_load: npt.ArrayLike | None = None,
        bucket_bytes: npt.ArrayLike | None = None,
    ) -> list[WindowStats]:
        """Add per-key read/write counts for the window that starts at ``window_start`` (e.g.
        a report of the service's ingest endpoint); returns the windows this closed."""
        k = np.asarray(keys)
        if k.ndim != 1 or (len(k) and not np.issubdtype(k.dtype, np.integer)):
            raise InputError("keys must be a one-dimensional array of integers")
        if len(k) and k.min() < 0:
            raise InputError("keys must be >= 0")
        k = k.astype(np.uint64)
        r = np.asarray(reads, dtype=np.int64)
        w = np.zeros(len(k), dtype=np.int64) if writes is None else np.asarray(writes, dtype=np.int64)
        if r.shape != k.shape or w.shape != k.shape:
            raise InputError(
                f"keys, reads and writes must have equal lengths, got {len(k)}, {r.size}, {w.size}"
            )
        if (r < 0).any() or (w < 0).any():
            raise InputError("read and write counts must be >= 0")
        if not math.isfinite(window_start):
            raise InputError("window_start must be finite")
        if not self._started:
            self._start(float(window_start))
        idx = round((window_start - self.origin_) / self.window_s)
        self._check_jump(idx, float(window_start))
        if idx < self._cur:
            raise InputError(
                f"window starting at {window_start} is already closed (open window starts at "
                f"{self.origin_ + self._cur * self.window_s})"
            )
        out = (
            _records(self._close_through(idx, EventBatch.empty(), np.empty(0, dtype=np.int64)))
            if idx > self._cur
            else []
        )
        self._note_end(self.origin_ + (idx + 1) * float(self.window_s))  # a report covers its window
        o = self._open
        tot = r + w
        nz = tot > 0
        o.reads += int(r.sum())
        o.writes += int(w.sum())
        o.add(k[nz], tot[nz])
        if tot.sum():
            o.labels[NO_LABEL] = o.labels.get(NO_LABEL, 0) + int(tot.sum())
        if self.n_buckets:
            for name, given, acc in (
                ("bucket_load", bucket_load, o.load),
                ("bucket_bytes", bucket_bytes, o.bytes),
            ):
                if given is not None:
                    g = np.asarray(given, dtype=np.float64)
                    if g.shape != (self.n_buckets,) or not np.isfinite(g).all() or (g < 0).any():
                        raise InputError(f"{name} must hold {self.n_buckets} finite values >= 0")
                    acc += g
                elif name == "bucket_load":
                    acc += np.bincount(bucket_of(k, self.n_buckets), weights=tot, minlength=self.n_buckets)
        return out

    def close_window(self) -> list[WindowStats]:
        """Close the open window even when nothing arrived for it (a source that reported an
        idle window); later input starts after it."""
        if not self._started:
            return []
        return _records(self._close_through(self._cur + 1, EventBatch.empty(), np.empty(0, dtype=np.int64)))

    def skip_to(self, window_start: float) -> None:
        """Make the window starting at ``window_start`` the open one, in O(1): the windows in
        between were not observed (no source reported them), which is not the same as empty,
        so none of them is closed. The open window must hold nothing."""
        if not self._started:
            self._start(float(window_start))
        idx = round((window_start - self.origin_) / self.window_s)
        if not self._open.empty:
            raise InputError("skip_to needs an empty open window: close it first")
        if idx < self._cur:
            raise InputError(f"window starting at {window_start} is already closed")
        self._cur = idx

    def flush(self, *, end: float | None = None) -> list[WindowStats]:
        """Close the open window if anything arrived for it; later input starts after it.

        The closed window is the trace's last: its length is the time from its start to
        ``end`` (the trace's end, when the caller knows it), else to the last event's time (a
        window of per-key counts covers its whole length); never more than a window length,
        and a whole one if that time is not after the window's start."""
        cols = self.flush_columns(end=end)
        return _records(cols) if cols is not None else []

    def flush_columns(self, *, end: float | None = None) -> dict[str, np.ndarray] | None:
        """Like :meth:`flush`, as columns (see :meth:`push_columns`)."""
        if end is not None:
            if isinstance(end, bool) or not isinstance(end, int | float) or not math.isfinite(end):
                raise InputError(f"end must be a finite time, got {end!r}")
            if self._started and self._last_ts is not None and end < self._last_ts:
                raise InputError(f"end {end:g} is before the input's last time {self._last_ts:g}")
        if not self._started or self._open.empty:
            return None
        stop = self._last_ts if end is None else float(end)
        cols = self._close_through(self._cur + 1, EventBatch.empty(), np.empty(0, dtype=np.int64))
        if stop is not None:
            start = float(cols["start"][0])
            covered = min(stop, start + float(cols["length"][0])) - start
            if covered > 0:
                cols["length"][0] = covered
        return cols

    def _note_end(self, t: float) -> None:
        """Remember the latest time the input covers (the last window's end at :meth:`flush`)."""
        if self._last_ts is None or t > self._last_ts:
            self._last_ts = t

    # -- snapshot -------------------------------------------------------------------------------
    def to_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """Everything the aggregator holds, as JSON-able metadata and numpy arrays (the open
        window's keys and counts, the keys seen while exact, the serialized sketches), so
        that :meth:`from_state` continues exactly where this one is."""
        meta: dict[str, Any] = {"format_version": 1, "params": self.get_params(), "started": self._started}
        arrays: dict[str, np.ndarray] = {}
        if not self._started:
            return meta, arrays
        o = self._open
        keys, weights = o.arrays()
        meta |= {
            "origin": self.origin_,
            "cur": self._cur,
            "reads": o.reads,
            "writes": o.writes,
            "labels": sorted(o.labels.items()),
            "exact": self._seen is not None,
            "first_start": self._first_start,
            "last_ts": self._last_ts,
        }
        arrays |= {
            "open_keys": keys.astype(np.uint64),
            "open_weights": weights.astype(np.int64),
            "open_load": o.load,
            "open_bytes": o.bytes,
        }
        if self._seen is not None:
            arrays["seen"] = self._seen.keys()
        else:
            arrays["hll"] = np.frombuffer(self._hll.serialize_compact(), dtype=np.uint8)
        if self._freq is not None:
            arrays["hot"] = np.frombuffer(self._freq.serialize(_uint64_serde()), dtype=np.uint8)
        return meta, arrays

    @classmethod
    def from_state(cls, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> WindowAggregator:
        """An aggregator that continues from :meth:`to_state`."""
        if meta.get("format_version") != 1:
            raise InputError(f"aggregator state format {meta.get('format_version')!r} is not supported")
        agg = cls(**meta["params"])
        if not meta["started"]:
            return agg
        import datasketches

        agg._start(0.0)
        agg.origin_ = float(meta["origin"])
        agg._cur = int(meta["cur"])
        first, last = meta.get("first_start"), meta.get("last_ts")  # absent from older states
        agg._first_start = None if first is None else float(first)
        agg._last_ts = None if last is None else float(last)
        o = agg._open
        o.reads, o.writes = int(meta["reads"]), int(meta["writes"])
        o.labels = {int(k): int(v) for k, v in meta["labels"]}
        o.add(
            np.array(arrays["open_keys"], dtype=np.uint64), np.array(arrays["open_weights"], dtype=np.int64)
        )
        o.load = np.array(arrays["open_load"], dtype=np.float64)
        o.bytes = np.array(arrays["open_bytes"], dtype=np.float64)
        if meta["exact"]:
            seen = KeySet(2 * len(arrays["seen"]))
            seen.add(np.array(arrays["seen"], dtype=np.uint64))
            agg._seen = seen
        else:
            agg._seen = None
            agg._hll = datasketches.hll_sketch.deserialize(arrays["hll"].tobytes())
            _SKETCH_HOLDERS.add(agg)
        if "hot" in arrays:
            agg._freq = datasketches.frequent_items_sketch.deserialize(
                arrays["hot"].tobytes(), _uint64_serde()
            )
            _SKETCH_HOLDERS.add(agg)
        return agg

    # -- internals ------------------------------------------------------------------------------
    def _add_open(self, b: EventBatch) -> None:
        if not len(b):
            return
        o = self._open
        nw = int(np.count_nonzero(b.op == Op.WRITE))
        o.writes += nw
        o.reads += len(b) - nw
        o.add(b.key)
        lab = b.label
        if (lab == lab[0]).all():
            o.labels[int(lab[0])] = o.labels.get(int(lab[0]), 0) + len(b)
        else:
            u, c = np.unique(lab, return_counts=True)
            for lv, cv in zip(u.tolist(), c.tolist(), strict=True):
                o.labels[lv] = o.labels.get(lv, 0) + cv
        if self.n_buckets:
            bk = self._buckets(b)
            o.load += np.bincount(bk, minlength=self.n_buckets)
            o.bytes += np.bincount(bk, weights=b.size, minlength=self.n_buckets)

    def _buckets(self, b: EventBatch) -> np.ndarray:
        bk = b.bucket.astype(np.int64)
        unknown = (bk < 0) | (bk >= self.n_buckets)
        if unknown.any():
            bk = np.where(unknown, bucket_of(b.key, self.n_buckets), bk)
        return bk

    def _close_through(self, last: int, b: EventBatch, widx: np.ndarray) -> dict[str, np.ndarray]:
        """Close windows ``cur .. last-1``: the open window's data plus ``b`` (window ``widx``)."""
        o = self._open
        nwin = last - self._cur
        ok, ow = o.arrays()
        wloc_b = widx - self._cur
        if len(ok):
            keys = np.concatenate([ok, b.key])
            weights = np.concatenate([ow, np.ones(len(b), dtype=np.int64)])
        else:
            keys, weights = b.key, np.ones(len(b), dtype=np.int64)
        per_b = np.bincount(wloc_b, minlength=nwin)
        starts = np.zeros(nwin + 1, dtype=np.int64)
        np.cumsum(per_b, out=starts[1:])
        starts[1:] += len(ok)
        before = self.keyspace_size
        active, new, ent, top, first, tkeys, tcnt = window_stats(
            keys, weights, starts, self.top_k, self._seen
        )
        self._note_hot(tkeys, tcnt)
        if self._seen is not None:
            ks = before + np.cumsum(new)
            exact = np.ones(nwin, dtype=bool)
        else:
            ks = np.empty(nwin, dtype=np.int64)
            for w in range(nwin):
                _feed(self._hll, keys[starts[w] : starts[w + 1]][first[starts[w] : starts[w + 1]]])
                ks[w] = round(self._hll.get_estimate())
            exact = np.zeros(nwin, dtype=bool)
        writes = np.bincount(wloc_b[b.op == Op.WRITE], minlength=nwin)
        reads = per_b - writes
        reads[0] += o.reads
        writes[0] += o.writes
        labels = self._labels(b.label, wloc_b, per_b, o.labels)
        nb = self.n_buckets
        load = np.zeros((nwin, nb))
        size = np.zeros((nwin, nb))
        if nb:
            flat = wloc_b * nb + self._buckets(b)
            load = np.bincount(flat, minlength=nwin * nb).reshape(nwin, nb).astype(float)
            size = np.bincount(flat, weights=b.size, minlength=nwin * nb).astype(float).reshape(nwin, nb)
            load[0] += o.load
            size[0] += o.bytes
        index = np.arange(self._cur, last, dtype=np.int64)
        cols = {
            "index": index,
            "start": self.origin_ + index * float(self.window_s),
            "length": np.full(nwin, float(self.window_s)),  # edges: see _first_start, flush_columns
            "reads": reads.astype(np.int64),
            "writes": writes.astype(np.int64),
            "active_keys": active,
            "keyspace_size": ks.astype(np.int64),
            "topk_share": top,
            "entropy": ent,
            "label": labels.astype(np.int64),
            "exact": exact,
            "bucket_load": load,
            "bucket_bytes": size,
        }
        if self._first_start is not None and index[0] == 0:
            cols["start"][0] = self._first_start
            cols["length"][0] = self.origin_ + float(self.window_s) - self._first_start
            self._first_start = None
        self._cur = last
        self._open = _Open(self.n_buckets)
        if self._seen is not None and len(self._seen) > self.exact_key_limit:
            self._to_sketch()
        return cols

    @staticmethod
    def _labels(
        lab: np.ndarray, wloc: np.ndarray, per: np.ndarray, open_labels: dict[int, int]
    ) -> np.ndarray:
        """Majority label per window (ties to the smallest label; -1 for an empty window)."""
        nwin = len(per)
        has = per > 0
        has[0] |= sum(open_labels.values()) > 0
        if len(lab) and lab[0] == lab[-1] and lab.min() == lab.max() and set(open_labels) <= {int(lab[0])}:
            return np.where(has, int(lab[0]), NO_LABEL)  # one label throughout: the common case
        if not len(lab) and len(open_labels) <= 1:
            out = np.full(nwin, NO_LABEL, dtype=np.int64)
            if open_labels:
                out[0] = next(iter(open_labels))
            return out
        vals = lab.astype(np.int64)
        extra = np.array(sorted(open_labels), dtype=np.int64)
        lo = int(min(vals.min(initial=NO_LABEL), extra.min(initial=NO_LABEL)))
        hi = int(max(vals.max(initial=NO_LABEL), extra.max(initial=NO_LABEL)))
        span = hi - lo + 1
        if span * nwin > 1 << 24:  # wide label range: count per window with unique()
            out = np.full(nwin, NO_LABEL, dtype=np.int64)
            for w in range(nwin):
                cnt = dict(open_labels) if w == 0 else {}
                u, c = np.unique(vals[wloc == w], return_counts=True)
                for lv, cv in zip(u.tolist(), c.tolist(), strict=True):
                    cnt[lv] = cnt.get(lv, 0) + cv
                if cnt:
                    out[w] = max(cnt.items(), key=lambda kv: (kv[1], -kv[0]))[0]
            return out
        counts = np.bincount(wloc * span + (vals - lo), minlength=nwin * span).reshape(nwin, span)
        for lv, cv in open_labels.items():
            counts[0, lv - lo] += cv
        out = counts.argmax(axis=1) + lo
        out[counts.sum(axis=1) == 0] = NO_LABEL
        return out

    def _note_hot(self, tkeys: np.ndarray, tcnt: np.ndarray) -> None:
        if self._freq is None:
            import datasketches

            self._freq = datasketches.frequent_items_sketch(HOT_LG_MAX_K)
            _SKETCH_HOLDERS.add(self)
        upd = self._freq.update
        nz = tcnt > 0
        for k, c in zip(tkeys[nz].tolist(), tcnt[nz].tolist(), strict=True):
            upd(k, c)

    def hot_keys(self, n: int = 10) -> list[tuple[int, int]]:
        """The trace's hottest keys so far with estimated request counts, most requested first.

        A datasketches frequent-items sketch fed with every closed window's top-k keys and
        their exact window counts: memory stays flat at any keyspace size; a key's requests in
        windows where it was not among the top k are not counted (an underestimate), plus the
        sketch's own error (``frequent_items_sketch.get_epsilon_for_lg_size``)."""
        if getattr(self, "_freq", None) is None:
            return []
        import datasketches

        items = self._freq.get_frequent_items(datasketches.frequent_items_error_type.NO_FALSE_NEGATIVES)
        return [(int(k), int(est)) for k, est, _lo, _hi in items[:n]]

    def _to_sketch(self) -> None:
        import datasketches

        assert self._seen is not None
        self._hll = datasketches.hll_sketch(HLL_LG_K, datasketches.tgt_hll_type.HLL_8)
        _SKETCH_HOLDERS.add(self)
        _feed(self._hll, self._seen.keys())
        self._seen = None


_SKETCH_HOLDERS: weakref.WeakSet[WindowAggregator] = weakref.WeakSet()
"""The aggregators holding datasketches objects, for :func:`_release_sketches`."""


@atexit.register
def _release_sketches() -> None:
    """Free the datasketches objects still held at exit. Its bindings (nanobind) report every
    object of theirs alive after the interpreter's last collection as leaked, and an
    aggregator can outlive the modules: a service's engine is kept by FastAPI's cache of
    dependency callables, which closes over the app."""
    for agg in list(_SKETCH_HOLDERS):
        agg._freq = None
        agg._hll = None
    _uint64_serde.cache_clear()


@functools.cache
def _uint64_serde() -> Any:
    """A datasketches SerDe for the hot-keys sketch's items, unsigned 64-bit keys (the library
    ships a signed one only); built on first use, as datasketches is imported lazily."""
    import struct

    import datasketches

    class UInt64SerDe(datasketches.PyObjectSerDe):
        def get_size(self, item: int) -> int:
            return 8

        def to_bytes(self, item: int) -> bytes:
            return struct.pack("<Q", item)

        def from_bytes(self, data: bytes, offset: int) -> tuple[int, int]:
            return struct.unpack_from("<Q", data, offset)[0], 8

    return UInt64SerDe()


FEED_CHUNK = 8192


def _feed(sketch: Any, keys: np.ndarray) -> None:
    """Update ``sketch`` with every key, converting ``FEED_CHUNK`` keys to Python ints at a
    time: one ``tolist`` over a million keys holds the GIL for tens of milliseconds, which a
    service answering requests on another thread would feel as latency."""
    upd = sketch.update
    for i in range(0, len(keys), FEED_CHUNK):
        for k in keys[i : i + FEED_CHUNK].tolist():
            upd(k)


def _records(cols: dict[str, np.ndarray]) -> list[WindowStats]:
    names = SCALAR_COLUMNS
    lists = {n: cols[n].tolist() for n in names}
    load, size = cols["bucket_load"].tolist(), cols["bucket_bytes"].tolist()
    return [
        WindowStats(
            **{n: lists[n][w] for n in names}, bucket_load=tuple(load[w]), bucket_bytes=tuple(size[w])
        )
        for w in range(len(cols["index"]))
    ]


def frame_of(parts: list[dict[str, np.ndarray]], n_buckets: int) -> WindowFrame:
    """Join column dicts from :meth:`WindowAggregator.push_columns` into one frame."""
    if not parts:
        raise InputError("the trace holds no events")
    cols = {n: np.concatenate([p[n] for p in parts]) for n in SCALAR_COLUMNS}
    n = len(cols["index"])
    load = np.concatenate([p["bucket_load"] for p in parts]).reshape(n, n_buckets)
    size = np.concatenate([p["bucket_bytes"] for p in parts]).reshape(n, n_buckets)
    return WindowFrame(columns=cols, bucket_load=load, bucket_bytes=size)


def window_frame(
    batches: Iterable[EventBatch],
    *,
    window_s: float = 1.0,
    top_k: int = 10,
    exact_key_limit: int = 1_000_000,
    n_buckets: int = 0,
    on_batch: Callable[[EventBatch], None] | None = None,
    end: float | None = None,
) -> WindowFrame:
    """All windows of a stream of batches as one :class:`WindowFrame`. ``on_batch`` is called
    after each batch (e.g. to advance a progress bar); ``end`` is the trace's end, when known
    (the last window covers up to it; default: the last event's time)."""
    agg = WindowAggregator(window_s, top_k=top_k, exact_key_limit=exact_key_limit, n_buckets=n_buckets)
    parts: list[dict[str, np.ndarray]] = []
    for b in batches:
        cols = agg.push_columns(b)
        if cols is not None:
            parts.append(cols)
        if on_batch is not None:
            on_batch(b)
    last = agg.flush_columns(end=end)
    if last is not None:
        parts.append(last)
    return frame_of(parts, n_buckets)


__all__ = ["HLL_LG_K", "WindowAggregator", "frame_of", "window_frame"]
