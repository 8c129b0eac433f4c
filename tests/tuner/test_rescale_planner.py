"""The Pufferscale planner: a hand-worked example, constraints on random instances, refusals."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from regimetune.models import (
    PRESETS,
    Bucket,
    InfeasibleError,
    InputError,
    PufferscaleWeights,
    RescaleOperation,
)
from regimetune.tuner.rescale import compute_targets, plan_rescale
from regimetune.tuner.rescale.planner import plan_arrays


def _commission(n: int) -> RescaleOperation:
    return RescaleOperation(kind="commission", count=n)


def _decommission(*ids: int) -> RescaleOperation:
    return RescaleOperation(kind="decommission", servers=ids)


def test_hand_worked_commission_two_to_three() -> None:
    # Buckets (load = size): b0 4 and b1 2 on s0; b2 3 and b3 3 on s1; S_net = 1, W = (1,1,1).
    # Targets: L_t = D_t = 12/3 = 4, D_i = L_i = 6, T_t = max(|6-4|, 4) = 4; W_T = 1 so
    # L_tw = D_tw = 4, T_tw = 4. Weighted norms order the buckets b0, b2, b3, b1.
    # Fixing: s0 keeps b0 (4 <= 4; adding b1 gives 6 > 4); s1 keeps b2 (3; adding b3 gives 6).
    # Allocation, P(x) = (L/4)^3 + (D/4)^3 + 0.5 (T/4)^3:
    #   b3 from s1: P(s1 after sending 3) = 2(3/4)^3 + 0.5(3/4)^3 = 1.0547
    #     to s0: 2(7/4)^3 + 0.5(3/4)^3 + 1.0547 = 11.98;  to s2: 1.0547 + 1.0547 = 2.11;
    #     stay: 2 * P(s1 with L=D=6) = 2 * 6.75 = 13.5  -> s2
    #   b1 from s0: P(s0 after sending 2) = 1 + 1 + 0.5(2/4)^3 = 2.0625
    #     to s1 (L=D=5, recv 2, sent 3): 2(5/4)^3 + 0.5(3/4)^3 + 2.0625 = 6.18
    #     to s2 (L=D=5, recv 5): 2(5/4)^3 + 0.5(5/4)^3 + 2.0625 = 6.95;  stay: 13.5  -> s1
    # Result: s0 {b0}, s1 {b1, b2}, s2 {b3}: L_max = D_max = 5, T_max = 3 (s1 sends b3),
    # 5 bytes moved.
    sizes = [4.0, 2.0, 3.0, 3.0]
    buckets = [Bucket(id=j, load=v, size=v) for j, v in enumerate(sizes)]
    plan = plan_rescale(
        buckets, {0: 0, 1: 0, 2: 1, 3: 1}, [0, 1], _commission(1), PufferscaleWeights(), net_bandwidth=1.0
    )
    assert plan.placement == {0: 0, 1: 1, 2: 1, 3: 2}
    assert {(m.bucket, m.source, m.target) for m in plan.migrations} == {(1, 0, 1), (3, 1, 2)}
    m = plan.metrics
    assert (m.l_max, m.d_max, m.t_max, m.bytes_moved) == (5.0, 5.0, 3.0, 5.0)
    assert (m.l_target, m.d_target, m.t_target) == (4.0, 4.0, 4.0)


def test_weighted_targets_follow_eq_17_to_19() -> None:
    w = PufferscaleWeights(w_load=0.5, w_data=1.0, w_time=2.0)
    t = compute_targets(12.0, 24.0, 2, 4, False, w, net_bandwidth=2.0)
    assert (t.l_t, t.l_i, t.d_t, t.d_i) == (3.0, 6.0, 6.0, 12.0)
    assert t.t_t == pytest.approx(max(6.0, 6.0) / 2.0)
    assert t.l_tw == pytest.approx(((1 - 0.5) * 6.0 + 3.0 / 2) / 0.5)
    assert t.d_tw == pytest.approx((1 - 0.5) * 12.0 + 6.0 / 2)
    assert t.t_tw == pytest.approx(t.t_t / 2.0)
    low = compute_targets(12.0, 24.0, 2, 4, False, PufferscaleWeights(w_load=1, w_data=0.5, w_time=0.5))
    assert (low.l_tw, low.d_tw) == (3.0, 12.0)


@st.composite
def _instances(draw):  # type: ignore[no-untyped-def]
    n_servers = draw(st.integers(1, 8))
    n_buckets = draw(st.integers(1, 40))
    loads = draw(st.lists(st.floats(0, 100), min_size=n_buckets, max_size=n_buckets))
    sizes = draw(st.lists(st.floats(0, 100), min_size=n_buckets, max_size=n_buckets))
    servers = sorted(draw(st.sets(st.integers(0, 50), min_size=n_servers, max_size=n_servers)))
    hosts = draw(st.lists(st.sampled_from(servers), min_size=n_buckets, max_size=n_buckets))
    if n_servers > 1 and draw(st.booleans()):
        gone = draw(st.sets(st.sampled_from(servers), min_size=1, max_size=n_servers - 1))
        op = _decommission(*sorted(gone))
    else:
        op = _commission(draw(st.integers(1, 4)))
    wl, wd = draw(st.sampled_from([(1.0, 1.0), (1.0, 0.01), (0.01, 1.0), (1.0, 0.3)]))
    wt = draw(st.sampled_from([0.01, 0.5, 1.0, 3.0]))
    capacity = draw(st.one_of(st.none(), st.floats(50, 400)))
    buckets = [Bucket(id=j * 3, load=lo, size=s) for j, (lo, s) in enumerate(zip(loads, sizes, strict=True))]
    placement = {b.id: h for b, h in zip(buckets, hosts, strict=True)}
    return buckets, placement, servers, op, PufferscaleWeights(w_load=wl, w_data=wd, w_time=wt), capacity


@settings(max_examples=150, deadline=None)
@given(_instances())
def test_constraints_hold_on_random_instances(inst) -> None:  # type: ignore[no-untyped-def]
    buckets, placement, servers, op, weights, capacity = inst
    try:
        plan = plan_rescale(buckets, placement, servers, op, weights, net_bandwidth=2.0, capacity=capacity)
    except InfeasibleError:
        assert capacity is not None  # only capacity can make these instances infeasible
        return
    after = set(servers) - set(op.servers)
    if op.kind == "commission":
        after |= set(range(max(servers) + 1, max(servers) + 1 + op.count))
    # (6) one home per bucket, on a remaining server; (7) nothing on a decommissioned server.
    assert set(plan.placement) == set(placement)
    assert set(plan.placement.values()) <= after
    # (5) capacity.
    per_server: dict[int, float] = {}
    per_load: dict[int, float] = {}
    for b in buckets:
        s = plan.placement[b.id]
        per_server[s] = per_server.get(s, 0.0) + b.size
        per_load[s] = per_load.get(s, 0.0) + b.load
    if capacity is not None:
        assert max(per_server.values()) <= capacity + 1e-9
    # Migrations are exactly the changed homes; metrics agree with the placement.
    moved = {b.id for b in buckets if plan.placement[b.id] != placement[b.id]}
    assert {m.bucket for m in plan.migrations} == moved
    for m in plan.migrations:
        assert (m.source, m.target) == (placement[m.bucket], plan.placement[m.bucket])
    assert plan.metrics.l_max == pytest.approx(max(per_load.values()))
    assert plan.metrics.d_max == pytest.approx(max(per_server.values()))
    assert plan.metrics.bytes_moved == pytest.approx(sum(m.bytes for m in plan.migrations))
    recv: dict[int, float] = {}
    sent: dict[int, float] = {}
    for m in plan.migrations:
        recv[m.target] = recv.get(m.target, 0.0) + m.bytes
        sent[m.source] = sent.get(m.source, 0.0) + m.bytes
    t_max = max([0.0, *recv.values(), *sent.values()]) / 2.0
    assert plan.metrics.t_max == pytest.approx(t_max)
    if op.kind == "decommission":  # the Cheriere-Antoniu bound holds for every valid plan
        assert plan.metrics.t_max >= plan.metrics.t_lower_bound * (1 - 1e-9)
    # Only a server leaving, or over a weighted target or the capacity, gives buckets away.
    tg = compute_targets(
        sum(b.load for b in buckets),
        sum(b.size for b in buckets),
        len(servers),
        len(after),
        op.kind == "decommission",
        weights,
        net_bandwidth=2.0,
    )
    load0 = {s: sum(b.load for b in buckets if placement[b.id] == s) for s in servers}
    data0 = {s: sum(b.size for b in buckets if placement[b.id] == s) for s in servers}
    for m in plan.migrations:
        s = m.source
        assert (
            s not in after
            or load0[s] > tg.l_tw * (1 - 1e-9)
            or data0[s] > tg.d_tw * (1 - 1e-9)
            or (capacity is not None and data0[s] > capacity * (1 - 1e-9))
        ), (s, load0[s], data0[s], tg)


def test_storage_model_sums_read_and_write_times() -> None:
    buckets = [Bucket(id=j, load=1.0, size=10.0) for j in range(6)]
    plan = plan_rescale(
        buckets,
        {j: j % 3 for j in range(6)},
        [0, 1, 2],
        _decommission(2),
        PRESETS["LDT"],
        model="storage",
        write_bandwidth=1.0,
        read_bandwidth=2.0,
    )
    recv = {s: 0.0 for s in range(3)}
    sent = {s: 0.0 for s in range(3)}
    for m in plan.migrations:
        recv[m.target] += m.bytes
        sent[m.source] += m.bytes
    assert plan.metrics.t_max == pytest.approx(max(recv[s] / 1.0 + sent[s] / 2.0 for s in range(3)))
    assert all(s != 2 for s in plan.placement.values())


@pytest.mark.parametrize(
    ("servers", "op", "capacity", "error", "words"),
    [
        ([0, 1], _decommission(0, 1), None, InfeasibleError, "every server"),
        ([0, 1], _decommission(7), None, InputError, "unknown server"),
        ([0, 1], _decommission(1), 15.0, InfeasibleError, "do not fit"),
        ([0, 1], _commission(1), 9.0, InfeasibleError, "larger than a server's capacity"),
        ([0], _commission(1), None, InputError, "not current servers"),
    ],
)
def test_refused_before_anything_moves(servers, op, capacity, error, words) -> None:  # type: ignore[no-untyped-def]
    buckets = [Bucket(id=0, load=1.0, size=10.0), Bucket(id=1, load=1.0, size=8.0)]
    with pytest.raises(error, match=words):
        plan_rescale(buckets, {0: 0, 1: 1}, servers, op, PufferscaleWeights(), capacity=capacity)


def test_placement_must_cover_every_bucket() -> None:
    buckets = [Bucket(id=0, load=1.0, size=1.0), Bucket(id=1, load=1.0, size=1.0)]
    with pytest.raises(InputError, match="no server for bucket"):
        plan_rescale(buckets, {0: 0}, [0], _commission(1), PufferscaleWeights())
    with pytest.raises(InputError, match="positive"):
        plan_rescale(buckets, {0: 0, 1: 0}, [0], _commission(1), PufferscaleWeights(), net_bandwidth=0.0)


def test_large_commission_balances_load() -> None:
    rng = np.random.default_rng(3)
    n = 2048
    load = np.abs(rng.normal(1, 0.4, n))
    size = np.abs(rng.normal(1, 0.4, n))
    buckets = [Bucket(id=j, load=float(load[j]), size=float(size[j])) for j in range(n)]
    host = rng.integers(0, 32, n)
    placement = {j: int(host[j]) for j in range(n)}
    initial = np.bincount(host, weights=load, minlength=32).max() / (load.sum() / 32)
    ratios = {}
    for name in ("L", "LT"):
        plan = plan_rescale(buckets, placement, list(range(32)), _commission(32), PRESETS[name])
        assert len(set(plan.placement.values())) == 64
        ratios[name] = plan.metrics.l_max / plan.metrics.l_target
    # 32 buckets per server: L balances the load to within 2% of the average; LT trades some
    # balance for time but still improves on the initial imbalance (1.18 here).
    assert ratios["L"] < 1.02
    assert ratios["L"] <= ratios["LT"] < initial


def test_subnormal_sizes_and_no_load_still_get_a_plan() -> None:
    # found by the property test: a few subnormal bytes and zero load made every penalty
    # overflow to inf, so no server could be chosen
    tiny = 1.1125369292536007e-308
    buckets = [Bucket(id=0, load=0.0, size=tiny), Bucket(id=3, load=0.0, size=tiny)]
    plan = plan_rescale(buckets, {0: 0, 3: 0}, [0], _commission(1), PufferscaleWeights(), net_bandwidth=2.0)
    assert set(plan.placement) == {0, 3} and set(plan.placement.values()) <= {0, 1}


def _anti_correlated(seed: int, n: int = 2048) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Four servers in slot ranges, as a Redis Cluster lays them out: 0 and 3 hold 16 large,
    cold buckets each (about 1.85x the mean bytes after a commission to six, 1.15x the load);
    1 and 2 hold 16 hot, small ones each (1.15x the bytes, 1.85x the load)."""
    rng = np.random.default_rng(seed)
    host = np.arange(n) * 4 // n
    size = rng.uniform(1, 3, n)
    load = size * rng.uniform(0.5, 1.5, n)
    for h in (0, 3):
        size[rng.choice(np.nonzero(host == h)[0], 16, replace=False)] += 40
    for h in (1, 2):
        load[rng.choice(np.nonzero(host == h)[0], 16, replace=False)] += 40
    return load, size, host


