"""Moving slots between masters with the protocol Redis documents for resharding, and
finishing a move that was cut short.

For a slot moving from ``src`` to ``dst``: ``CLUSTER SETSLOT s IMPORTING src`` on dst, then
``SETSLOT s MIGRATING dst`` on src; ``GETKEYSINSLOT`` and ``MIGRATE ... KEYS`` in batches until
src holds none; then ``SETSLOT s NODE dst`` on dst, src and every other master. While the
slot is open, clients are sent to dst (``ASK``) for keys src no longer holds, so nothing
written during the move is lost; a key MIGRATE copies is deleted from src only once dst has
it. ``MIGRATE ... REPLACE`` is safe here: while src is migrating, a key it still holds is the
current one (a copy on dst can only be left by a batch cut short).

A move killed at any point leaves the slot open, with its keys on src, on dst, or split
between them, and never anywhere else: :meth:`SlotMover.repair` moves what is left to the
target and closes the slot.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from regimetune.backend.redis_cluster.topology import Connections, Node, Topology

KEY_BATCH = 200
MIGRATE_TIMEOUT_MS = 60_000


@dataclass(frozen=True, slots=True)
class SlotMove:
    slot: int
    source: Node
    target: Node


class SlotMover:
    """Moves slots; counts the slots and keys it moved."""

    def __init__(
        self,
        conns: Connections,
        *,
        key_batch: int = KEY_BATCH,
        timeout_ms: int = MIGRATE_TIMEOUT_MS,
        on_slot: Callable[[int], None] | None = None,
    ) -> None:
        self.conns = conns
        self.key_batch = key_batch
        self.timeout_ms = timeout_ms
        self.on_slot = on_slot
        self.slots = 0
        self.keys = 0
        self._count = threading.Lock()  # sources move in parallel threads

    def _setslot(self, node: Node, slots: Sequence[int], *args: str) -> None:
        pipe = self.conns.get(node.address).pipeline(transaction=False)
        for s in slots:
            pipe.execute_command("CLUSTER", "SETSLOT", s, *args)
        pipe.execute()

    def drain(self, slots: Sequence[int], source: Node, target: Node) -> int:
        """MIGRATE the keys of ``slots`` from ``source`` to ``target`` until none is left. Each
        round is two pipelines: ``GETKEYSINSLOT`` (up to ``key_batch`` keys) for every slot,
        then one ``MIGRATE ... KEYS`` per slot (Redis refuses keys of several slots in one).
        A slot whose round came back short is then empty: while it migrates, new keys go to
        the target."""
        moved = 0
        pending = list(slots)
        conn = self.conns.get(source.address)
        while pending:
            pipe = conn.pipeline(transaction=False)
            for s in pending:
                pipe.execute_command("CLUSTER", "GETKEYSINSLOT", s, self.key_batch)
            found = pipe.execute()
            pipe = conn.pipeline(transaction=False)
            for keys in found:
                if keys:
                    pipe.execute_command(
                        "MIGRATE", target.host, target.port, "", 0, self.timeout_ms, "REPLACE", "KEYS", *keys
                    )
                    moved += len(keys)
            pipe.execute()
            pending = [s for s, keys in zip(pending, found, strict=True) if len(keys) >= self.key_batch]
        with self._count:
            self.keys += moved
        return moved

    def close(self, slots: Sequence[int], target: Node, masters: Sequence[Node]) -> None:
        """``SETSLOT NODE target`` on the target first, then on every other master."""
        self._setslot(target, slots, "NODE", target.id)
        for node in masters:
            if node.id != target.id:
                self._setslot(node, slots, "NODE", target.id)
        with self._count:
            self.slots += len(slots)
        if self.on_slot is not None:
            self.on_slot(len(slots))

    def move(self, moves: Sequence[SlotMove], masters: Sequence[Node]) -> int:
        """Move ``moves`` (all from one source to one target) as one batch: open them all,
        drain each, close them all. Answers the number of keys moved."""
        if not moves:
            return 0
        source, target = moves[0].source, moves[0].target
        slots = [m.slot for m in moves]
        self._setslot(target, slots, "IMPORTING", source.id)
        self._setslot(source, slots, "MIGRATING", target.id)
        moved = self.drain(slots, source, target)
        self.close(slots, target, masters)
        return moved

    def repair(self, topo: Topology, slot: int, target_id: str | None) -> str:
        """Finish the move of an open ``slot`` towards ``target_id`` (None: the node importing
        it, else the one it migrates to): every key of it ends on the target, which owns it.
        Answers the target's id."""
        nodes = topo.nodes
        if target_id is None:
            importing = [n.id for n in nodes.values() if slot in n.importing]
            migrating = [n.migrating[slot] for n in nodes.values() if slot in n.migrating]
            target_id = (importing or migrating)[0]
        target = nodes[target_id]
        masters = topo.masters
        for node in masters:
            if node.id == target_id:
                continue
            if slot in node.importing:  # a stale import elsewhere: back to stable
                self._setslot(node, [slot], "STABLE")
            if not int(self.conns.call(node.address, "CLUSTER", "COUNTKEYSINSLOT", slot)):
                continue
            if slot not in target.slots and target.importing.get(slot) != node.id:
                self._setslot(target, [slot], "IMPORTING", node.id)
            if slot in node.slots and node.migrating.get(slot) != target_id:
                self._setslot(node, [slot], "MIGRATING", target_id)
            self.drain([slot], node, target)
        self.close([slot], target, masters)
        return target_id


__all__ = ["KEY_BATCH", "SlotMove", "SlotMover"]
