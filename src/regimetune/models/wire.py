"""The compact binary body of ``POST /v1/ingest/counts``: its media type, and the encoder
(a daemon's side) and decoder (the service's) of the one format.

n keys (uint64 little-endian), then their n read counts (uint32), then n write counts
(uint32): 16 bytes per key.

>>> import numpy as np
>>> body = encode_counts(np.array([7, 9]), np.array([3, 1]))
>>> len(body), decode_counts(body)["keys"].tolist(), decode_counts(body)["writes"].tolist()
(32, [7, 9], [0, 0])
"""

from __future__ import annotations

import numpy as np

from regimetune.models.errors import InputError

COUNTS_MEDIA_TYPE = "application/x-regimetune-counts"
RECORD_BYTES = 16
"""Bytes per key: its id and its read and write counts."""


def encode_counts(keys: np.ndarray, reads: np.ndarray, writes: np.ndarray | None = None) -> bytes:
    """The body for per-key ``keys``, ``reads`` and ``writes`` (none: zeros)."""
    k = np.ascontiguousarray(keys, dtype="<u8")
    r = np.ascontiguousarray(reads, dtype="<u4")
    w = np.zeros(len(k), dtype="<u4") if writes is None else np.ascontiguousarray(writes, dtype="<u4")
    if not len(k) == len(r) == len(w):
        raise InputError("keys, reads and writes must have equal lengths")
    return k.tobytes() + r.tobytes() + w.tobytes()


def decode_counts(body: bytes) -> dict[str, np.ndarray]:
    """The ``keys``, ``reads`` and ``writes`` columns of a body (read-only views of it)."""
    if len(body) % RECORD_BYTES:
        raise InputError(
            f"body of {len(body)} bytes is not a whole number of {RECORD_BYTES}-byte key records"
        )
    n = len(body) // RECORD_BYTES
    return {
        "keys": np.frombuffer(body, dtype="<u8", count=n, offset=0),
        "reads": np.frombuffer(body, dtype="<u4", count=n, offset=8 * n),
        "writes": np.frombuffer(body, dtype="<u4", count=n, offset=12 * n),
    }


__all__ = ["COUNTS_MEDIA_TYPE", "RECORD_BYTES", "decode_counts", "encode_counts"]
