"""String keys as stable 64-bit integers: xxHash's XXH3-64 (seed 0) of the key's bytes.

Public cache traces (Twitter's, CacheLib's) carry anonymised string keys; everything after
the readers works on ``uint64`` keys. XXH3's output is frozen by its specification (since
xxHash 0.8.0), so the same key maps to the same integer on every machine, run and version,
and windows computed today match windows computed later. A column is hashed per chunk: its
distinct values are found by Arrow (``dictionary_encode``) and only those are hashed, so a
hot key seen a million times is hashed once per chunk.

>>> hash_key("nz:u:eeW511W3dcH3de3d15ec") == hash_key(b"nz:u:eeW511W3dcH3de3d15ec")
True
>>> import pyarrow as pa
>>> k = hash_keys(pa.array(["a", "b", "a"]))
>>> k.dtype.name, bool(k[0] == k[2] == hash_key("a")), bool(k[0] != k[1])
('uint64', True, True)
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import xxhash


def hash_key(key: str | bytes) -> int:
    """XXH3-64 (seed 0) of ``key``'s UTF-8 bytes, as an unsigned integer."""
    return xxhash.xxh3_64_intdigest(key.encode("utf-8") if isinstance(key, str) else key)


def hash_keys(col: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Hash a string or binary column to ``uint64`` (nulls hash as the empty key; readers
    refuse nulls before they get here)."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    if not pa.types.is_dictionary(col.type):
        if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
            col = pc.cast(col, pa.binary())
        col = pc.dictionary_encode(col)
    words = pc.cast(col.dictionary, pa.binary()).to_pylist()
    # a dictionary holds no nulls (they stay in the indices), so every word is bytes
    lut = np.fromiter(map(xxhash.xxh3_64_intdigest, words), dtype=np.uint64, count=len(words))
    lut = np.append(lut, np.uint64(hash_key(b"")))  # where nulls point
    idx = col.indices.fill_null(len(words)).to_numpy(zero_copy_only=False)
    return lut[np.asarray(idx, dtype=np.int64)]


def is_int_key(text: str) -> bool:
    """Whether ``text`` reads as an unsigned 64-bit integer (how ``auto`` decides).

    >>> is_int_key(" 42"), is_int_key("nz:u:x"), is_int_key("-1")
    (True, False, False)
    """
    s = text.strip()
    return s.isdigit() and int(s) < 2**64


__all__ = ["hash_key", "hash_keys", "is_int_key"]
