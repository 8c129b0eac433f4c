"""A storage daemon's side of ``POST /v1/ingest``: turn events into per-window per-key
counts and send them (used by ``regimetune demo``, the benchmark and the tests)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import numpy as np

from regimetune.models import EventBatch, InputError, Op
from regimetune.models.wire import COUNTS_MEDIA_TYPE, encode_counts


@dataclass(frozen=True, slots=True)
class WindowCounts:
    """Per-key reads and writes of the window ``[start, start + length)``; ``label`` is the
    majority ground-truth regime of its events (-1 if none)."""

    start: float
    length: float
    keys: np.ndarray
    reads: np.ndarray
    writes: np.ndarray
    label: int = -1

    @property
    def requests(self) -> int:
        return int(self.reads.sum() + self.writes.sum())


def count_windows(batches: Iterable[EventBatch], window_s: float) -> Iterator[WindowCounts]:
    """Group time-ordered events into windows of ``window_s`` seconds (from time 0) and count
    reads and writes per key, vectorised per batch; windows spanning batches are merged."""
    if not window_s > 0:
        raise InputError("window_s must be > 0")
    pending: list[EventBatch] = []
    pending_w: int | None = None
    for b in batches:
        if not len(b):
            continue
        w = np.floor(b.ts / window_s).astype(np.int64)
        cuts = np.flatnonzero(np.diff(w)) + 1
        starts = np.concatenate([[0], cuts])
        ends = np.concatenate([cuts, [len(b)]])
        for s, e in zip(starts.tolist(), ends.tolist(), strict=True):
            wi = int(w[s])
            if pending_w is not None and wi != pending_w:
                yield _count(EventBatch.concat(pending), pending_w, window_s)
                pending = []
            pending.append(b.slice(s, e))
            pending_w = wi
    if pending and pending_w is not None:
        yield _count(EventBatch.concat(pending), pending_w, window_s)


def _count(b: EventBatch, wi: int, window_s: float) -> WindowCounts:
    keys, inv = np.unique(b.key, return_inverse=True)
    is_write = b.op == Op.WRITE
    writes = np.bincount(inv, weights=is_write, minlength=len(keys)).astype(np.uint32)
    reads = (np.bincount(inv, minlength=len(keys)) - writes).astype(np.uint32)
    lab = b.label[b.label >= 0]
    label = int(np.bincount(lab).argmax()) if len(lab) else -1
    return WindowCounts(wi * window_s, window_s, keys.astype(np.uint64), reads, writes, label)


class IngestClient:
    """Send windows to a service. ``binary`` picks the compact format (default) over JSON."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        binary: bool = True,
        client: httpx.Client | None = None,
        timeout: float = 30.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.binary = binary
        self.client = client if client is not None else httpx.Client(timeout=timeout)
        self._own = client is None

    def _headers(self) -> dict[str, str]:
        return {} if self.token is None else {"Authorization": f"Bearer {self.token}"}

    def send(self, wc: WindowCounts, *, chunk: int | None = None) -> list[dict[str, Any]]:
        """Send one window (in chunks of ``chunk`` keys); returns the acknowledgements."""
        n = len(wc.keys)
        step = chunk if chunk else n
        acks = []
        for s in range(0, max(n, 1), max(step, 1)):
            e = min(s + step, n) if n else 0
            key = f"w{wc.start!r}-{s}"
            acks.append(self.post_counts(wc.start, wc.keys[s:e], wc.reads[s:e], wc.writes[s:e], key=key))
        return acks

    def post_counts(
        self,
        window_start: float,
        keys: np.ndarray,
        reads: np.ndarray,
        writes: np.ndarray | None = None,
        *,
        key: str | None = None,
    ) -> dict[str, Any]:
        """Send one batch; ``key`` is its Idempotency-Key (resending it is harmless)."""
        extra = {} if key is None else {"Idempotency-Key": key}
        if self.binary:
            r = self.client.post(
                f"{self.base_url}/v1/ingest/counts",
                params={"window_start": repr(float(window_start))},
                content=encode_counts(keys, reads, writes),
                headers={"Content-Type": COUNTS_MEDIA_TYPE, **self._headers(), **extra},
            )
        else:
            body = {
                "window_start": float(window_start),
                "counts": {
                    "keys": keys.tolist(),
                    "reads": reads.tolist(),
                    "writes": None if writes is None else writes.tolist(),
                },
            }
            r = self.client.post(
                f"{self.base_url}/v1/ingest", json=body, headers={**self._headers(), **extra}
            )
        r.raise_for_status()
        return r.json()

    def post_body(self, body: dict[str, Any], *, key: str | None = None) -> dict[str, Any]:
        """Send one batch already in the JSON of ``POST /v1/ingest`` (counts or events, with
        buckets); ``key`` is its Idempotency-Key. Raises ``httpx`` errors as ``post_counts``."""
        extra = {} if key is None else {"Idempotency-Key": key}
        r = self.client.post(f"{self.base_url}/v1/ingest", json=body, headers={**self._headers(), **extra})
        r.raise_for_status()
        return r.json()

    def close(self) -> None:
        if self._own:
            self.client.close()

    def __enter__(self) -> IngestClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["COUNTS_MEDIA_TYPE", "IngestClient", "WindowCounts", "count_windows", "encode_counts"]
