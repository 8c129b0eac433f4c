"""Compiled loops of the Pufferscale heuristic (Cheriere et al. 2020, Algorithms 1 and 2),
and of the release that replaces Algorithm 1 in the planner's default heuristic.

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


#: Weight of the squared relative excess over the capacity in the release distance.
OVER_CAPACITY_WEIGHT = 1e6


@njit(cache=True)
def _distance(r_load: float, r_data: float, over_cap: float) -> float:
    # Squared distance of a server to the target point (residuals relative to the weighted
    # targets); bytes over the capacity weigh so much that any release reducing them wins.
    return r_load * r_load + r_data * r_data + OVER_CAPACITY_WEIGHT * over_cap * over_cap


@njit(cache=True)
def release_buckets(
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
    """Fixing by release: every server that stays keeps all its buckets unless it is over a
    target (``l_fix``, ``d_fix``) or the capacity; one that is over releases, one at a time,
    the bucket whose leaving brings it closest to the target point (the squared distance
    ``(load/l_fix - 1)^2 + (data/d_fix - 1)^2``), and stops once it is within the targets or
    no release brings it closer. A server over on load only thus releases the buckets with
    much load and few bytes, one over on both the ones whose mix matches its excess, largest
    first. Of equal choices the bucket last in ``order`` leaves (the paper keeps the largest
    norms). Returns each bucket's fixed server, -1
    where released (or on a leaving server)."""
    n = host.shape[0]
    target = np.full(n, -1, np.int64)
    has_cap = capacity < np.inf
    # the buckets of each server, in ``order``
    count = np.zeros(n_servers + 1, np.int64)
    for j in range(n):
        count[host[j] + 1] += 1
    start = np.cumsum(count)
    fill = start[:-1].copy()
    by_server = np.empty(n, np.int64)
    for k in range(order.shape[0]):
        j = order[k]
        by_server[fill[host[j]]] = j
        fill[host[j]] += 1
    for i in range(n_servers):
        if not stays[i]:
            continue
        lo, hi = start[i], start[i + 1]
        tot_l = 0.0
        tot_d = 0.0
        for k in range(lo, hi):
            j = by_server[k]
            target[j] = i
            tot_l += load[j]
            tot_d += size[j]
        r_l = tot_l / l_fix - 1.0
        r_d = tot_d / d_fix - 1.0
        over = max(tot_d / capacity - 1.0, 0.0) if has_cap else 0.0
        while r_l > 0.0 or r_d > 0.0 or over > 0.0:
            best = -1
            now = _distance(r_l, r_d, over)
            best_f = now
            for k in range(lo, hi):
                j = by_server[k]
                if target[j] < 0:
                    continue
                o = max((tot_d - size[j]) / capacity - 1.0, 0.0) if has_cap else 0.0
                f = _distance(r_l - load[j] / l_fix, r_d - size[j] / d_fix, o)
                if f < now and f <= best_f:  # ties: the last in order, so the first stays
                    best_f = f
                    best = j
            if best < 0:
                break
            target[best] = -1
            tot_l -= load[best]
            tot_d -= size[best]
            r_l -= load[best] / l_fix
            r_d -= size[best] / d_fix
            over = max(tot_d / capacity - 1.0, 0.0) if has_cap else 0.0
    return target


@njit(cache=True)
def _closer(acc_l: float, acc_d: float, lj: float, sj: float, il: float, idd: float) -> bool:
    # Whether a server holding (acc_l, acc_d) is closer to its target point with the bucket.
    r_l = acc_l * il - 1.0
    r_d = acc_d * idd - 1.0
    a = lj * il
    b = sj * idd
    return (r_l + a) * (r_l + a) + (r_d + b) * (r_d + b) < r_l * r_l + r_d * r_d


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
    first_fit: bool = False,
) -> tuple[np.ndarray, int]:
    """Algorithm 2: the unfixed buckets in ``order`` each go to the staying server i that
    minimises P(i) + P(i0), both computed as if the bucket were on i (i0 its initial host).
    When i == i0 the sum is ``same_host_factor`` * P(i0). With ``first_fit``, only servers
    where the bucket fits within the weighted targets compete, if there is one. Returns the
    completed targets and -1, or the bucket that fits on no server (capacity) as the second
    value."""
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
        if first_fit:  # the change of the total penalty: less what each server has now
            p_src -= _penalty(
                acc_l[i0],
                acc_d[i0],
                _duration(recv[i0], sent[i0], model, s_net, s_write, s_read),
                l_tw,
                d_tw,
                t_tw,
            )
            for k in range(m):
                cost_buf[k] -= _penalty(
                    c_l[k], c_d[k], _duration(c_r[k], c_s[k], model, s_net, s_write, s_read), l_tw, d_tw, t_tw
                )
        if has_cap:
            for k in range(m):
                if c_d[k] > room:
                    cost_buf[k] = np.inf
        if k0 >= 0:
            cost_buf[k0] = np.inf
        stay_fits = k0 >= 0 and _closer(c_l[k0], c_d[k0], lj, sj, il, idd)
        fits = False
        if first_fit:
            for k in range(m):
                if cost_buf[k] < np.inf and _closer(c_l[k], c_d[k], lj, sj, il, idd):
                    fits = True
                    break
            if stay_fits and c_d[k0] <= room:
                fits = True
            if fits:
                for k in range(m):
                    if not _closer(c_l[k], c_d[k], lj, sj, il, idd):
                        cost_buf[k] = np.inf
        best = np.argmin(cost_buf) if m > 0 else -1
        best_cost = cost_buf[best] if m > 0 else np.inf
        best_cost += p_src
        # The initial host, if it stays: no transfer.
        if k0 >= 0 and c_d[k0] <= room and (stay_fits or not fits):
            dur0 = _duration(c_r[k0], c_s[k0], model, s_net, s_write, s_read)
            stay = _penalty(c_l[k0] + lj, c_d[k0] + sj, dur0, l_tw, d_tw, t_tw)
            if first_fit:
                stay -= _penalty(c_l[k0], c_d[k0], dur0, l_tw, d_tw, t_tw)
            else:
                stay *= same_host_factor
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
