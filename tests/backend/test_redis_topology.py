"""Reading CLUSTER NODES and judging a cluster's health, without a server."""

from __future__ import annotations

import pytest

from regimetune.backend.redis_cluster.topology import (
    ClusterUnhealthy,
    Node,
    Topology,
    parse_address,
    parse_nodes,
)
from regimetune.models import InputError

A = "a" * 40
B = "b" * 40
C = "c" * 40


def topo(lines_by_node: dict[str, list[str]]) -> Topology:
    nodes = {}
    views = {}
    for nid, lines in lines_by_node.items():
        parsed = parse_nodes("\n".join(lines))
        me = next(n for n in parsed if n.id == nid)
        nodes[nid] = me
        views[nid] = {n.id: n for n in parsed}
    return Topology(nodes=nodes, views=views)


def healthy_lines(extra_a: str = "", flags_b: str = "master") -> dict[str, list[str]]:
    a = f"{A} 127.0.0.1:7001@17001 myself,master - 0 0 1 connected 0-8191{extra_a}"
    b = f"{B} 127.0.0.1:7002@17002 {flags_b} - 0 0 2 connected 8192-16383"
    a_other = f"{A} 127.0.0.1:7001@17001 master - 0 0 1 connected 0-8191"
    b_self = f"{B} 127.0.0.1:7002@17002 myself,master - 0 0 2 connected 8192-16383"
    return {A: [a, b], B: [a_other, b_self]}


def test_a_healthy_cluster_has_no_problem() -> None:
    t = topo(healthy_lines())
    assert t.problems() == []
    assert [n.address for n in t.masters] == ["127.0.0.1:7001", "127.0.0.1:7002"]
    assert t.owner(0) == A and t.owner(16383) == B


def test_open_slots_failing_and_unknown_nodes_are_refused() -> None:
    t = topo(healthy_lines(extra_a=f" [42->-{B}]"))
    assert t.open_slots() == {42: [A]}
    with pytest.raises(ClusterUnhealthy, match="slot 42 is open"):
        t.require_healthy()
    assert t.problems(allow_open=True) == []

    failing = topo(healthy_lines(flags_b="master,fail?"))
    assert any("as fail?" in p for p in failing.problems())
    assert failing.failures()

    lines = healthy_lines()
    lines[B].append(f"{C} 127.0.0.1:7003@17003 master - 0 0 3 connected")
    unknown = topo(lines)
    assert any("127.0.0.1:7003 is unknown to 127.0.0.1:7001" in p for p in unknown.problems())


def test_slots_claimed_twice_or_by_nobody() -> None:
    lines = healthy_lines()
    lines[B][1] = f"{B} 127.0.0.1:7002@17002 myself,master - 0 0 2 connected 8000-16000"
    problems = topo(lines).problems()
    assert any("claimed by" in p for p in problems)
    assert any("assigned to no node" in p for p in problems)


def test_addresses() -> None:
    assert parse_address("10.0.0.1:6379") == ("10.0.0.1", 6379)
    for bad in ("6379", "host:", "host:99999", ":1"):
        with pytest.raises(InputError, match="HOST:PORT"):
            parse_address(bad)


def test_moves_run_in_parallel_but_never_two_on_one_node() -> None:
    import threading
    import time

    from regimetune.backend.redis_cluster.migrate import SlotMove
    from regimetune.backend.redis_cluster.rescaler import run_disjoint

    def node(name: str) -> Node:
        return Node(id=name, host="h", port=1, flags=frozenset({"master"}), master_id=None, link="connected")

    pairs = [("a", "b"), ("b", "a"), ("c", "d"), ("a", "c"), ("e", "f")]
    work = {
        p: [[SlotMove(10 * k + j, node(p[0]), node(p[1]))] for j in range(3)] for k, p in enumerate(pairs)
    }
    active: dict[str, int] = {}
    done: list[int] = []
    peak = 0
    lock = threading.Lock()

    def move(batch: list[SlotMove]) -> None:
        nonlocal peak
        ends = (batch[0].source.id, batch[0].target.id)
        with lock:
            for n in ends:
                active[n] = active.get(n, 0) + 1
                assert active[n] == 1, f"{n} is in two moves at once"
            peak = max(peak, sum(1 for v in active.values() if v) // 2)
        time.sleep(0.02)
        with lock:
            for n in ends:
                active[n] -= 1
            done.append(batch[0].slot)

    run_disjoint(work, move)
    assert sorted(done) == sorted(10 * k + j for k in range(5) for j in range(3))
    for k in range(5):  # each pair's batches in order
        mine = [s for s in done if s // 10 == k]
        assert mine == sorted(mine)
    assert peak >= 2  # disjoint pairs did run side by side

    def failing(batch: list[SlotMove]) -> None:
        raise RuntimeError("MIGRATE failed")

    with pytest.raises(RuntimeError, match="MIGRATE failed"):
        run_disjoint(work, failing)


def test_a_cluster_node_gets_a_port_whose_bus_port_exists_and_is_free() -> None:
    """Redis refuses cluster mode above 55,535 (its bus listens 10,000 higher); the kernel's
    ephemeral ports reach 60,999, so a cluster node's port is drawn below that."""
    import socket

    from regimetune.backend.redis_cluster.local import MAX_CLUSTER_PORT, free_port

    for _ in range(50):
        port = free_port(cluster=True)
        assert 20000 <= port <= MAX_CLUSTER_PORT == 55535
        for p in (port, port + 10000):
            with socket.socket() as s:
                s.bind(("127.0.0.1", p))
