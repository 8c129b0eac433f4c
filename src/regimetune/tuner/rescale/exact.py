"""Exact reference on small instances: the paper's Section III problem as a MILP (HiGHS via
``scipy.optimize.milp``), to measure the heuristic's optimality gap.

Variables: b_ij in {0, 1} for every remaining server i and bucket j, and L, D, T >= 0.
Constraints: each bucket on exactly one remaining server (6, 7); capacity (5); L >= load_i,
D >= data_i, S_net T >= received_i and S_net T >= sent_i (2-4; for the storage model
T >= received_i / S_write + sent_i / S_read, Eq. 21). Two objectives:

- ``objective="weighted"`` (default): minimise ``W_L L/L_t + W_D D/D_t + W_T T/T_t``, the
  objectives normalised by their targets (Eq. 8-11) and weighted as the heuristic is, so the
  gap of a heuristic plan is measured on the same scalar.
- ``objective="paper"`` with ``strategy`` in L, LT, DT, LDT: the paper's Section IV CPLEX
  study, lexicographic: minimise L_max (and/or D_max) first, then minimise T_max with each of
  them held within ``slack`` (10%) of its optimum. L minimises L_max alone.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import lil_array

from regimetune.models.errors import InfeasibleError, InputError
from regimetune.models.rescale import Bucket, PufferscaleWeights, RescaleOperation, RescalePlan
from regimetune.tuner.rescale.planner import (
    DEFAULT_NET_BANDWIDTH,
    DEFAULT_READ_BANDWIDTH,
    DEFAULT_WRITE_BANDWIDTH,
    ArrayPlan,
    Model,
    compute_targets,
    evaluate_target,
    resolve_servers,
    to_plan,
)

MAX_BUCKETS = 24
MAX_SERVERS = 12


@dataclass(frozen=True, slots=True)
class ExactSolution:
    """The best plan found, its objective value and whether HiGHS proved it optimal."""

    plan: RescalePlan
    objective: float
    optimal: bool


def weighted_objective(res: ArrayPlan, weights: PufferscaleWeights) -> float:
    """``W_L L_max/L_t + W_D D_max/D_t + W_T T_max/T_t`` of a plan (zero targets count 0)."""
    tg = res.targets

    def ratio(v: float, t: float) -> float:
        return v / t if t > 0 else 0.0

    return (
        weights.w_load * ratio(res.l_max, tg.l_t)
        + weights.w_data * ratio(res.d_max, tg.d_t)
        + weights.w_time * ratio(res.t_max, tg.t_t)
    )


class _Problem:
    """The MILP's constraint rows over x = (b_00 .. b_(m-1)(n-1), L, D, T)."""

    def __init__(self, load, size, host, stay_idx, n_before, model, s_net, s_w, s_r, capacity):
        n, m = load.shape[0], stay_idx.shape[0]
        self.n, self.m = n, m
        nv = m * n + 3
        self.iL, self.iD, self.iT = m * n, m * n + 1, m * n + 2
        rows = 0
        a = lil_array((n + 6 * m, nv))
        lo: list[float] = []
        hi: list[float] = []
        for j in range(n):  # (6)+(7): one home among remaining servers
            for k in range(m):
                a[rows, k * n + j] = 1.0
            lo.append(1.0)
            hi.append(1.0)
            rows += 1
        t_floor = 0.0
        for k, i in enumerate(stay_idx):
            own = host == i
            a[rows, k * n : (k + 1) * n] = load
            a[rows, self.iL] = -1.0
            lo.append(-np.inf)
            hi.append(0.0)
            rows += 1
            a[rows, k * n : (k + 1) * n] = size
            a[rows, self.iD] = -1.0
            lo.append(-np.inf)
            hi.append(0.0)
            rows += 1
            if capacity is not None:  # (5)
                a[rows, k * n : (k + 1) * n] = size
                lo.append(-np.inf)
                hi.append(capacity)
                rows += 1
            recv = np.where(own, 0.0, size)
            sent_coef = np.where(own, -size, 0.0)  # sent_i = own_total - sum_own size b_ij
            own_total = float(size[own].sum())
            if model == "network":
                a[rows, k * n : (k + 1) * n] = recv / s_net
                a[rows, self.iT] = -1.0
                lo.append(-np.inf)
                hi.append(0.0)
                rows += 1
                a[rows, k * n : (k + 1) * n] = sent_coef / s_net
                a[rows, self.iT] = -1.0
                lo.append(-np.inf)
                hi.append(-own_total / s_net)
                rows += 1
            else:
                a[rows, k * n : (k + 1) * n] = recv / s_w + sent_coef / s_r
                a[rows, self.iT] = -1.0
                lo.append(-np.inf)
                hi.append(-own_total / s_r)
                rows += 1
        # Commissioned servers are interchangeable: order them by data to break the symmetry
        # (without it HiGHS spent most of its time on permutations of the same plan).
        new = [k for k, i in enumerate(stay_idx) if i >= n_before]
        for k1, k2 in itertools.pairwise(new):
            a[rows, k1 * n : (k1 + 1) * n] = size
            a[rows, k2 * n : (k2 + 1) * n] = -size
            lo.append(0.0)
            hi.append(np.inf)
            rows += 1
        gone = np.setdiff1d(np.unique(host), stay_idx)
        for i in gone:  # a leaving server sends all it holds
            out = float(size[host == i].sum())
            t_floor = max(t_floor, out / s_net if model == "network" else out / s_r)
        self.a = a[:rows].tocsr()
        self.lo = np.asarray(lo)
        self.hi = np.asarray(hi)
        lb = np.zeros(nv)
        ub = np.ones(nv)
        ub[m * n :] = np.inf
        lb[self.iT] = t_floor
        self.lb, self.ub = lb, ub
        self.integrality = np.r_[np.ones(m * n), np.zeros(3)]
        self.rel_gap = 1e-4
        # Valid bounds that tighten the LP relaxation: every bucket sits somewhere.
        self.lb[self.iL] = float(load.max(initial=0.0))
        self.lb[self.iD] = float(size.max(initial=0.0))

    def solve(self, c: np.ndarray, extra_ub: dict[int, float], time_limit: float):
        ub = self.ub.copy()
        for idx, v in extra_ub.items():
            ub[idx] = v
        return milp(
            c,
            constraints=LinearConstraint(self.a, self.lo, self.hi),
            integrality=self.integrality,
            bounds=Bounds(self.lb, ub),
            options={"time_limit": time_limit, "disp": False, "mip_rel_gap": self.rel_gap},
        )