def _balance(
    load: np.ndarray, size: np.ndarray, target: np.ndarray, stays: np.ndarray
) -> tuple[float, float]:
    per_l = np.bincount(target, weights=load, minlength=stays.size)[stays]
    per_d = np.bincount(target, weights=size, minlength=stays.size)[stays]
    return float(per_l.max() / per_l.mean()), float(per_d.max() / per_d.mean())


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_commission_balances_anti_correlated_bytes_and_load(seed: int) -> None:
    # Algorithm 1's prefix stops at the first bucket over a target: servers 1 and 2 keep
    # their hot buckets up to the load target and give away their bytes, 0 and 3 their
    # load, and the old servers trade buckets among themselves (1.3x on both, 1.8x the
    # bytes needed). Released towards the target point, each server gives only its excess.
    load, size, host = _anti_correlated(seed)
    stays = np.ones(6, np.bool_)
    excess = np.maximum(np.bincount(host, weights=size, minlength=6) - size.sum() / 6, 0).sum()
    paper = plan_arrays(load, size, host, stays, 4, PRESETS["LDT"], heuristic="paper")
    assert min(_balance(load, size, paper.target, stays)) > 1.2
    assert paper.bytes_moved > 1.5 * excess
    plan = plan_arrays(load, size, host, stays, 4, PRESETS["LDT"])
    assert max(_balance(load, size, plan.target, stays)) < 1.06
    # about the bytes the over-target servers hold above the mean, and none between old
    # servers that are not needed: the new servers take most of it
    assert plan.bytes_moved <= 1.02 * excess
    moved = plan.target != host
    assert size[moved & (plan.target >= 4)].sum() > 0.85 * plan.bytes_moved


