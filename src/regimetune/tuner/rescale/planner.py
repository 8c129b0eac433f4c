"""The Pufferscale rescaling planner (Cheriere et al., CCGRID 2020, Section V).

Three steps: targets (Eq. 8-11, 16) and their weighted forms (Eq. 17-19); fixing the buckets
that stay (Algorithm 1); greedy allocation of the rest in decreasing weighted norm (Eq. 20)
to the server minimising P(i) + P(i0) (Algorithm 2, penalty Eq. 15). Readings of the paper:

- Eq. 19 prints ``T_tw = D_T / W_T``; we follow the text ("the target duration is simply
  scaled by its weight"): ``T_tw = T_t / W_T``.
- Eq. 15 is garbled in the extraction; we use the digest's reconstruction
  ``P(i) = (load_i/L_tw)^3 + (data_i/D_tw)^3 + 0.5 (max(recv_i, sent_i)/(S_net T_tw))^3``.
- Algorithm 1 prints the unweighted targets and norm; Section V-C says the weights adjust the
  targets and the norm, so fixing uses L_tw, D_tw and N_w (identical for W = (1, 1, 1)).
- When the candidate i is the initial host i0, the sum P(i) + P(i0) is taken literally: the
  server's penalty (with the bucket, no transfer) counts twice. Counting it once biases the
  heuristic towards leaving buckets in place (old servers kept ~1.6 L_t after a commission of
  128 -> 2,048 after warm-up, L_max/L_t = 2.1 under LT); counting it twice gives 1.04 there.
  Minimising the change of the total penalty instead gives similar figures; we keep the
  paper's literal rule.
- Storage bottleneck (VIII-A): Eq. 21 divides sent bytes by S_write and received bytes by
  S_read, Eq. 22 the other way round; we follow Eq. 22 (sending reads, receiving writes).

Two heuristics share the targets, the penalty and the order (``heuristic=``):

- ``"paper"``: Algorithms 1 and 2 as printed.
- ``"release"`` (the default) changes what stays and where the rest may go. Algorithm 1 keeps
  the longest prefix of a server's buckets (by decreasing N_w) that fits under both targets,
  so a server over its load target but under its data target (bytes and load
  anti-correlated, as in a Redis Cluster whose large values are not its hot ones) fills its
  load with its first buckets and gives away the bytes it needed; every server over a target
  then sheds its whole tail, and the buckets cross between old servers. Here a server within
  both targets keeps every bucket; one over a target releases, one at a time, the bucket whose
  leaving brings it closest to the target point (squared distance of load/L_tw and
  data/D_tw to 1), until it is within the targets or no release helps. A server over on load
  only thus gives its hot, small buckets; one over on both gives the mix of its excess,
  largest first (few slots for the bytes that must move anyway). Algorithm 2 then allocates
  the released buckets in decreasing N_w, by the least P(i) + P(i0) among the servers where
  the bucket fits within both weighted targets, or among all when it fits nowhere (the
  paper's rule). Data moves only from servers over a target, and about as much as their
  excess; docs/rescale-planner.md has the figures.

The public entry is :func:`plan_rescale`; :func:`plan_arrays` is the array-level core used by
the campaign simulator and the benchmark.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from regimetune.models.errors import InfeasibleError, InputError
from regimetune.models.rescale import (
    Bucket,
    Migration,
    PlanMetrics,
    PufferscaleWeights,
    RescaleKind,
    RescaleOperation,
    RescalePlan,
)
from regimetune.tuner.rescale import _kernel
from regimetune.tuner.rescale.bounds import placement_lower_bound

Model = Literal["network", "storage"]
Heuristic = Literal["paper", "release"]

#: Default per-node bandwidth, bytes/s: 10 Gb/s, the HEPnOS testbed's NICs (paper VII-D).
DEFAULT_NET_BANDWIDTH = 1.25e9
#: Default storage speeds, bytes/s, for the storage-bottleneck model (VIII-A).
DEFAULT_WRITE_BANDWIDTH = 0.5e9
DEFAULT_READ_BANDWIDTH = 1.0e9


@dataclass(frozen=True, slots=True)
class Targets:
    """Eq. 8-11, 16 and their weighted forms Eq. 17-19."""

    l_t: float
    d_t: float
    t_t: float
    l_i: float
    d_i: float
    l_tw: float
    d_tw: float
    t_tw: float


@dataclass(frozen=True, slots=True)
class ArrayPlan:
    """A plan over server indices: ``target[j]`` is the index of bucket j's new host."""

    target: np.ndarray
    targets: Targets
    l_max: float
    d_max: float
    t_max: float
    t_lower_bound: float
    bytes_moved: float


