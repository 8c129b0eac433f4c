"""What an ingest batch must be before it is stored, and its digest.

A batch is per-key ``counts`` of one window or raw ``events``, as columns (numpy arrays),
with optional per-bucket ``bucket_load`` and ``bucket_bytes``. The lateness rules (too late,
too far ahead) are the lateness buffer's (:mod:`~regimetune.control.lateness`).
"""

from __future__ import annotations

import hashlib
import math

import numpy as np

from regimetune.models import InputError


def check_batch(kind: str, window_start: float, columns: dict[str, np.ndarray], *, n_buckets: int) -> None:
    """Raise :class:`InputError` saying what the aggregator would refuse in the batch."""
    if kind not in ("counts", "events"):
        raise InputError(f"unknown batch kind {kind!r}")
    if not math.isfinite(window_start) or window_start < 0:
        raise InputError("window_start must be a finite number >= 0")
    if kind == "events" and len(columns.get("ts", ())):
        ts = columns["ts"]
        if not np.isfinite(ts).all() or ts[0] < 0:
            raise InputError("events.ts must be finite numbers >= 0")
    for name in ("bucket_load", "bucket_bytes"):
        if name in columns:
            col = columns[name]
            if len(col) != n_buckets:
                raise InputError(f"{name} must hold engine.n_buckets={n_buckets} values")
            if not np.isfinite(col).all() or (col < 0).any():
                raise InputError(f"{name} must hold finite values >= 0")


def batch_digest(kind: str, window_start: float, columns: dict[str, np.ndarray]) -> str:
    """A hash of a batch's content: the same Idempotency-Key with another body is refused."""
    h = hashlib.sha256(f"{kind}\n{window_start!r}\n".encode())
    for name in sorted(columns):
        arr = np.ascontiguousarray(columns[name])
        h.update(f"{name}:{arr.dtype.str}:{len(arr)}\n".encode())
        h.update(arr.data)
    return h.hexdigest()


__all__ = ["batch_digest", "check_batch"]
