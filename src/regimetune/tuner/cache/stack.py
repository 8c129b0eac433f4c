"""LRU stack distances in one O(N log N) pass (Mattson et al.'s stack property).

The stack distance of a request is the number of *distinct* keys referenced since the
previous reference to the same key (0: the key was the last one referenced); a first
reference has distance ``COLD``. An LRU cache that holds ``n`` keys holds exactly the ``n``
most recently used ones, so a request hits it iff its distance is ``< n``: one pass gives
the hits of every capacity at once.

One numba kernel reads the keys directly: a table indexed by the key (small non-negative
keys) or an open-addressing hash table holds each key's latest *position*. Positions are
marked in a bitmap, one bit per position; the distance of a request whose key was last at
``p`` is the number of marks after ``p`` = (distinct keys so far) - (marks up to ``p``).
Marks up to ``p`` are the bits of ``p``'s 64-bit word below it plus, from a binary tree of
per-word counts (leaves = words), the marks of all earlier words: one leaf-to-root walk
counts them and removes ``p``'s mark. The word being filled is kept out of the tree until it
is full, so marking a new position is one bit. Positions are renumbered when they run out
(only each key's latest position is live), which keeps the bitmap (1 bit) and tree
(1 int32 per 64 positions) small enough to stay in cache, and the table entries of keys a
few requests ahead are prefetched: a table hit at random is what costs most.

>>> d = stack_distances([1, 2, 1, 3, 2, 2])
>>> d[2].item(), d[4].item(), d[5].item()
(1, 2, 0)
>>> bool(stack_distances([5])[0] == COLD)
True
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
import numpy.typing as npt
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from regimetune.models.errors import InputError

COLD = np.iinfo(np.int64).max
"""Distance of a first reference: larger than any capacity, so it always misses."""

_MIN_CAP = 1 << 16
"""Fewest positions between renumberings (tests pass less to exercise them)."""

_MAX_KEYS = 1 << 30
"""Most distinct keys: positions and tree counts are int32."""

_AHEAD = 16
"""Requests ahead whose table entry is prefetched. (Prefetching their bitmap word and tree
leaf too, which needs the entry itself, measured slower.)"""


def _popcount_typer(typingctx, x):  # pragma: no cover - compiled
    """``_popcount(x)``: the set bits of a uint64 (one instruction where the CPU has it)."""
    if not isinstance(x, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        return builder.ctpop(args[0])

    return types.int64(types.uint64), codegen


def _prefetch_typer(typingctx, arr, idx):  # pragma: no cover - compiled
    """``_prefetch(arr, idx)``: hint the cache line of element ``idx`` (flat index) of the
    C-contiguous ``arr``."""
    if not isinstance(arr, types.Array) or not isinstance(idx, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        ptr = builder.gep(ary.data, [args[1]])
        i8p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
        # the typed-pointer name: LLVMs with opaque pointers upgrade it to llvm.prefetch.p0
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0i8")
        builder.call(fn, [builder.bitcast(ptr, i8p), i32(0), i32(3), i32(1)])  # read, keep
        return context.get_dummy_value()

    return types.void(arr, idx), codegen


_popcount: Any = intrinsic(_popcount_typer)
_prefetch: Any = intrinsic(_prefetch_typer)


@numba.njit(cache=True, nogil=True)
def _marks(cap: int, t: int):  # pragma: no cover - compiled
    """Bitmap of positions ``0..cap`` with ``1..t`` marked, and the tree of mark counts over
    its words before ``t``'s (leaves at ``m..2m-1``, node ``x`` = sum of ``2x`` and ``2x+1``)."""
    nw = (cap >> 6) + 1
    m = 1
    while m < nw:
        m <<= 1
    bits = np.zeros(nw, dtype=np.uint64)
    tree = np.zeros(2 * m, dtype=np.int32)
    for w in range((t + 1) >> 6):
        bits[w] = np.uint64(0xFFFFFFFFFFFFFFFF)
    r = (t + 1) & 63
    if r:
        bits[(t + 1) >> 6] = (np.uint64(1) << np.uint64(r)) - np.uint64(1)
    bits[0] &= ~np.uint64(1)  # position 0 means "none"
    for w in range(t >> 6):
        tree[m + w] = _popcount(bits[w])
    for x in range(m - 1, 0, -1):
        tree[x] = tree[2 * x] + tree[2 * x + 1]
    return bits, tree, m


@numba.njit(cache=True, nogil=True)
def _unmark(bits, tree, m, p, wt, distinct):  # pragma: no cover
    """Remove the mark at ``p`` and return the number of marks after it (``wt``: the word
    being filled, not in the tree yet)."""
    wp = p >> 6
    b = np.uint64(p & 63)
    word = bits[wp]
    bits[wp] = word & ~(np.uint64(1) << b)
    if wp == wt:  # marks after p all sit in its own word
        return _popcount((word >> b) >> np.uint64(1))
    s = _popcount(word << (np.uint64(63) - b))  # marks in p's word up to p, p included
    x = m + wp
    while x > 1:  # add each left sibling on the way up (branch-free), take p's mark off
        s += tree[x ^ 1] & -(x & 1)
        tree[x] -= 1
        x >>= 1
    return distinct - s