def compute_targets(
    total_load: float,
    total_size: float,
    n_before: int,
    n_after: int,
    decommission: bool,
    weights: PufferscaleWeights,
    *,
    model: Model = "network",
    net_bandwidth: float = DEFAULT_NET_BANDWIDTH,
    write_bandwidth: float = DEFAULT_WRITE_BANDWIDTH,
    read_bandwidth: float = DEFAULT_READ_BANDWIDTH,
) -> Targets:
    """Targets of an operation from ``n_before`` = |I \\ I+| to ``n_after`` = |I \\ I-| servers.

    >>> t = compute_targets(8.0, 8.0, 2, 4, False, PufferscaleWeights(), net_bandwidth=1.0)
    >>> (t.l_t, t.d_t, t.d_i, t.t_t)
    (2.0, 2.0, 4.0, 2.0)
    """
    l_t = total_load / n_after  # Eq. 8
    d_t = total_size / n_after  # Eq. 9
    d_i = total_size / n_before  # Eq. 10
    l_i = total_load / n_before  # Eq. 16
    if model == "network":  # Eq. 11
        t_t = max(abs(d_t - d_i), d_i if decommission else d_t) / net_bandwidth
    elif decommission:  # Eq. 22, upper case: remaining servers write, leaving ones read
        t_t = max(abs(d_t - d_i) / write_bandwidth, d_i / read_bandwidth)
    else:  # Eq. 22, lower case (the paper prints |D_i - D_i|, a typo for |D_i - D_t|)
        t_t = max(abs(d_i - d_t) / read_bandwidth, d_t / write_bandwidth)
    w_l, w_d, w_t = weights.w_load, weights.w_data, weights.w_time
    if w_t < 1:  # Eq. 17-18
        l_tw, d_tw = l_t / w_l, d_t / w_d
    else:
        l_tw = ((1 - 1 / w_t) * l_i + l_t / w_t) / w_l
        d_tw = ((1 - 1 / w_t) * d_i + d_t / w_t) / w_d
    t_tw = t_t / w_t  # Eq. 19 (read T_t for the printed D_T)
    return Targets(l_t, d_t, t_t, l_i, d_i, l_tw, d_tw, t_tw)


#: Smallest target the penalties divide by: below it, their inverse cubed overflows.
_TINY_TARGET = 1e-150


def _positive(x: float) -> float:
    # A target of zero (no load, or no data, at all) would divide by zero, and one of a few
    # subnormal bytes (seen from a property test) overflows to inf and leaves no server
    # choosable; a floor gives the same choices, since the numerators are that small too.
    return max(x, _TINY_TARGET)


