"""Turn a stream of events (or per-key counts) into per-window statistics, in bounded memory.

Windows are ``[origin + i * window_s, origin + (i + 1) * window_s)``; ``origin`` defaults to
the first event's time rounded down to a multiple of ``window_s``. Per-window statistics are
exact (numpy over the window's keys). The cumulative keyspace is an exact set until it holds
``exact_key_limit`` keys; beyond that it is a HyperLogLog sketch (datasketches) and windows
carry ``exact=False``. Events that arrive a little late (time before the open window) are
counted in the open window.

>>> agg = WindowAggregator(window_s=1.0)
>>> b = EventBatch.from_columns(ts=[0.1, 0.2, 0.3, 2.5], key=[1, 1, 2, 3], op=[0, 0, 1, 0])
>>> [(w.index, w.reads, w.writes, w.active_keys, w.keyspace_size) for w in agg.push(b) + agg.flush()]
[(0, 2, 1, 2, 2), (1, 0, 0, 0, 2), (2, 1, 0, 1, 3)]
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import numpy.typing as npt

from regimetune.collectors._hashing import KeySet, bucket_of
from regimetune.models.errors import ConfigError, InputError
from regimetune.models.events import NO_LABEL, EventBatch, Op
from regimetune.models.windows import WindowFrame, WindowStats

_COMPACT_AT = 1 << 22  # raw keys buffered in the open window before they are folded into counts
HLL_LG_K = 14
"""HyperLogLog precision once the keyspace is sketched: relative standard error about 0.8%."""


class _Open:
    """Accumulators of the open window."""

    def __init__(self, n_buckets: int) -> None:
        self.reads = 0
        self.writes = 0
        self.raw: list[np.ndarray] = []
        self.raw_n = 0
        self.ukeys = np.empty(0, dtype=np.uint64)
        self.ucounts = np.empty(0, dtype=np.int64)
        self.labels: dict[int, int] = {}
        self.load = np.zeros(n_buckets)
        self.bytes = np.zeros(n_buckets)

    def add_keys(self, keys: np.ndarray, counts: np.ndarray | None = None) -> None:
        if counts is None:
            self.raw.append(keys)
            self.raw_n += len(keys)
            if self.raw_n >= _COMPACT_AT:
                self.compact()
        else:
            self._fold(keys, counts)

    def _fold(self, keys: np.ndarray, counts: np.ndarray) -> None:
        k = np.concatenate([self.ukeys, keys])
        c = np.concatenate([self.ucounts, counts])
        self.ukeys, inv = np.unique(k, return_inverse=True)
        self.ucounts = np.bincount(inv, weights=c, minlength=len(self.ukeys)).astype(np.int64)

    def compact(self) -> None:
        if self.raw:
            keys, counts = np.unique(np.concatenate(self.raw), return_counts=True)
            self.raw, self.raw_n = [], 0
            if len(self.ukeys):
                self._fold(keys, counts.astype(np.int64))
            else:
                self.ukeys, self.ucounts = keys, counts.astype(np.int64)

    def counts(self) -> tuple[np.ndarray, np.ndarray]:
        self.compact()
        keep = self.ucounts > 0
        return self.ukeys[keep], self.ucounts[keep]


def _entropy_topk(counts: np.ndarray, top_k: int) -> tuple[float, float]:
    total = counts.sum()
    if total <= 0:
        return 0.0, 0.0
    p = counts / total
    ent = float(-(p * np.log2(p)).sum())
    k = min(top_k, len(counts))
    top = np.partition(counts, len(counts) - k)[len(counts) - k :].sum() if k else 0
    return max(ent, 0.0), float(top / total)


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
    def _start(self, t0: float) -> None:
        if not (
            isinstance(self.window_s, int | float) and math.isfinite(self.window_s) and self.window_s > 0
        ):
            raise ConfigError(f"window_s must be a positive number, got {self.window_s!r}")
        if self.top_k < 1:
            raise ConfigError(f"top_k must be >= 1, got {self.top_k}")
        if self.exact_key_limit < 0:
            raise ConfigError(f"exact_key_limit must be >= 0, got {self.exact_key_limit}")
        if self.n_buckets < 0:
            raise ConfigError(f"n_buckets must be >= 0, got {self.n_buckets}")
        self.origin_ = (
            float(self.origin) if self.origin is not None else math.floor(t0 / self.window_s) * self.window_s
        )
        self._cur = 0
        self._open = _Open(self.n_buckets)
        self._seen: KeySet | None = KeySet()
        self._hll: Any = None
        self._started = True

    @property
    def keyspace_size(self) -> int:
        """Distinct keys seen so far (closed windows); an estimate once sketched."""
        if not self._started:
            return 0
        if self._seen is not None:
            return len(self._seen)
        return round(self._hll.get_estimate())

    @property
    def exact(self) -> bool:
        return not self._started or self._seen is not None

    def _index(self, ts: np.ndarray) -> np.ndarray:
        return np.floor((ts - self.origin_) / self.window_s).astype(np.int64)

    # -- input ----------------------------------------------------------------------------------
    def push(self, batch: EventBatch) -> list[WindowStats]:
        """Add a batch of events; returns the windows that ended before its last event."""
        if not isinstance(batch, EventBatch):
            raise InputError(f"push expects an EventBatch, got {type(batch).__name__}")
        if not len(batch):
            return []
        if not np.isfinite(batch.ts).all():
            raise InputError("event times must be finite")
        if not self._started:
            self._start(float(batch.ts[0]))
        widx = np.maximum.accumulate(np.maximum(self._index(batch.ts), self._cur))
        out: list[WindowStats] = []
        bounds = np.flatnonzero(np.diff(widx)) + 1
        starts = np.concatenate([[0], bounds])
        stops = np.concatenate([bounds, [len(widx)]])
        for s, e in zip(starts.tolist(), stops.tolist(), strict=True):
            out.extend(self._advance(int(widx[s])))
            self._add_events(batch, s, e)
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
        if idx < self._cur:
            raise InputError(
                f"window starting at {window_start} is already closed (open window starts at "
                f"{self.origin_ + self._cur * self.window_s})"
            )
        out = self._advance(idx)
        o = self._open
        o.reads += int(r.sum())
        o.writes += int(w.sum())
        tot = r + w
        o.add_keys(k, tot)
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

    def flush(self) -> list[WindowStats]:
        """Close the open window (if any event or count arrived); later input starts after it."""
        if not self._started:
            return []
        o = self._open
        if o.reads + o.writes == 0 and not o.raw and not len(o.ukeys):
            return []
        w = self._close()
        self._cur += 1
        self._open = _Open(self.n_buckets)
        return [w]

    # -- internals ------------------------------------------------------------------------------
    def _advance(self, idx: int) -> list[WindowStats]:
        out: list[WindowStats] = []
        if idx > self._cur:
            out.append(self._close())
            for j in range(self._cur + 1, idx):
                out.append(self._empty(j))
            self._cur = idx
            self._open = _Open(self.n_buckets)
        return out

    def _add_events(self, b: EventBatch, s: int, e: int) -> None:
        o = self._open
        op = b.op[s:e]
        nw = int(np.count_nonzero(op == Op.WRITE))
        o.writes += nw
        o.reads += (e - s) - nw
        keys = b.key[s:e]
        o.add_keys(keys)
        lab = b.label[s:e]
        if lab[0] == lab[-1] and (lab == lab[0]).all():
            o.labels[int(lab[0])] = o.labels.get(int(lab[0]), 0) + (e - s)
        else:
            u, c = np.unique(lab, return_counts=True)
            for lv, cv in zip(u.tolist(), c.tolist(), strict=True):
                o.labels[lv] = o.labels.get(lv, 0) + cv
        if self.n_buckets:
            bk = b.bucket[s:e].astype(np.int64)
            unknown = (bk < 0) | (bk >= self.n_buckets)
            if unknown.any():
                bk = np.where(unknown, bucket_of(keys, self.n_buckets), bk)
            o.load += np.bincount(bk, minlength=self.n_buckets)
            o.bytes += np.bincount(bk, weights=b.size[s:e], minlength=self.n_buckets)

    def _note_keys(self, keys: np.ndarray) -> None:
        if self._seen is not None:
            self._seen.add(keys)
            if len(self._seen) > self.exact_key_limit:
                self._to_sketch()
        else:
            upd = self._hll.update
            for k in keys.tolist():
                upd(k)

    def _to_sketch(self) -> None:
        import datasketches

        assert self._seen is not None
        self._hll = datasketches.hll_sketch(HLL_LG_K, datasketches.tgt_hll_type.HLL_8)
        upd = self._hll.update
        for k in self._seen.keys().tolist():
            upd(k)
        self._seen = None

    def _close(self) -> WindowStats:
        o = self._open
        keys, counts = o.counts()
        self._note_keys(keys)
        ent, top = _entropy_topk(counts, self.top_k)
        label = max(o.labels.items(), key=lambda kv: (kv[1], -kv[0]))[0] if o.labels else NO_LABEL
        return WindowStats(
            index=self._cur,
            start=self.origin_ + self._cur * self.window_s,
            length=float(self.window_s),
            reads=o.reads,
            writes=o.writes,
            active_keys=len(keys),
            keyspace_size=self.keyspace_size,
            topk_share=top,
            entropy=ent,
            label=label,
            exact=self.exact,
            bucket_load=tuple(o.load.tolist()),
            bucket_bytes=tuple(o.bytes.tolist()),
        )

    def _empty(self, j: int) -> WindowStats:
        zeros = (0.0,) * self.n_buckets
        return WindowStats(
            index=j,
            start=self.origin_ + j * self.window_s,
            length=float(self.window_s),
            reads=0,
            writes=0,
            active_keys=0,
            keyspace_size=self.keyspace_size,
            topk_share=0.0,
            entropy=0.0,
            label=NO_LABEL,
            exact=self.exact,
            bucket_load=zeros,
            bucket_bytes=zeros,
        )


def window_frame(
    batches: Iterable[EventBatch],
    *,
    window_s: float = 1.0,
    top_k: int = 10,
    exact_key_limit: int = 1_000_000,
    n_buckets: int = 0,
    on_batch: Callable[[EventBatch], None] | None = None,
) -> WindowFrame:
    """All windows of a stream of batches as one :class:`WindowFrame`. ``on_batch`` is called
    after each batch (e.g. to advance a progress bar)."""
    agg = WindowAggregator(window_s, top_k=top_k, exact_key_limit=exact_key_limit, n_buckets=n_buckets)
    recs: list[WindowStats] = []
    for b in batches:
        recs.extend(agg.push(b))
        if on_batch is not None:
            on_batch(b)
    recs.extend(agg.flush())
    if not recs:
        raise InputError("the trace holds no events")
    frame = WindowFrame.from_records(recs)
    if n_buckets and frame.n_buckets != n_buckets:  # every record carries n_buckets entries
        raise AssertionError("bucket matrix width mismatch")
    return frame


__all__ = ["HLL_LG_K", "WindowAggregator", "window_frame"]
