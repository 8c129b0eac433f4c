"""What a Redis Cluster looks like: its nodes, who owns each of the 16,384 slots, the slots
left open by a migration, and whether it is healthy enough to move data.

Every node is asked for its own ``CLUSTER NODES``: the open-slot markers
(``[slot->-id]`` migrating, ``[slot-<-id]`` importing) appear only in a node's line about
itself, and a node unknown to another shows only in that other node's view.

>>> n = parse_nodes_line("ab 127.0.0.1:7001@17001 myself,master - 0 0 1 connected 0-2 5 [7->-cd]")
>>> n.slots, n.migrating, n.address
((0, 1, 2, 5), {7: 'cd'}, '127.0.0.1:7001')
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from regimetune.models import ConflictError, InputError
from regimetune.models.errors import BackendError, SourceError

SLOTS = 16384
_BAD_FLAGS = ("fail", "fail?", "handshake", "noaddr")


class RedisUnreachable(BackendError, SourceError):
    """A Redis node that does not answer (502 from the backend; a source error to a collector)."""


class ClusterUnhealthy(ConflictError):
    """The cluster is not in a state where data may be moved (409)."""

    code = "cluster_unhealthy"


@dataclass(frozen=True, slots=True)
class Node:
    """One line of ``CLUSTER NODES``."""

    id: str
    host: str
    port: int
    flags: frozenset[str]
    master_id: str | None
    link: str
    slots: tuple[int, ...] = ()
    migrating: dict[int, str] = field(default_factory=dict)
    importing: dict[int, str] = field(default_factory=dict)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def is_master(self) -> bool:
        return "master" in self.flags


def parse_address(address: str) -> tuple[str, int]:
    """``"HOST:PORT"`` -> (host, port); a clear error otherwise."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InputError(f"a Redis address is HOST:PORT, got {address!r}")
    return host.strip("[]"), int(port)


def parse_nodes_line(line: str) -> Node:
    parts = line.split()
    if len(parts) < 8:
        raise SourceError(f"unexpected CLUSTER NODES line: {line!r}")
    addr = parts[1].split(",")[0].split("@")[0]
    host, _, port = addr.rpartition(":")
    slots: list[int] = []
    migrating: dict[int, str] = {}
    importing: dict[int, str] = {}
    for item in parts[8:]:
        if item.startswith("["):
            body = item.strip("[]")
            if "->-" in body:
                s, other = body.split("->-")
                migrating[int(s)] = other
            elif "-<-" in body:
                s, other = body.split("-<-")
                importing[int(s)] = other
        elif "-" in item:
            a, b = item.split("-")
            slots.extend(range(int(a), int(b) + 1))
        else:
            slots.append(int(item))
    return Node(
        id=parts[0],
        host=host,
        port=int(port) if port.isdigit() else 0,
        flags=frozenset(parts[2].split(",")),
        master_id=None if parts[3] == "-" else parts[3],
        link=parts[7],
        slots=tuple(slots),
        migrating=migrating,
        importing=importing,
    )


def parse_nodes(text: str) -> list[Node]:
    return [parse_nodes_line(line) for line in text.splitlines() if line.strip()]


class Connections:
    """One redis-py connection per node address (bytes in, bytes out), opened on first use."""

    def __init__(self, *, timeout: float = 60.0) -> None:
        self.timeout = timeout
        self._conns: dict[str, Any] = {}

    def get(self, address: str) -> Any:
        conn = self._conns.get(address)
        if conn is None:
            import redis  # lazily: the rest of regimetune runs without the client

            host, port = parse_address(address)
            conn = redis.Redis(host=host, port=port, socket_timeout=self.timeout, socket_connect_timeout=5.0)
            self._conns[address] = conn
        return conn

    def call(self, address: str, *args: Any) -> Any:
        """One command on one node; a connection failure is a :class:`SourceError`."""
        import redis

        try:
            return self.get(address).execute_command(*args)
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise RedisUnreachable(f"Redis node {address}: {exc}") from exc

    def config(self, address: str, name: str) -> str:
        """One ``CONFIG GET`` value ("" when the server has no such parameter)."""
        got = self.call(address, "CONFIG", "GET", name)
        values = list(got.values()) if isinstance(got, dict) else got[1::2]
        return values[0].decode() if values else ""

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()