def solve_exact(
    buckets: Sequence[Bucket],
    placement: Mapping[int, int],
    servers: Sequence[int],
    operation: RescaleOperation,
    weights: PufferscaleWeights | None = None,
    *,
    objective: Literal["weighted", "paper"] = "weighted",
    strategy: str = "LDT",
    slack: float = 0.1,
    net_bandwidth: float = DEFAULT_NET_BANDWIDTH,
    capacity: float | None = None,
    model: Model = "network",
    write_bandwidth: float = DEFAULT_WRITE_BANDWIDTH,
    read_bandwidth: float = DEFAULT_READ_BANDWIDTH,
    time_limit: float = 30.0,
    rel_gap: float = 1e-4,
) -> ExactSolution:
    """Solve the rescaling problem exactly (small instances: <= 24 buckets, <= 12 servers).
    ``optimal`` is True when HiGHS proved the plan within ``rel_gap`` of the optimum before
    ``time_limit`` seconds (per MILP solved).

    >>> bs = [Bucket(id=j, load=float(j + 1), size=1.0) for j in range(4)]
    >>> op = RescaleOperation(kind="decommission", servers=(2,))
    >>> sol = solve_exact(bs, {0: 0, 1: 1, 2: 2, 3: 2}, [0, 1, 2], op, objective="paper", strategy="L")
    >>> sol.optimal, sol.plan.metrics.l_max
    (True, 5.0)
    """
    weights = weights or PufferscaleWeights()
    if objective not in ("weighted", "paper"):
        raise InputError(f"objective must be 'weighted' or 'paper', got {objective!r}")
    strategy = strategy.upper()
    if objective == "paper" and strategy not in ("L", "LT", "DT", "LDT"):
        raise InputError(f"strategy must be one of L, LT, DT, LDT, got {strategy!r}")
    all_ids, host, stays, n_before = resolve_servers(placement, buckets, servers, operation)
    if len(buckets) > MAX_BUCKETS or stays.shape[0] > MAX_SERVERS:
        raise InputError(
            f"the exact solver is for small instances (<= {MAX_BUCKETS} buckets, <= {MAX_SERVERS} servers), "
            f"got {len(buckets)} buckets on {stays.shape[0]} servers"
        )
    load = np.array([b.load for b in buckets], dtype=np.float64)
    size = np.array([b.size for b in buckets], dtype=np.float64)
    stay_idx = np.nonzero(stays)[0]
    if capacity is not None and float(size.sum()) > capacity * stay_idx.shape[0]:
        raise InfeasibleError(
            f"{size.sum():.6g} B do not fit on {stay_idx.shape[0]} servers of {capacity:.6g} B"
        )
    # Targets only normalise the objective: the heuristic's own definitions (Eq. 8-11).
    tg = compute_targets(
        float(load.sum()),
        float(size.sum()),
        n_before,
        int(stay_idx.shape[0]),
        stay_idx.shape[0] < stays.shape[0],
        weights,
        model=model,
        net_bandwidth=net_bandwidth,
        write_bandwidth=write_bandwidth,
        read_bandwidth=read_bandwidth,
    )
    # HiGHS works on numbers of order one: loads in units of L_t, sizes in units of D_t and
    # times in units of T_t (sizes in bytes next to loads near 1 made it stop at poor plans).
    ls = tg.l_t if tg.l_t > 0 else 1.0
    ds = tg.d_t if tg.d_t > 0 else 1.0
    ts = tg.t_t if tg.t_t > 0 else 1.0
    prob = _Problem(
        load / ls,
        size / ds,
        host,
        stay_idx,
        n_before,
        model,
        net_bandwidth * ts / ds,
        write_bandwidth * ts / ds,
        read_bandwidth * ts / ds,
        None if capacity is None else capacity / ds,
    )
    prob.rel_gap = rel_gap
    nv = prob.m * prob.n + 3
    optimal = True

    def unit(idx: int, scale: float = 1.0) -> np.ndarray:
        c = np.zeros(nv)
        c[idx] = scale
        return c

    def run(c: np.ndarray, extra: dict[int, float]):
        nonlocal optimal
        res = prob.solve(c, extra, time_limit)
        if res.x is None:
            raise InfeasibleError(f"the exact solver found no feasible plan ({res.message})")
        optimal = optimal and res.status == 0
        return res

    if objective == "weighted":
        c = np.zeros(nv)
        c[prob.iL] = weights.w_load
        c[prob.iD] = weights.w_data
        c[prob.iT] = weights.w_time
        res = run(c, {})
    else:
        extra: dict[int, float] = {}
        if "L" in strategy:
            best_l = run(unit(prob.iL), {}).x[prob.iL]
            extra[prob.iL] = best_l * (1 + slack) + 1e-12 if strategy != "L" else best_l * (1 + 1e-9) + 1e-12
        if "D" in strategy:
            best_d = run(unit(prob.iD), {}).x[prob.iD]
            extra[prob.iD] = best_d * (1 + slack) + 1e-12
        res = run(unit(prob.iT), extra) if "T" in strategy else run(unit(prob.iL), {})
    b = np.rint(res.x[: prob.m * prob.n]).reshape(prob.m, prob.n)
    target = stay_idx[np.argmax(b, axis=0)].astype(np.int64)
    arr = evaluate_target(
        load,
        size,
        host,
        target,
        stays,
        n_before,
        weights,
        model=model,
        net_bandwidth=net_bandwidth,
        write_bandwidth=write_bandwidth,
        read_bandwidth=read_bandwidth,
    )
    return ExactSolution(
        plan=to_plan(buckets, host, arr, all_ids), objective=weighted_objective(arr, weights), optimal=optimal
    )