def plan_arrays(
    load: np.ndarray,
    size: np.ndarray,
    host: np.ndarray,
    stays: np.ndarray,
    n_before: int,
    weights: PufferscaleWeights,
    *,
    model: Model = "network",
    net_bandwidth: float = DEFAULT_NET_BANDWIDTH,
    write_bandwidth: float = DEFAULT_WRITE_BANDWIDTH,
    read_bandwidth: float = DEFAULT_READ_BANDWIDTH,
    capacity: float | None = None,
    heuristic: Heuristic = "release",
) -> ArrayPlan:
    """The heuristic over arrays. Servers are indices ``0..len(stays)-1``; ``host[j]`` is
    bucket j's initial server; ``stays`` marks the servers of I \\ I-; ``n_before`` counts
    the servers holding data before (|I \\ I+|); ``heuristic`` is ``"release"`` or
    ``"paper"`` (module docstring). Raises InfeasibleError when the data does not fit. Checks
    of ids and shapes are :func:`plan_rescale`'s job."""
    load = np.ascontiguousarray(load, dtype=np.float64)
    size = np.ascontiguousarray(size, dtype=np.float64)
    host = np.ascontiguousarray(host, dtype=np.int64)
    stays = np.ascontiguousarray(stays, dtype=np.bool_)
    n_servers = int(stays.shape[0])
    n_after = int(stays.sum())
    if n_after == 0:
        raise InfeasibleError("the operation would leave no server to hold the data")
    decommission = n_after < n_servers
    cap = np.inf if capacity is None else float(capacity)
    total_size = float(size.sum())
    if capacity is not None:
        if size.size and float(size.max()) > cap:
            j = int(np.argmax(size))
            raise InfeasibleError(
                f"bucket #{j} ({size[j]:.6g} B) is larger than a server's capacity ({cap:.6g} B)"
            )
        if total_size > cap * n_after:
            raise InfeasibleError(
                f"{total_size:.6g} B of data do not fit on {n_after} servers of capacity {cap:.6g} B"
            )
    tg = compute_targets(
        float(load.sum()),
        total_size,
        n_before,
        n_after,
        decommission,
        weights,
        model=model,
        net_bandwidth=net_bandwidth,
        write_bandwidth=write_bandwidth,
        read_bandwidth=read_bandwidth,
    )
    s_load = _positive(float(load.sum()))
    s_size = _positive(total_size)
    norm = np.hypot(weights.w_load * load / s_load, weights.w_data * size / s_size)  # Eq. 20
    order = np.argsort(-norm, kind="stable").astype(np.int64)
    l_tw, d_tw, t_tw = _positive(tg.l_tw), _positive(tg.d_tw), _positive(tg.t_tw)
    if heuristic == "paper":
        fixed = _kernel.fix_buckets(order, host, stays, load, size, l_tw, d_tw, cap, n_servers)
    else:
        fixed = _kernel.release_buckets(order, host, stays, load, size, l_tw, d_tw, cap, n_servers)
    code = _kernel.NETWORK if model == "network" else _kernel.STORAGE
    target, failed = _kernel.allocate_buckets(
        order,
        host,
        fixed,
        stays,
        load,
        size,
        l_tw,
        d_tw,
        t_tw,
        cap,
        code,
        float(net_bandwidth),
        float(write_bandwidth),
        float(read_bandwidth),
        n_servers,
        _kernel.SAME_HOST_FACTOR,
        heuristic == "release",
    )
    if failed >= 0:
        raise InfeasibleError(
            f"the heuristic found no server with room for bucket #{failed} ({size[failed]:.6g} B) "
            f"under capacity {cap:.6g} B; nothing was moved"
        )
    return _evaluate(
        load, size, host, target, stays, tg, n_before, model, net_bandwidth, write_bandwidth, read_bandwidth
    )


