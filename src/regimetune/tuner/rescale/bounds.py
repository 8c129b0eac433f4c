"""Lower bounds on the duration of a rescaling (Cheriere & Antoniu, BigData 2017).

Without replication (r = 1, R(N, x) = 1), decommissioning x of N nodes that each hold D takes
at least ``x D / (S_net (N - x))`` when the network is the bottleneck (their Eq. 3) and their
Eq. 9 when storage is. On an actual placement we use the same arguments with the real bytes:
everything on the leaving servers must be received by the N - x others, and each leaving
server must send all it holds (with r = 1 no other node holds a copy to send instead).
"""

from __future__ import annotations

import numpy as np

from regimetune.models.errors import InputError


def cheriere_decommission_time(
    n: int,
    x: int,
    data_per_node: float,
    *,
    model: str = "network",
    net_bandwidth: float = 1.0,
    write_bandwidth: float = 1.0,
    read_bandwidth: float = 1.0,
    t0: float = 0.0,
) -> float:
    """Cheriere & Antoniu's model of the fastest decommission of ``x`` of ``n`` nodes holding
    ``data_per_node`` each, RAM-like storage without replication (R = 1).

    >>> cheriere_decommission_time(20, 4, 1.0, net_bandwidth=1.25)  # 4/(1.25*16)
    0.2
    """
    if not 0 < x < n:
        raise InputError(f"need 0 < x < n, got x={x}, n={n}")
    moved = x * data_per_node
    if model == "network":
        return moved / (net_bandwidth * (n - x)) + t0  # Eq. 3
    r = 1.0  # Eq. 4 for RAM-based storage / no replication
    threshold = n * write_bandwidth / (r * read_bandwidth + write_bandwidth)  # Eq. 8
    if x >= threshold:  # Eq. 9, upper case
        return moved / (write_bandwidth * (n - x)) + t0
    return moved * (write_bandwidth + r * read_bandwidth) / (n * r * read_bandwidth * write_bandwidth) + t0


def placement_lower_bound(
    before: np.ndarray,
    stays: np.ndarray,
    n_before: int,
    *,
    model: str = "network",
    net_bandwidth: float = 1.0,
    write_bandwidth: float = 1.0,
    read_bandwidth: float = 1.0,
) -> float:
    """Lower bound (seconds) of an operation on a real placement; ``before`` holds each
    server's bytes before, ``stays`` marks I \\ I-, servers at index >= ``n_before`` are new.

    Decommission: a bound on every valid plan (Cheriere & Antoniu with actual bytes).
    Commission: leaving the new servers empty is valid and takes no time, so the bound is the
    one of reaching data balance: each new server must receive D_t and each old server must
    send what it holds above D_t.

    >>> placement_lower_bound(np.array([4.0, 4.0, 4.0]), np.array([True, True, False]), 3)
    4.0
    """
    before = np.asarray(before, dtype=np.float64)
    stays = np.asarray(stays, dtype=np.bool_)
    n_after = int(stays.sum())
    total = float(before.sum())
    if n_after == 0:
        raise InputError("no server stays")
    leaving = ~stays
    if leaving.any():
        moved = float(before[leaving].sum())
        biggest = float(before[leaving].max())
        if model == "network":
            return max(moved / n_after, biggest) / net_bandwidth
        # Storage: remaining servers must write `moved`; the whole cluster must read and
        # write it (Cheriere Eq. 7/9 with R = 1); each leaving server must read all it holds.
        n = before.shape[0]
        return max(
            moved / (write_bandwidth * n_after),
            moved * (1 / read_bandwidth + 1 / write_bandwidth) / n,
            biggest / read_bandwidth,
        )
    n_new = before.shape[0] - n_before
    if n_new <= 0:
        return 0.0
    d_t = total / n_after
    excess = float(np.maximum(before[:n_before] - d_t, 0.0).max(initial=0.0))
    spread = n_new * d_t / n_before  # the new servers' share, sent by n_before senders
    if model == "network":
        return max(d_t, excess, spread) / net_bandwidth
    return max(d_t / write_bandwidth, max(excess, spread) / read_bandwidth)