def test_decommission_balances_anti_correlated_bytes_and_load() -> None:
    # Six servers in slot ranges: 0 and the leaving 5 hold the large, cold buckets, 2 and 3
    # the hot, small ones. The leaving server's buckets carry load with their bytes, and 2 and
    # 3 have room for bytes only: without exchanging buckets between staying servers (which
    # neither heuristic does) about 1.1x is what is left, against 1.2x by Algorithms 1-2.
    rng = np.random.default_rng(0)
    n = 3072
    host = np.arange(n) * 6 // n
    size = rng.uniform(1, 3, n)
    load = size * rng.uniform(0.5, 1.5, n)
    for h in (0, 5):
        size[rng.choice(np.nonzero(host == h)[0], 16, replace=False)] += 40
    for h in (2, 3):
        load[rng.choice(np.nonzero(host == h)[0], 16, replace=False)] += 40
    stays = np.arange(6) < 5
    per_d = np.bincount(host, weights=size, minlength=6)
    need = per_d[5] + np.maximum(per_d[:5] - size.sum() / 5, 0).sum()
    paper = plan_arrays(load, size, host, stays, 6, PRESETS["LDT"], heuristic="paper")
    plan = plan_arrays(load, size, host, stays, 6, PRESETS["LDT"])
    assert not np.any(plan.target == 5)
    assert min(_balance(load, size, paper.target, stays)) > 1.18 and paper.bytes_moved > 1.15 * need
    assert max(_balance(load, size, plan.target, stays)) < 1.12
    assert plan.bytes_moved <= 1.01 * need


