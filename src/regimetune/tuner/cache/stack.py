"""LRU stack distances in one O(N log N) pass (Mattson et al.'s stack property).

The stack distance of a request is the number of *distinct* keys referenced since the
previous reference to the same key (0: the key was the last one referenced); a first
reference has distance ``COLD``. An LRU cache that holds ``n`` keys holds exactly the ``n``
most recently used ones, so a request hits it iff its distance is ``< n``: one pass gives
the hits of every capacity at once.

The pass maps keys to dense ids (a hash table, in order of first reference) and runs a numba kernel that keeps a
Fenwick tree over request positions, with a 1 at the position of each key's latest
reference. The distance of request ``i`` whose key was last referenced at ``p`` is the
number of 1s after ``p`` = (distinct keys so far) - (prefix sum up to ``p``).

>>> d = stack_distances([1, 2, 1, 3, 2, 2])
>>> d[2].item(), d[4].item(), d[5].item()
(1, 2, 0)
>>> bool(stack_distances([5])[0] == COLD)
True
"""

from __future__ import annotations

import numba
import numpy as np
import numpy.typing as npt

from regimetune.models.errors import InputError

COLD = np.iinfo(np.int64).max
"""Distance of a first reference: larger than any capacity, so it always misses."""


@numba.njit(cache=True, nogil=True)
def _distances(ids: np.ndarray, n_keys: int) -> np.ndarray:  # pragma: no cover - compiled
    # Positions are renumbered (compacted) whenever they reach ``cap``: only each key's
    # latest reference needs a position, so the tree holds 2 * n_keys slots, not N, and
    # stays smaller (more cache-resident) on long traces. Each compaction costs O(cap) and
    # happens at most every n_keys requests: O(N) in total.
    n = ids.shape[0]
    cap = min(n, max(2 * n_keys, 64))
    tree = np.zeros(cap + 1, dtype=np.int32)  # Fenwick tree over positions 1..cap
    key_at = np.zeros(cap + 1, dtype=np.int32)  # key referenced at each position
    last = np.zeros(n_keys, dtype=np.int32)  # position of each key's latest reference, 0: none
    out = np.empty(n, dtype=np.int64)
    distinct = 0
    t = 0  # last position used
    for i in range(n):
        if t == cap:  # renumber the live positions 1..distinct, in order
            t = 0
            for q in range(1, cap + 1):
                kq = key_at[q]
                if last[kq] == q:
                    t += 1
                    last[kq] = t
                    key_at[t] = kq
            for j in range(1, cap + 1):  # a Fenwick tree of ones over 1..t
                lo = j - (j & -j)
                tree[j] = max(0, min(j, t) - lo)
        k = ids[i]
        p = last[k]
        if p == 0:
            out[i] = COLD
            distinct += 1
        else:
            s = 0  # prefix sum of marks over positions 1..p
            j = p
            while j > 0:
                s += tree[j]
                j -= j & -j
            out[i] = distinct - s
            j = p  # unmark the previous reference
            while j <= cap:
                tree[j] -= 1
                j += j & -j
        t += 1
        j = t  # mark this reference
        while j <= cap:
            tree[j] += 1
            j += j & -j
        last[k] = t
        key_at[t] = k
    return out


@numba.njit(cache=True, nogil=True)
def _dense(keys: np.ndarray) -> tuple[np.ndarray, int]:  # pragma: no cover - compiled
    # Open addressing with Fibonacci hashing, doubled when half full: ids in order of
    # first reference, O(N) expected.
    n = keys.shape[0]
    mult = np.uint64(11400714819323198485)
    bits = 10
    slot_key = np.empty(1 << bits, dtype=np.uint64)
    slot_id = np.full(1 << bits, -1, dtype=np.int64)
    uniq = np.empty(max(n, 1), dtype=np.uint64)
    out = np.empty(n, dtype=np.int64)
    n_ids = 0
    for i in range(n):
        if 2 * n_ids >= (1 << bits):  # rehash into a table twice as large
            bits += 1
            slot_key = np.empty(1 << bits, dtype=np.uint64)
            slot_id = np.full(1 << bits, -1, dtype=np.int64)
            for m in range(n_ids):
                h = np.int64((uniq[m] * mult) >> np.uint64(64 - bits))
                while slot_id[h] >= 0:
                    h = (h + 1) & ((1 << bits) - 1)
                slot_key[h] = uniq[m]
                slot_id[h] = m
        mask = (1 << bits) - 1
        k = keys[i]
        h = np.int64((k * mult) >> np.uint64(64 - bits))
        while True:
            sid = slot_id[h]
            if sid < 0:
                slot_key[h] = k
                slot_id[h] = n_ids
                uniq[n_ids] = k
                out[i] = n_ids
                n_ids += 1
                break
            if slot_key[h] == k:
                out[i] = sid
                break
            h = (h + 1) & mask
    return out, n_ids


@numba.njit(cache=True, nogil=True)
def _dense_direct(keys: np.ndarray, size: int) -> tuple[np.ndarray, int]:  # pragma: no cover - compiled
    table = np.full(size, -1, dtype=np.int64)
    out = np.empty(keys.shape[0], dtype=np.int64)
    n_ids = 0
    for i in range(keys.shape[0]):
        k = keys[i]
        if table[k] < 0:
            table[k] = n_ids
            n_ids += 1
        out[i] = table[k]
    return out, n_ids


def dense_ids(keys: npt.ArrayLike) -> tuple[np.ndarray, int]:
    """Keys mapped to ``0..n_distinct-1`` in order of first reference (``int64``), and
    ``n_distinct``. A hash table in a numba kernel: ``np.unique`` sorts, which costs
    more than the stack pass itself on 10M requests.

    >>> ids, n = dense_ids([30, 10, 30, 20])
    >>> ids.tolist(), n
    ([0, 1, 0, 2], 3)
    """
    arr = np.asarray(keys)
    if arr.ndim != 1:
        raise InputError(f"keys must be one-dimensional, got shape {arr.shape}")
    if len(arr) == 0:
        return np.empty(0, dtype=np.int64), 0
    if arr.dtype.kind not in "iu":
        raise InputError(f"keys must be integers, got dtype {arr.dtype}")
    if arr.dtype.kind == "u" or arr.min() >= 0:
        top = int(arr.max())
        if top < max(4 * len(arr), 1 << 16):  # small keys: a direct table beats hashing
            ids, n_ids = _dense_direct(np.ascontiguousarray(arr).astype(np.int64, copy=False), top + 1)
            return ids, int(n_ids)
    ids, n_ids = _dense(np.ascontiguousarray(arr).astype(np.uint64, copy=False))
    return ids, int(n_ids)


def stack_distances(keys: npt.ArrayLike) -> np.ndarray:
    """LRU stack distance of every request of ``keys`` (any integer keys), ``COLD`` for a
    key's first reference. ``int64``, one per request."""
    ids, n_keys = dense_ids(keys)
    if len(ids) == 0:
        return np.empty(0, dtype=np.int64)
    if n_keys >= 1 << 30:  # positions and key ids are int32 in the kernel
        raise InputError(f"{n_keys} distinct keys: more than the simulator's 2^30")
    return _distances(ids, n_keys)


def warm_up() -> None:
    """Compile the kernel (numba caches it on disk afterwards)."""
    stack_distances(np.array([1, 2, 1], dtype=np.uint64))


__all__ = ["COLD", "dense_ids", "stack_distances", "warm_up"]
