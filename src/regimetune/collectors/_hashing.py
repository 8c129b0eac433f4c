"""Compiled helpers: a 64-bit mixing hash and an exact set of uint64 keys (open addressing).

>>> s = KeySet()
>>> s.add(np.array([3, 5, 3], dtype=np.uint64)), s.add(np.array([5, 9], dtype=np.uint64)), len(s)
(2, 1, 3)
"""

from __future__ import annotations

import numba
import numpy as np

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def mix64(keys: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser, vectorised: a bijection of uint64 that spreads nearby keys.

    >>> mix64(np.array([0, 1], dtype=np.uint64)).tolist() != [0, 1]
    True
    """
    z = np.asarray(keys, dtype=np.uint64) + _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def bucket_of(keys: np.ndarray, n_buckets: int) -> np.ndarray:
    """The bucket (0..n_buckets-1) that a key hashes to; the same everywhere in the project."""
    return (mix64(keys) % np.uint64(n_buckets)).astype(np.int32)


@numba.njit(cache=True, nogil=True)
def _mix(k: np.uint64) -> np.uint64:  # pragma: no cover - compiled
    z = k + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@numba.njit(cache=True, nogil=True)
def _insert(
    table: np.ndarray, used: np.ndarray, keys: np.ndarray, new: np.ndarray
) -> int:  # pragma: no cover
    mask = np.uint64(len(table) - 1)
    added = 0
    for i in range(len(keys)):
        k = keys[i]
        h = _mix(k) & mask
        while True:
            if not used[h]:
                used[h] = True
                table[h] = k
                added += 1
                if len(new):
                    new[i] = True
                break
            if table[h] == k:
                break
            h = (h + np.uint64(1)) & mask
    return added


_NONE = np.zeros(0, dtype=np.bool_)


class KeySet:
    """An exact growing set of uint64 keys; ``add`` returns how many keys were new."""

    def __init__(self, capacity: int = 1 << 12) -> None:
        cap = 1 << max(4, int(capacity - 1).bit_length())
        self._table = np.zeros(cap, dtype=np.uint64)
        self._used = np.zeros(cap, dtype=np.bool_)
        self._n = 0

    def __len__(self) -> int:
        return self._n

    def add(self, keys: np.ndarray) -> int:
        return self._add(keys, _NONE)

    def add_new(self, keys: np.ndarray) -> np.ndarray:
        """Add ``keys``; a mask of those that were not in the set (first occurrence only)."""
        new = np.zeros(len(keys), dtype=np.bool_)
        self._add(keys, new)
        return new

    def reserve(self, extra: int) -> None:
        """Grow so that ``extra`` more keys keep the load factor at most 1/2."""
        need = self._n + extra
        if need * 2 > len(self._table):
            cap = len(self._table)
            while need * 2 > cap:
                cap *= 2
            old = self._table[self._used]
            self._table = np.zeros(cap, dtype=np.uint64)
            self._used = np.zeros(cap, dtype=np.bool_)
            _insert(self._table, self._used, old, _NONE)

    def _add(self, keys: np.ndarray, new: np.ndarray) -> int:
        keys = np.ascontiguousarray(keys, dtype=np.uint64)
        self.reserve(len(keys))
        added = int(_insert(self._table, self._used, keys, new))
        self._n += added
        return added

    def keys(self) -> np.ndarray:
        return self._table[self._used]

    @property
    def nbytes(self) -> int:
        return self._table.nbytes + self._used.nbytes


@numba.njit(cache=True, nogil=True)
def _window_kernel(
    keys: np.ndarray,
    weights: np.ndarray,
    starts: np.ndarray,
    top_k: int,
    gtable: np.ndarray,
    gused: np.ndarray,
    use_global: bool,
    first: np.ndarray,
    topkeys: np.ndarray,
    topcnt: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    nw = len(starts) - 1
    active = np.zeros(nw, dtype=np.int64)
    new = np.zeros(nw, dtype=np.int64)
    ent = np.zeros(nw, dtype=np.float64)
    top = np.zeros(nw, dtype=np.float64)
    maxlen = 1
    for w in range(nw):
        maxlen = max(maxlen, starts[w + 1] - starts[w])
    cap = 16
    while cap < 2 * maxlen:
        cap *= 2
    ltab = np.zeros(cap, dtype=np.uint64)
    lcnt = np.zeros(cap, dtype=np.int64)
    lused = np.zeros(cap, dtype=np.bool_)
    slots = np.empty(maxlen, dtype=np.int64)
    lmask = np.uint64(cap - 1)
    gmask = np.uint64(len(gtable) - 1)
    for w in range(nw):
        ns = 0
        for i in range(starts[w], starts[w + 1]):
            k = keys[i]
            h = _mix(k) & lmask
            while True:
                if not lused[h]:
                    lused[h] = True
                    ltab[h] = k
                    lcnt[h] = weights[i]
                    slots[ns] = h
                    ns += 1
                    first[i] = True
                    break
                if ltab[h] == k:
                    lcnt[h] += weights[i]
                    break
                h = (h + np.uint64(1)) & lmask
        c = np.empty(ns, dtype=np.float64)
        tot = 0.0
        for j in range(ns):
            c[j] = lcnt[slots[j]]
            tot += c[j]
        if tot > 0:
            s = 0.0
            for j in range(ns):
                if c[j] > 0:
                    s += c[j] * np.log2(c[j])
            ent[w] = max(np.log2(tot) - s / tot, 0.0)
            order = np.argsort(c)
            m = min(ns, top_k)
            s_top = 0.0
            for j in range(m):
                sl = slots[order[ns - 1 - j]]
                topkeys[w, j] = ltab[sl]
                topcnt[w, j] = lcnt[sl]
                s_top += lcnt[sl]
            top[w] = s_top / tot
        active[w] = ns
        if use_global:
            added = 0
            for j in range(ns):
                k = ltab[slots[j]]
                h = _mix(k) & gmask
                while True:
                    if not gused[h]:
                        gused[h] = True
                        gtable[h] = k
                        added += 1
                        break
                    if gtable[h] == k:
                        break
                    h = (h + np.uint64(1)) & gmask
            new[w] = added
        for j in range(ns):
            lused[slots[j]] = False
    return active, new, ent, top


def window_stats(
    keys: np.ndarray, weights: np.ndarray, starts: np.ndarray, top_k: int, seen: KeySet | None
) -> tuple[np.ndarray, ...]:
    """Per window ``[starts[w], starts[w+1])`` of ``keys`` (each with a positive ``weight``):
    distinct keys, keys new to ``seen`` (added to it), entropy (bits), top-k share, a mask of
    each key's first event in its window, and each window's top-k keys and their counts (count
    0 where the window has fewer keys)."""
    first = np.zeros(len(keys), dtype=np.bool_)
    if seen is not None:
        seen.reserve(len(keys))
        gt, gu = seen._table, seen._used
    else:
        gt, gu = np.zeros(1, dtype=np.uint64), np.zeros(1, dtype=np.bool_)
    nwin = len(starts) - 1
    topkeys = np.zeros((nwin, top_k), dtype=np.uint64)
    topcnt = np.zeros((nwin, top_k), dtype=np.int64)
    active, new, ent, top = _window_kernel(
        np.ascontiguousarray(keys, dtype=np.uint64),
        np.ascontiguousarray(weights, dtype=np.int64),
        np.ascontiguousarray(starts, dtype=np.int64),
        int(top_k),
        gt,
        gu,
        seen is not None,
        first,
        topkeys,
        topcnt,
    )
    if seen is not None:
        seen._n += int(new.sum())
    return active, new, ent, top, first, topkeys, topcnt


__all__ = ["KeySet", "bucket_of", "mix64", "window_stats"]