@dataclass(frozen=True, slots=True)
class Topology:
    """The cluster as every node sees it: ``nodes`` from the nodes' own lines (with their open
    slots) and ``views`` what each node knows of every node (ids, flags, slots)."""

    nodes: dict[str, Node]
    views: dict[str, dict[str, Node]]

    @property
    def masters(self) -> list[Node]:
        return sorted((n for n in self.nodes.values() if n.is_master), key=lambda n: (n.host, n.port))

    def owner(self, slot: int) -> str | None:
        """The owner of ``slot`` in the view of the node that claims it (None: unassigned)."""
        for n in self.nodes.values():
            if slot in n.slots:
                return n.id
        return None

    def slot_owners(self) -> dict[int, str]:
        return {s: n.id for n in self.nodes.values() for s in n.slots}

    def open_slots(self) -> dict[int, list[str]]:
        """Slots some node marks migrating or importing -> the ids of those nodes."""
        out: dict[int, list[str]] = {}
        for n in self.nodes.values():
            for s in (*n.migrating, *n.importing):
                out.setdefault(s, []).append(n.id)
        return out

    def replicas_of(self, node_id: str) -> list[Node]:
        return [n for n in self.nodes.values() if n.master_id == node_id]

    def problems(self, *, allow_open: bool = False) -> list[str]:
        """Why data may not be moved now (empty: healthy)."""
        out: list[str] = []
        known = {v.id: v.address for view in self.views.values() for v in view.values()}
        known.update({n.id: n.address for n in self.nodes.values()})
        for nid in sorted(set(self.nodes) - set(self.views)):
            out.append(f"{self.nodes[nid].address} does not answer")
        for nid, view in self.views.items():
            who = self.nodes[nid].address
            for other in view.values():
                bad = sorted(set(other.flags) & set(_BAD_FLAGS))
                if bad:
                    out.append(f"{who} sees {other.address} as {','.join(bad)}")
            for u in sorted(set(known) - set(view)):
                out.append(f"{known[u]} is unknown to {who}")
        claimed: dict[int, str] = {}
        for n in self.nodes.values():
            for s in n.slots:
                if s in claimed:
                    out.append(f"slot {s} is claimed by {self.nodes[claimed[s]].address} and {n.address}")
                claimed[s] = n.id
        missing = SLOTS - len(claimed)
        if missing:
            out.append(f"{missing} slot(s) are assigned to no node")
        if not allow_open:
            for s, holders in sorted(self.open_slots().items())[:5]:
                who = ", ".join(self.nodes[h].address for h in holders)
                out.append(f"slot {s} is open (migrating/importing) on {who}")
        for view_id, view in self.views.items():
            for other in view.values():
                own = self.nodes.get(other.id)
                if own is not None and own.is_master and set(other.slots) != set(own.slots):
                    out.append(
                        f"{self.nodes[view_id].address} does not yet agree on the slots of {own.address}"
                    )
                    break
        return out

    def failures(self) -> list[str]:
        """Nodes that do not answer or that some node sees failing (the problems no repair
        can get past)."""
        return [p for p in self.problems(allow_open=True) if " as " in p or p.endswith("does not answer")]

    def require_healthy(self, *, allow_open: bool = False) -> None:
        found = self.problems(allow_open=allow_open)
        if found:
            more = f" (and {len(found) - 3} more)" if len(found) > 3 else ""
            raise ClusterUnhealthy(
                "the cluster is not healthy, nothing was moved: " + "; ".join(found[:3]) + more
            )


def read_topology(conns: Connections, seed: str) -> Topology:
    """Ask ``seed`` for the node list, then every node it knows for its own view."""
    first = parse_nodes(conns.call(seed, "CLUSTER", "NODES").decode())
    nodes: dict[str, Node] = {}
    views: dict[str, dict[str, Node]] = {}
    for n in first:
        if n.port == 0 or "noaddr" in n.flags:
            continue
        try:
            view = parse_nodes(conns.call(n.address, "CLUSTER", "NODES").decode())
        except SourceError:
            if "myself" in n.flags:
                raise
            nodes[n.id] = n
            continue
        me = next(v for v in view if "myself" in v.flags)
        nodes[me.id] = me
        views[me.id] = {v.id: v for v in view}
    return Topology(nodes=nodes, views=views)


def iter_ranges(slots: list[int] | tuple[int, ...], chunk: int) -> Iterator[tuple[int, int]]:
    """Sorted ``slots`` as inclusive ranges of consecutive slots, at most ``chunk`` long.

    >>> list(iter_ranges([1, 2, 3, 7, 8], 2))
    [(1, 2), (3, 3), (7, 8)]
    """
    ordered = sorted(slots)
    k = 0
    while k < len(ordered):
        a = ordered[k]
        j = k
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1 and j + 1 - k < chunk:
            j += 1
        yield a, ordered[j]
        k = j + 1


__all__ = [
    "SLOTS",
    "ClusterUnhealthy",
    "Connections",
    "RedisUnreachable",
    "Node",
    "Topology",
    "iter_ranges",
    "parse_address",
    "parse_nodes",
    "parse_nodes_line",
    "read_topology",
]