@numba.njit(cache=True, nogil=True)
def _close_word(bits, tree, m, w):  # pragma: no cover - compiled
    c = _popcount(bits[w])
    x = m + w
    while x >= 1:
        tree[x] += c
        x >>= 1


@numba.njit(cache=True, nogil=True)
def _renumber(last, bits) -> None:  # pragma: no cover - compiled
    """Replace every live position in ``last`` (0: none) by its rank among the marks."""
    nw = bits.shape[0]
    before = np.empty(nw, dtype=np.int64)
    c = 0
    for w in range(nw):
        before[w] = c
        c += _popcount(bits[w])
    for k in range(last.shape[0]):
        q = np.int64(last[k])
        if q > 0:
            last[k] = before[q >> 6] + _popcount(bits[q >> 6] << np.uint64(63 - (q & 63)))


@numba.njit(cache=True, nogil=True)
def _new_cap(cap: int, distinct: int, table: int, n: int, min_cap: int) -> int:  # pragma: no cover
    # At least twice the live positions free, and enough that renumbering (O(table + cap/64))
    # costs O(1) per request.
    if distinct > _MAX_KEYS:
        raise ValueError("too many distinct keys")
    return min(n, (1 << 31) - 1, max(cap, min_cap, 3 * distinct + table // 8))


@numba.njit(cache=True, nogil=True)
def _distances_direct(keys, out, last, min_cap: int) -> None:  # pragma: no cover - compiled
    # ``last[key]``: the key's latest position (0: none yet); keys index it directly.
    n = keys.shape[0]
    cap = _new_cap(0, 0, last.shape[0], n, min_cap)
    bits, tree, m = _marks(cap, 0)
    distinct = 0
    t = 0  # last position used
    wt = 0  # its word
    for i in range(n):
        if i + _AHEAD < n:
            _prefetch(last, keys[i + _AHEAD])
        if t == cap:
            _renumber(last, bits)
            t = distinct
            cap = _new_cap(cap, distinct, last.shape[0], n, min_cap)
            bits, tree, m = _marks(cap, t)
            wt = t >> 6
        k = keys[i]
        p = np.int64(last[k])
        if p == 0:
            out[i] = COLD
            distinct += 1
        else:
            out[i] = _unmark(bits, tree, m, p, wt, distinct)
        t += 1
        if (t >> 6) != wt:
            _close_word(bits, tree, m, wt)
            wt = t >> 6
        bits[wt] |= np.uint64(1) << np.uint64(t & 63)
        last[k] = t


_FIB = np.uint64(11400714819323198485)


@numba.njit(cache=True, nogil=True)
def _slot(key, hb):  # pragma: no cover - compiled
    return np.int64((key * _FIB) >> np.uint64(64 - hb))  # Fibonacci hashing


@numba.njit(cache=True, nogil=True)
def _distances_hashed(keys, out, tab, hb: int, st, bits, tree, min_cap: int, n_max: int):  # pragma: no cover
    # Open addressing, linear probing; a row of ``tab`` is (key, latest position), position 0
    # marks an empty row. Runs from request ``st[0]`` until the end or until the table is half
    # full (the caller then hands over one twice as large: numpy allocates it, with huge
    # pages where the OS allows, which a table hit at random needs); the rest of the state
    # is in ``st`` (distinct, t, wt, cap, m) and the returned bitmap and tree. ``n_max``
    # bounds the requests of the whole stream (it sizes the position space).
    n = keys.shape[0]
    distinct, t, wt, cap, m = st[1], st[2], st[3], st[4], st[5]
    mask = (1 << hb) - 1
    i = st[0]
    while i < n:
        if 2 * distinct >= tab.shape[0]:
            break
        if i + _AHEAD < n:
            _prefetch(tab, 2 * _slot(keys[i + _AHEAD], hb))
        if t == cap:
            _renumber(tab[:, 1], bits)
            t = distinct
            cap = _new_cap(cap, distinct, tab.shape[0], n_max, min_cap)
            bits, tree, m = _marks(cap, t)
            wt = t >> 6
        k = keys[i]
        h = _slot(k, hb)
        while tab[h, 1] != 0 and tab[h, 0] != k:
            h = (h + 1) & mask
        p = np.int64(tab[h, 1])
        if p == 0:
            tab[h, 0] = k
            out[i] = COLD
            distinct += 1
        else:
            out[i] = _unmark(bits, tree, m, p, wt, distinct)
        t += 1
        if (t >> 6) != wt:
            _close_word(bits, tree, m, wt)
            wt = t >> 6
        bits[wt] |= np.uint64(1) << np.uint64(t & 63)
        tab[h, 1] = t
        i += 1
    st[0], st[1], st[2], st[3], st[4], st[5] = i, distinct, t, wt, cap, m
    return bits, tree


@numba.njit(cache=True, nogil=True)
def _rehash(old, new, hb: int) -> None:  # pragma: no cover - compiled
    mask = (1 << hb) - 1
    for r in range(old.shape[0]):
        if r + _AHEAD < old.shape[0]:
            _prefetch(new, 2 * _slot(old[r + _AHEAD, 0], hb))
        if old[r, 1] != 0:
            h = _slot(old[r, 0], hb)
            while new[h, 1] != 0:
                h = (h + 1) & mask
            new[h, 0] = old[r, 0]
            new[h, 1] = old[r, 1]


class StackDistances:
    """LRU stack distances of a stream of keys, chunk by chunk: :meth:`push` returns the
    distances of a chunk's requests as if every earlier chunk came first (``COLD`` for a first
    reference). Memory grows with the distinct keys, not the requests. ``n_max`` bounds the
    requests of the whole stream (default: as many as int32 positions allow).

    >>> s = StackDistances()
    >>> s.push(np.array([1, 2], dtype=np.uint64)).tolist()[1] == COLD, s.push(np.array([1])).tolist()
    (True, [1])
    """

    def __init__(self, *, n_max: int = (1 << 31) - 1, min_cap: int = _MIN_CAP) -> None:
        self.n_max, self.min_cap = int(n_max), int(min_cap)
        self._hb = 12
        self._tab = np.zeros((1 << self._hb, 2), dtype=np.uint64)
        cap = _new_cap(0, 0, len(self._tab), self.n_max, self.min_cap)
        self._bits, self._tree, m = _marks(cap, 0)
        self._st = np.array([0, 0, 0, 0, cap, m], dtype=np.int64)

    @property
    def n_keys(self) -> int:
        """Distinct keys so far."""
        return int(self._st[1])

    def push(self, keys: npt.ArrayLike) -> np.ndarray:
        arr = _as_keys(keys)
        k = np.ascontiguousarray(
            arr.astype(np.uint64 if arr.dtype.kind == "u" else np.int64, copy=False).view(np.uint64)
        )
        out = np.empty(len(k), dtype=np.int64)
        self._st[0] = 0
        while True:
            self._bits, self._tree = _call(
                _distances_hashed, k, out, self._tab, self._hb, self._st, self._bits, self._tree,
                self.min_cap, self.n_max,
            )  # fmt: skip
            if self._st[0] >= len(k):
                return out
            self._hb += 1
            grown = np.zeros((1 << self._hb, 2), dtype=np.uint64)
            _rehash(self._tab, grown, self._hb)
            self._tab = grown


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


def _as_keys(keys: npt.ArrayLike) -> np.ndarray:
    arr = np.asarray(keys)
    if arr.ndim != 1:
        raise InputError(f"keys must be one-dimensional, got shape {arr.shape}")
    if len(arr) and arr.dtype.kind not in "iu":
        raise InputError(f"keys must be integers, got dtype {arr.dtype}")
    return arr


def _stack_distances(keys: npt.ArrayLike, min_cap: int = _MIN_CAP) -> np.ndarray:
    arr = _as_keys(keys)
    n = len(arr)
    if n == 0:
        return np.empty(0, dtype=np.int64)
    if arr.dtype.kind == "u" or arr.min() >= 0:
        top = int(arr.max())
        if top < max(4 * n, 1 << 16):  # small keys: a direct table beats hashing
            k = arr if arr.dtype == np.uint64 else arr.astype(np.int64, copy=False)
            out = np.empty(n, dtype=np.int64)
            last = np.zeros(top + 1, dtype=np.int32)
            _call(_distances_direct, np.ascontiguousarray(k), out, last, min_cap)
            return out
    return StackDistances(n_max=n, min_cap=min_cap).push(arr)


def _call(kernel, *args):
    try:
        return kernel(*args)
    except ValueError as e:  # the kernel's distinct-key limit
        raise InputError(f"more than {_MAX_KEYS} distinct keys: too many for the simulator") from e


def stack_distances(keys: npt.ArrayLike) -> np.ndarray:
    """LRU stack distance of every request of ``keys`` (any integer keys), ``COLD`` for a
    key's first reference. ``int64``, one per request."""
    return _stack_distances(keys)


def warm_up() -> None:
    """Compile the kernels (numba caches them on disk afterwards)."""
    for dtype in (np.uint64, np.int64):
        stack_distances(np.array([1, 2, 1], dtype=dtype))
    stack_distances(np.array([1 << 40, 2, 1 << 40], dtype=np.int64))


__all__ = ["COLD", "StackDistances", "dense_ids", "stack_distances", "warm_up"]