def server_totals(
    load: np.ndarray, size: np.ndarray, host: np.ndarray, target: np.ndarray, n_servers: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per-server load and data after the plan, and bytes received and sent."""
    moved = target != host
    srv_load = np.bincount(target, weights=load, minlength=n_servers)
    srv_data = np.bincount(target, weights=size, minlength=n_servers)
    recv = np.bincount(target[moved], weights=size[moved], minlength=n_servers)
    sent = np.bincount(host[moved], weights=size[moved], minlength=n_servers)
    return srv_load, srv_data, recv, sent


def durations(
    recv: np.ndarray,
    sent: np.ndarray,
    model: Model,
    net_bandwidth: float,
    write_bandwidth: float,
    read_bandwidth: float,
) -> np.ndarray:
    """Per-server transfer time: Eq. 3 (network) or Eq. 21 as read with Eq. 22 (storage)."""
    if model == "network":
        return np.maximum(recv, sent) / net_bandwidth
    return recv / write_bandwidth + sent / read_bandwidth


def _evaluate(
    load: np.ndarray,
    size: np.ndarray,
    host: np.ndarray,
    target: np.ndarray,
    stays: np.ndarray,
    tg: Targets,
    n_before: int,
    model: Model,
    net_bandwidth: float,
    write_bandwidth: float,
    read_bandwidth: float,
) -> ArrayPlan:
    n = int(stays.shape[0])
    srv_load, srv_data, recv, sent = server_totals(load, size, host, target, n)
    before = np.bincount(host, weights=size, minlength=n)
    lb = placement_lower_bound(
        before,
        stays,
        n_before,
        model=model,
        net_bandwidth=net_bandwidth,
        write_bandwidth=write_bandwidth,
        read_bandwidth=read_bandwidth,
    )
    dur = durations(recv, sent, model, net_bandwidth, write_bandwidth, read_bandwidth)
    return ArrayPlan(
        target=target,
        targets=tg,
        l_max=float(srv_load.max(initial=0.0)),
        d_max=float(srv_data.max(initial=0.0)),
        t_max=float(dur.max(initial=0.0)),
        t_lower_bound=lb,
        bytes_moved=float(recv.sum()),
    )


def evaluate_target(
    load: np.ndarray,
    size: np.ndarray,
    host: np.ndarray,
    target: np.ndarray,
    stays: np.ndarray,
    n_before: int,
    weights: PufferscaleWeights,
    *,
    model: Model = "network",
    net_bandwidth: float = DEFAULT_NET_BANDWIDTH,
    write_bandwidth: float = DEFAULT_WRITE_BANDWIDTH,
    read_bandwidth: float = DEFAULT_READ_BANDWIDTH,
) -> ArrayPlan:
    """Metrics and targets of any placement ``target`` (e.g. the exact solver's)."""
    n_after = int(stays.sum())
    tg = compute_targets(
        float(load.sum()),
        float(size.sum()),
        n_before,
        n_after,
        n_after < stays.shape[0],
        weights,
        model=model,
        net_bandwidth=net_bandwidth,
        write_bandwidth=write_bandwidth,
        read_bandwidth=read_bandwidth,
    )
    return _evaluate(
        load, size, host, target, stays, tg, n_before, model, net_bandwidth, write_bandwidth, read_bandwidth
    )


def resolve_servers(
    placement: Mapping[int, int],
    buckets: Sequence[Bucket],
    servers: Sequence[int],
    operation: RescaleOperation,
) -> tuple[list[int], np.ndarray, np.ndarray, int]:
    """Check the request and map it to indices: (server ids of I, host index per bucket,
    stays mask, |I \\ I+|). Raises InputError/InfeasibleError with the reason."""
    if not servers:
        raise InputError("no current servers were given")
    if len(set(servers)) != len(servers):
        raise InputError("the current server ids must be distinct")
    if any(s < 0 for s in servers):
        raise InputError("server ids must be >= 0")
    current = sorted(int(s) for s in servers)
    ids = [b.id for b in buckets]
    if len(set(ids)) != len(ids):
        raise InputError("bucket ids must be distinct")
    missing = [b for b in ids if b not in placement]
    if missing:
        raise InputError(f"the placement has no server for bucket(s) {missing[:5]}")
    extra = set(placement) - set(ids)
    if extra:
        raise InputError(f"the placement names unknown bucket(s) {sorted(extra)[:5]}")
    index = {s: k for k, s in enumerate(current)}
    unknown = sorted({placement[b] for b in ids} - set(index))
    if unknown:
        raise InputError(
            f"the placement puts buckets on server(s) {unknown[:5]} that are not current servers"
        )
    all_ids = list(current)
    stays = np.ones(len(current), np.bool_)
    if operation.kind is RescaleKind.COMMISSION:
        top = current[-1]
        all_ids += list(range(top + 1, top + 1 + operation.count))
        stays = np.ones(len(all_ids), np.bool_)
    else:
        gone = sorted(set(operation.servers) - set(index))
        if gone:
            raise InputError(f"cannot decommission unknown server(s) {gone[:5]}")
        if len(operation.servers) >= len(current):
            raise InfeasibleError("cannot decommission every server: the data would have nowhere to go")
        for s in operation.servers:
            stays[index[s]] = False
    host = np.fromiter((index[placement[b]] for b in ids), np.int64, count=len(ids))
    return all_ids, host, stays, len(current)


def plan_rescale(
    buckets: Sequence[Bucket],
    placement: Mapping[int, int],
    servers: Sequence[int],
    operation: RescaleOperation,
    weights: PufferscaleWeights,
    *,
    net_bandwidth: float = DEFAULT_NET_BANDWIDTH,
    capacity: float | None = None,
    model: Model = "network",
    write_bandwidth: float = DEFAULT_WRITE_BANDWIDTH,
    read_bandwidth: float = DEFAULT_READ_BANDWIDTH,
    heuristic: Heuristic = "release",
) -> RescalePlan:
    """Plan a commission (``operation.count`` new servers get ids max+1, ...) or a
    decommission of ``operation.servers`` with the Pufferscale heuristic.

    ``placement`` maps bucket id -> current server id; bandwidths are bytes/s; ``capacity``
    bytes per server (None: unlimited). Every request is checked before any planning: unknown
    servers or buckets raise InputError, data that cannot fit raises InfeasibleError.

    >>> bs = [Bucket(id=j, load=1.0, size=1.0) for j in range(4)]
    >>> op = RescaleOperation(kind="commission", count=2)
    >>> plan = plan_rescale(bs, {j: 0 for j in range(4)}, [0], op, PufferscaleWeights())
    >>> sorted(set(plan.placement.values())), plan.metrics.l_max
    ([0, 1, 2], 2.0)
    """
    for name, v in (
        ("net_bandwidth", net_bandwidth),
        ("write_bandwidth", write_bandwidth),
        ("read_bandwidth", read_bandwidth),
    ):
        if not (np.isfinite(v) and v > 0):
            raise InputError(f"{name} must be a positive number, got {v!r}")
    if capacity is not None and not capacity > 0:
        raise InputError(f"capacity must be positive, got {capacity!r}")
    if model not in ("network", "storage"):
        raise InputError(f"model must be 'network' or 'storage', got {model!r}")
    if heuristic not in ("paper", "release"):
        raise InputError(f"heuristic must be 'paper' or 'release', got {heuristic!r}")
    all_ids, host, stays, n_before = resolve_servers(placement, buckets, servers, operation)
    load = np.fromiter((b.load for b in buckets), np.float64, count=len(buckets))
    size = np.fromiter((b.size for b in buckets), np.float64, count=len(buckets))
    res = plan_arrays(
        load,
        size,
        host,
        stays,
        n_before,
        weights,
        model=model,
        net_bandwidth=net_bandwidth,
        write_bandwidth=write_bandwidth,
        read_bandwidth=read_bandwidth,
        capacity=capacity,
        heuristic=heuristic,
    )
    return to_plan(buckets, host, res, all_ids)


def to_plan(
    buckets: Sequence[Bucket], host: np.ndarray, res: ArrayPlan, all_ids: Sequence[int]
) -> RescalePlan:
    """Wrap an :class:`ArrayPlan` in the shared :class:`RescalePlan` model."""
    sid = np.asarray(all_ids, dtype=np.int64)
    new = sid[res.target].tolist()
    old = sid[host].tolist()
    placement = {b.id: s for b, s in zip(buckets, new, strict=True)}
    migrations = tuple(
        # The validating constructor (pydantic-core) is faster than model_construct here.
        Migration(bucket=b.id, source=o, target=t, bytes=b.size)
        for b, o, t in zip(buckets, old, new, strict=True)
        if o != t
    )
    tg = res.targets
    metrics = PlanMetrics(
        l_max=res.l_max,
        l_target=tg.l_t,
        d_max=res.d_max,
        d_target=tg.d_t,
        t_max=res.t_max,
        t_target=tg.t_t,
        t_lower_bound=res.t_lower_bound,
        bytes_moved=res.bytes_moved,
    )
    return RescalePlan.model_construct(placement=placement, migrations=migrations, metrics=metrics)