def test_a_server_within_its_targets_keeps_every_bucket() -> None:
    # Targets 3 (load = size). s0 holds 3 + 2 + 1, s1 1 + 2 and is within them, s2 joins:
    # s1 sends nothing; s0 releases the one bucket that brings it to the target (b0), where
    # Algorithm 1 keeps b0 and sends b1 and b2 (the same bytes in two moves).
    sizes = {0: 3.0, 1: 2.0, 2: 1.0, 3: 1.0, 4: 2.0}
    buckets = [Bucket(id=j, load=v, size=v) for j, v in sizes.items()]
    placement = {0: 0, 1: 0, 2: 0, 3: 1, 4: 1}
    plan = plan_rescale(buckets, placement, [0, 1], _commission(1), PufferscaleWeights())
    assert {(m.bucket, m.source, m.target) for m in plan.migrations} == {(0, 0, 2)}
    paper = plan_rescale(buckets, placement, [0, 1], _commission(1), PufferscaleWeights(), heuristic="paper")
    assert {m.bucket for m in paper.migrations} == {1, 2}
    assert plan.metrics.bytes_moved == paper.metrics.bytes_moved == 3.0
    with pytest.raises(InputError, match="heuristic"):
        plan_rescale(buckets, placement, [0, 1], _commission(1), PufferscaleWeights(), heuristic="x")  # type: ignore[arg-type]
