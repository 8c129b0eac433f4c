"""Nodes joining and leaving: ``CLUSTER MEET`` and waiting until every node knows every
other, ``CLUSTER FORGET`` on every node once a leaving master holds nothing.

A node leaving is reset (``CLUSTER RESET SOFT``, so it does not rejoin) only after it holds
no slot and no key; Redis refuses that reset on a master with keys anyway.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from regimetune.backend.redis_cluster.topology import (
    ClusterUnhealthy,
    Connections,
    Node,
    Topology,
    parse_address,
    read_topology,
)
from regimetune.models import InputError
from regimetune.models.errors import SourceError

JOIN_TIMEOUT_S = 60.0


def node_id(conns: Connections, address: str) -> str:
    return str(conns.call(address, "CLUSTER", "MYID").decode())


def check_spare(conns: Connections, topo: Topology, address: str) -> str:
    """The id of ``address`` if it may join: a cluster-enabled master with no slot and no key,
    alone (or already a member of this cluster, as after an interrupted commission)."""
    try:
        info = conns.call(address, "CLUSTER", "INFO").decode()
    except SourceError:
        raise
    except Exception as exc:  # redis.ResponseError: cluster support disabled
        raise InputError(f"{address} is not a cluster-enabled Redis: {exc}") from exc
    nid = node_id(conns, address)
    if nid in topo.nodes:
        return nid
    if "cluster_known_nodes:1\r" not in info:
        raise InputError(f"{address} belongs to another cluster; commission only empty nodes")
    if int(conns.call(address, "DBSIZE")):
        raise InputError(f"{address} holds keys; commission only empty nodes")
    if "cluster_slots_assigned:0\r" not in info:
        raise InputError(f"{address} has slots assigned; commission only empty nodes")
    return nid


def cluster_ok(conns: Connections, address: str) -> bool:
    return "cluster_state:ok" in conns.call(address, "CLUSTER", "INFO").decode()


def wait_converged(
    conns: Connections, seed: str, expected: set[str], *, timeout: float = JOIN_TIMEOUT_S
) -> Topology:
    """Poll until every node of ``expected`` answers and knows exactly ``expected``, with no
    handshake pending and every node agreeing on the slots."""
    deadline = time.monotonic() + timeout
    last: list[str] = []
    while time.monotonic() < deadline:
        topo = read_topology(conns, seed)
        views_ok = set(topo.views) == expected and all(set(v) == expected for v in topo.views.values())
        last = topo.problems(allow_open=True)
        if views_ok and not last:
            down = [a for a in (n.address for n in topo.nodes.values()) if not cluster_ok(conns, a)]
            if not down:
                return topo
            last = [f"{down[0]} reports cluster_state fail"]
        time.sleep(0.1)
    raise ClusterUnhealthy(
        f"the cluster did not converge in {timeout:.0f} s: {'; '.join(last[:3]) or 'node lists differ'}"
    )


def _epochs(conns: Connections, address: str) -> tuple[str, dict[str, int]]:
    """A node's id and the config epoch it knows of each node (``CLUSTER NODES``)."""
    me = ""
    out: dict[str, int] = {}
    for line in conns.call(address, "CLUSTER", "NODES").decode().splitlines():
        f = line.split()
        if len(f) >= 7:
            out[f[0]] = int(f[6])
            if "myself" in f[2]:
                me = f[0]
    return me, out


def wait_epochs_known(
    conns: Connections, addresses: Sequence[str], *, timeout: float = JOIN_TIMEOUT_S
) -> None:
    """Poll until every node knows every other's config epoch as that node has it. A node
    that reclaims a slot it just gave away takes an epoch above the greatest it knows; one
    below the taker's fresh claim loses to it in its own view, and the slot then has no node
    that serves it. This wait makes that less likely, not impossible: slots moved straight
    back still lost that race now and then."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        views = dict(_epochs(conns, a) for a in addresses)
        own = {nid: view[nid] for nid, view in views.items()}
        if all(view.get(nid) == e for view in views.values() for nid, e in own.items()):
            return
        time.sleep(0.05)
    raise ClusterUnhealthy(f"the nodes did not learn each other's config epochs in {timeout:.0f} s")


def add_nodes(conns: Connections, topo: Topology, seed: str, addresses: Sequence[str]) -> Topology:
    """Introduce each new node to the cluster and wait until every node knows it."""
    expected = set(topo.nodes)
    for address in addresses:
        nid = check_spare(conns, topo, address)
        expected.add(nid)
        if nid not in topo.nodes:  # every member meets it: no wait for gossip to spread
            host, port = parse_address(address)
            for member in topo.nodes.values():
                conns.call(member.address, "CLUSTER", "MEET", host, port)
    return wait_converged(conns, seed, expected)


def remove_node(conns: Connections, topo: Topology, node: Node) -> None:
    """Forget ``node`` everywhere, then reset it, once it holds no slot and no key."""
    if any(node.id == n.id and n.slots for n in topo.nodes.values()):
        raise ClusterUnhealthy(f"{node.address} still holds slots; it is not removed")
    if int(conns.call(node.address, "DBSIZE")):
        raise ClusterUnhealthy(f"{node.address} still holds keys; it is not removed")
    for other in topo.nodes.values():
        if other.id != node.id:
            conns.call(other.address, "CLUSTER", "FORGET", node.id)
    conns.call(node.address, "CLUSTER", "RESET", "SOFT")


__all__ = [
    "add_nodes",
    "check_spare",
    "cluster_ok",
    "node_id",
    "remove_node",
    "wait_converged",
    "wait_epochs_known",
]
