"""Compiled loops of the Pufferscale heuristic (Cheriere et al. 2020, Algorithms 1 and 2).

The greedy allocation is inherently sequential over buckets (each choice changes the state the
next one sees), so it is a numba kernel; the inner scan over candidate servers is a tight loop.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# Duration model codes shared with planner.py.
NETWORK = 0
STORAGE = 1
#: P(i) + P(i0) when i == i0: the paper's sum taken literally counts the server twice.
SAME_HOST_FACTOR = 2.0


@njit(cache=True)
def _duration(recv: float, sent: float, model: int, s_net: float, s_write: float, s_read: float) -> float:
    if model == NETWORK:
        return max(recv, sent) / s_net  # Eq. 3 (full duplex)
    # Eq. 21 as we read it: a device cannot read and write at once. Received bytes are
    # written, sent bytes are read (the paper's Eq. 21 swaps the two; its Eq. 22 does not).
    return recv / s_write + sent / s_read


@njit(cache=True)
def _penalty(
    load: float,
    data: float,
    dur: float,
    l_tw: float,
    d_tw: float,
    t_tw: float,
) -> float:
    # Eq. 15 as reconstructed: cubes of each objective over its (weighted) target; the
    # duration term has the factor 0.5.
    a = load / l_tw
    b = data / d_tw
    c = dur / t_tw
    return a * a * a + b * b * b + 0.5 * c * c * c


@njit(cache=True)
def fix_buckets(
    order: np.ndarray,
    host: np.ndarray,
    stays: np.ndarray,
    load: np.ndarray,
    size: np.ndarray,
    l_fix: float,
    d_fix: float,
    capacity: float,
    n_servers: int,
) -> np.ndarray:
    """Algorithm 1: on every server that stays, keep the longest prefix of its buckets (in
    ``order``, decreasing weighted norm) whose summed size <= ``d_fix`` and load <= ``l_fix``
    (and size <= capacity). Returns the target server of each bucket, -1 where not fixed."""
    target = np.full(host.shape[0], -1, np.int64)
    acc_l = np.zeros(n_servers)
    acc_d = np.zeros(n_servers)
    closed = np.zeros(n_servers, np.bool_)
    for k in range(order.shape[0]):
        j = order[k]
        i = host[j]
        if not stays[i] or closed[i]:
            continue
        nl = acc_l[i] + load[j]
        nd = acc_d[i] + size[j]
        if nl <= l_fix and nd <= d_fix and nd <= capacity:
            acc_l[i] = nl
            acc_d[i] = nd
            target[j] = i
        else:
            closed[i] = True  # a prefix: the first bucket that does not fit ends it
    return target


@njit(cache=True, fastmath={"nsz", "arcp", "contract", "afn", "reassoc"})  # no "ninf": inf marks full servers
def allocate_buckets(
    order: np.ndarray,
    host: np.ndarray,
    target: np.ndarray,
    stays: np.ndarray,
    load: np.ndarray,
    size: np.ndarray,
    l_tw: float,
    d_tw: float,
    t_tw: float,
    capacity: float,
    model: int,
    s_net: float,
    s_write: float,
    s_read: float,
    n_servers: int,
    same_host_factor: float = SAME_HOST_FACTOR,
) -> tuple[np.ndarray, int]:
    """Algorithm 2: the unfixed buckets in ``order`` each go to the staying server i that
    minimises P(i) + P(i0), both computed as if the bucket were on i (i0 its initial host).
    When i == i0 the sum is ``same_host_factor`` * P(i0). Returns the completed targets and
    -1, or the bucket that fits on no server (capacity) as the second value."""
    target = target.copy()
    acc_l = np.zeros(n_servers)
    acc_d = np.zeros(n_servers)
    recv = np.zeros(n_servers)
    sent = np.zeros(n_servers)
    # Candidates: staying servers only; the scan below is over these indices.
    cand = np.nonzero(stays)[0]
    m = cand.shape[0]
    c_l = np.zeros(m)
    c_d = np.zeros(m)
    c_r = np.zeros(m)
    c_s = np.zeros(m)
    pos = np.full(n_servers, -1, np.int64)
    for k in range(m):
        pos[cand[k]] = k
    for j in range(host.shape[0]):
        i = target[j]
        if i >= 0:
            acc_l[i] += load[j]
            acc_d[i] += size[j]
    for k in range(m):
        c_l[k] = acc_l[cand[k]]
        c_d[k] = acc_d[cand[k]]
    cost_buf = np.empty(m)
    has_cap = capacity < np.inf
    il = 1.0 / l_tw
    idd = 1.0 / d_tw
    it = 1.0 / t_tw
    inet = 1.0 / s_net
    iw = 1.0 / s_write
    ir = 1.0 / s_read
    for q in range(order.shape[0]):
        j = order[q]
        if target[j] >= 0:
            continue
        i0 = host[j]
        lj = load[j]
        sj = size[j]
        # Penalty of the source once the bucket has left it.
        p_src = _penalty(
            acc_l[i0],
            acc_d[i0],
            _duration(recv[i0], sent[i0] + sj, model, s_net, s_write, s_read),
            l_tw,
            d_tw,
            t_tw,
        )
        room = capacity - sj
        k0 = pos[i0]
        # Every candidate as a destination that receives the bucket (i != i0): one
        # branch-free pass that LLVM vectorises, then an argmin.
        if model == NETWORK:
            for k in range(m):
                a = (c_l[k] + lj) * il
                b = (c_d[k] + sj) * idd
                c = max(c_r[k] + sj, c_s[k]) * inet * it
                cost_buf[k] = a * a * a + b * b * b + 0.5 * c * c * c
        else:
            for k in range(m):
                a = (c_l[k] + lj) * il
                b = (c_d[k] + sj) * idd
                c = ((c_r[k] + sj) * iw + c_s[k] * ir) * it
                cost_buf[k] = a * a * a + b * b * b + 0.5 * c * c * c
        if has_cap:
            for k in range(m):
                if c_d[k] > room:
                    cost_buf[k] = np.inf
        if k0 >= 0:
            cost_buf[k0] = np.inf
        best = np.argmin(cost_buf) if m > 0 else -1
        best_cost = cost_buf[best] if m > 0 else np.inf
        best_cost += p_src
        # The initial host, if it stays: no transfer.
        if k0 >= 0 and c_d[k0] <= room:
            stay = same_host_factor * _penalty(
                c_l[k0] + lj,
                c_d[k0] + sj,
                _duration(c_r[k0], c_s[k0], model, s_net, s_write, s_read),
                l_tw,
                d_tw,
                t_tw,
            )
            if stay <= best_cost:
                best_cost = stay
                best = k0
        if best < 0 or best_cost == np.inf:
            return target, j
        i = cand[best]
        target[j] = i
        c_l[best] += lj
        c_d[best] += sj
        acc_l[i] += lj
        acc_d[i] += sj
        if i != i0:
            c_r[best] += sj
            recv[i] += sj
            sent[i0] += sj
            if k0 >= 0:
                c_s[k0] += sj
    return target, -1
