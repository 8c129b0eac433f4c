"""A commission or decommission of a Redis Cluster, planned by Pufferscale and carried out.

The cluster maps onto the planner as servers = masters (ids kept in the state file) and
buckets = the 16,384 slots (bytes and load measured per slot). A plan's migrations become a
journal (each moving slot's target node) written before anything changes; carrying it out
adds the new nodes, moves the slots in batches per (source, target) pair and removes the
leaving nodes. :meth:`RedisClusterRescaler.resume` finishes a journal a killed run left:
open slots are finished towards their target, then the slots not yet moved are moved.

While a plan runs, ``cluster-allow-replica-migration`` is ``no`` on every master, so a
master that gives away its last slot stays a master (Redis would otherwise make it a replica
of the node that took that slot); the values before come back when the plan is done.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, ConfigDict

from regimetune.backend.redis_cluster.costs import DEFAULT_COSTS, BatchTiming, MoveCosts, PairWork, pair_work
from regimetune.backend.redis_cluster.measure import LoadSource, SlotStats, measure_slots
from regimetune.backend.redis_cluster.membership import (
    add_nodes,
    check_spare,
    remove_node,
    wait_converged,
    wait_epochs_known,
)
from regimetune.backend.redis_cluster.migrate import KEY_BATCH, SlotMove, SlotMover
from regimetune.backend.redis_cluster.store import Journal, RedisStateStore
from regimetune.backend.redis_cluster.topology import (
    SLOTS,
    ClusterUnhealthy,
    Connections,
    Topology,
    read_topology,
)
from regimetune.backend.schemas import Placement
from regimetune.backend.settings import BackendSettings
from regimetune.models import (
    Bucket,
    ConflictError,
    InfeasibleError,
    InputError,
    NotFoundError,
    PufferscaleWeights,
    RescaleKind,
    RescaleOperation,
    RescalePlan,
)
from regimetune.models.errors import SourceError

SLOT_BATCH = 32
"""Slots opened and closed together (one pipeline per node); a killed run leaves at most
this many open, each finished by the next run."""
INTRO_S = 2.0
"""Longest wait after a joining node's first slot for clients to reach it (see _introduce)."""


class RedisExecution(BaseModel):
    """What a rescale did to the cluster, and the balance it left (max over mean of the
    masters' bytes and load, from the per-slot figures measured before the move). ``moves_s``
    is the time of the slot moves alone (``wall_s`` adds joining, waiting for clients to reach
    a new node, and removal), the figure ``predicted_s`` predicts."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    resumed: bool
    slots_moved: int
    keys_moved: int
    bytes_moved: float
    wall_s: float
    moves_s: float
    predicted_s: float
    nodes_added: tuple[str, ...]
    nodes_removed: tuple[str, ...]
    max_bytes_over_mean: float
    max_load_over_mean: float


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The cluster at one moment: topology, per-slot figures, server id of each master."""

    topo: Topology
    stats: SlotStats
    servers: dict[str, int]

    def placement(self) -> Placement:
        owners = self.topo.slot_owners()
        buckets = tuple(
            Bucket(id=s, load=float(self.stats.load[s]), size=float(self.stats.bytes[s]))
            for s in range(SLOTS)
        )
        return Placement(
            servers=tuple(sorted(self.servers.values())),
            buckets=buckets,
            placement={s: self.servers[owners[s]] for s in range(SLOTS)},
        )


@dataclass(frozen=True, slots=True)
class PlannedRescale:
    snapshot: Snapshot
    plan: RescalePlan
    journal: Journal
    new_servers: dict[str, int]


def balance(owners: dict[int, str], stats: SlotStats, masters: Sequence[str]) -> tuple[float, float]:
    """Max over mean of the bytes and of the load of ``masters`` under ``owners``."""
    index = {m: k for k, m in enumerate(masters)}
    host = np.array([index.get(owners.get(s, ""), -1) for s in range(SLOTS)])
    ok = host >= 0
    ratios = []
    for values in (stats.bytes, stats.load):
        per = np.bincount(host[ok], weights=values[ok], minlength=len(masters))
        mean = float(per.mean()) if len(per) else 0.0
        ratios.append(float(per.max()) / mean if mean > 0 else 1.0)
    return ratios[0], ratios[1]


def keep_empty_slots(plan: RescalePlan, stats: SlotStats, leaving: set[int]) -> RescalePlan:
    """The plan without the moves of slots that hold no key and no load from a server that
    stays: they change none of the objectives (the heuristic's tie-breaking sends them to
    the least-loaded server), and each costs a round of SETSLOT on every master."""
    empty = (stats.keys == 0) & (stats.load == 0)
    kept = tuple(m for m in plan.migrations if m.source in leaving or not empty[m.bucket])
    if len(kept) == len(plan.migrations):
        return plan
    placement = dict(plan.placement)
    for m in plan.migrations:
        if m.source not in leaving and empty[m.bucket]:
            placement[m.bucket] = m.source
    return plan.model_copy(update={"placement": placement, "migrations": kept})


def run_disjoint(
    work: dict[tuple[str, str], list[list[SlotMove]]], move: Callable[[list[SlotMove]], None]
) -> None:
    """Carry out every (source, target) pair's batches, pairs with no node in common at the
    same time (each pair's batches in order). A node is never in two moves at once: MIGRATE
    blocks its source until the target answers, so A -> B beside B -> A would wait on each
    other. In parallel because the planner's model is: the slowest node's transfers set the
    duration."""
    pending = {pair: list(batches) for pair, batches in work.items() if batches}
    busy: set[str] = set()
    cond = threading.Condition()
    errors: list[BaseException] = []

    def run(pair: tuple[str, str]) -> None:
        try:
            while True:
                with cond:
                    if errors or not pending.get(pair):
                        pending.pop(pair, None)
                        break
                    batch = pending[pair].pop(0)
                move(batch)
        except BaseException as exc:  # surfaced in the caller's thread
            with cond:
                errors.append(exc)
        finally:
            with cond:
                busy.difference_update(pair)
                cond.notify_all()

    with ThreadPoolExecutor(max_workers=max(1, len(pending))) as pool:
        started: set[tuple[str, str]] = set()
        with cond:
            while (set(pending) - started) and not errors:
                free = [p for p in pending if p not in started and not (set(p) & busy)]
                for pair in free:
                    if set(pair) & busy:
                        continue
                    busy.update(pair)
                    started.add(pair)
                    pool.submit(run, pair)
                if set(pending) - started:
                    cond.wait()
    if errors:
        raise errors[0]


def _intro_slots(
    groups: dict[tuple[str, str], list[int]], stats: SlotStats, new_nodes: set[str]
) -> dict[str, tuple[str, int]]:
    """Each new node's first slot (its hottest planned one) and where it comes from."""
    out: dict[str, tuple[str, int]] = {}
    for target in new_nodes:
        pairs = [(src, s) for (src, dst), slots in groups.items() if dst == target for s in slots]
        if pairs:
            out[target] = max(pairs, key=lambda p: (stats.load[p[1]], stats.keys[p[1]]))
    return out


class RedisClusterRescaler:
    """Plans and carries out rescalings of the cluster reached through ``seed``."""

    def __init__(
        self,
        seed: str,
        store: RedisStateStore,
        *,
        spares: Sequence[str] = (),
        load_source: LoadSource = "auto",
        key_batch: int = KEY_BATCH,
        slot_batch: int = SLOT_BATCH,
        intro_s: float = INTRO_S,
        costs: MoveCosts | None = None,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self.seed = seed
        self.store = store
        self.spares = tuple(spares)
        self.load_source: LoadSource = load_source
        self.key_batch = key_batch
        self.slot_batch = slot_batch
        self.intro_s = intro_s
        self._costs = costs
        self.log = log or (lambda _msg: None)
        self.conns = Connections()

    def close(self) -> None:
        self.conns.close()

    # -- reading -------------------------------------------------------------------------------
    def topology(self) -> Topology:
        return read_topology(self.conns, self.seed)

    def snapshot(self, *, client_load: np.ndarray | None = None, healthy: bool = True) -> Snapshot:
        topo = self.topology()
        if healthy:
            topo.require_healthy()
        stats = measure_slots(self.conns, topo, load_source=self.load_source, client_load=client_load)
        masters = [n.id for n in topo.masters]
        return Snapshot(topo, stats, self.store.server_ids(masters))

    def costs(self) -> MoveCosts:
        """The move costs in force: as given, else fitted to the batches timed on this
        cluster (the state file), else the defaults."""
        if self._costs is not None:
            return self._costs
        return MoveCosts.fit(self.store.timings(), DEFAULT_COSTS)

    def predict_seconds(
        self, targets: dict[int, str], owners: dict[int, str], stats: SlotStats, new_nodes: set[str]
    ) -> float:
        """The cost model's time for moving ``targets``: each new node's first slot alone
        (see :meth:`_introduce`), then every pair's batches."""
        costs = self.costs()
        groups: dict[tuple[str, str], list[int]] = defaultdict(list)
        for slot, dst in sorted(targets.items()):
            if owners.get(slot) not in (None, dst):
                groups[(owners[slot], dst)].append(slot)
        intro = 0.0
        for dst, (src, slot) in _intro_slots(groups, stats, new_nodes).items():
            intro += costs.pair_seconds(PairWork(1, int(stats.keys[slot]), float(stats.bytes[slot])), 1)
            groups[(src, dst)].remove(slot)
        rest = {s: dst for (_src, dst), slots in groups.items() for s in slots}
        return intro + costs.predict(pair_work(rest, owners, stats.keys, stats.bytes), self.slot_batch)

    # -- planning ------------------------------------------------------------------------------
    def plan(
        self,
        operation: RescaleOperation,
        weights: PufferscaleWeights,
        settings: BackendSettings,
        *,
        nodes: Sequence[str] = (),
        client_load: np.ndarray | None = None,
    ) -> PlannedRescale:
        """The Pufferscale plan of ``operation`` on the cluster as it is now; changes nothing.
        A commission takes ``nodes`` (addresses), else the first spares not yet members."""
        from regimetune.tuner.rescale import plan_rescale

        if self.store.journal() is not None:
            raise ConflictError("a rescale is in flight: it is finished (resume) before a new one starts")
        snap = self.snapshot(client_load=client_load)
        topo = snap.topo
        by_server = {v: k for k, v in snap.servers.items()}
        add: tuple[str, ...] = ()
        remove: tuple[str, ...] = ()
        new_servers: dict[str, int] = {}
        if operation.kind is RescaleKind.COMMISSION:
            add = self._new_nodes(topo, operation.count, nodes)
            top = max(snap.servers.values())
            for k, address in enumerate(add):
                new_servers[check_spare(self.conns, topo, address)] = top + 1 + k
        else:
            unknown = sorted(set(operation.servers) - set(by_server))
            if unknown:
                raise NotFoundError(f"cannot decommission unknown server(s) {unknown[:5]}")
            remove = tuple(by_server[s] for s in operation.servers)
            for nid in remove:
                replicas = topo.replicas_of(nid)
                if replicas:
                    raise InfeasibleError(
                        f"{topo.nodes[nid].address} has replicas ({replicas[0].address}, ...): "
                        "move or remove them before decommissioning it"
                    )
        placement = snap.placement()
        plan = plan_rescale(
            list(placement.buckets),
            placement.placement,
            list(placement.servers),
            operation,
            weights,
            net_bandwidth=settings.net_bandwidth,
            capacity=settings.capacity,
            model=settings.model,
        )
        plan = keep_empty_slots(plan, snap.stats, set(operation.servers))
        node_of = {**by_server, **{v: k for k, v in new_servers.items()}}
        targets = {m.bucket: node_of[m.target] for m in plan.migrations}
        journal = Journal(
            kind=operation.kind.value,
            add=add,
            remove=remove,
            targets=targets,
            sizes={m.bucket: float(m.bytes) for m in plan.migrations},
            predicted_s=self.predict_seconds(targets, topo.slot_owners(), snap.stats, set(new_servers)),
        )
        return PlannedRescale(snap, plan, journal, new_servers)

    def _new_nodes(self, topo: Topology, count: int, nodes: Sequence[str]) -> tuple[str, ...]:
        members = {n.address for n in topo.nodes.values()}
        if nodes:
            if len(nodes) != count:
                raise InputError(f"a commission of {count} server(s) names {len(nodes)} node(s)")
            return tuple(nodes)
        free = [a for a in self.spares if a not in members]
        if len(free) < count:
            raise InfeasibleError(
                f"a commission of {count} server(s) needs as many empty Redis nodes; "
                f"{len(free)} spare(s) known (start the backend with --spare HOST:PORT)"
            )
        return tuple(free[:count])

    # -- carrying out --------------------------------------------------------------------------
    def execute(self, planned: PlannedRescale) -> RedisExecution:
        """Journal the plan, then carry it out."""
        for nid, server in planned.new_servers.items():
            self.store.bind(nid, server)
        self.store.set_journal(planned.journal)
        return self._run(planned.journal, planned.snapshot.stats, resumed=False)

    def resume(self, *, client_load: np.ndarray | None = None) -> RedisExecution | None:
        """Finish the rescale a killed run left (None: there is none)."""
        journal = self.store.journal()
        if journal is None:
            return None
        self.log(f"resuming the {journal.kind} in flight ({len(journal.targets)} slot(s) planned)")
        topo = self.topology()
        failures = topo.failures()
        if failures:
            raise ClusterUnhealthy("cannot resume the rescale in flight: " + "; ".join(failures[:3]))
        stats = measure_slots(self.conns, topo, load_source=self.load_source, client_load=client_load)
        return self._run(journal, stats, resumed=True)

    def _introduce(
        self,
        journal: Journal,
        groups: dict[tuple[str, str], list[int]],
        stats: SlotStats,
        topo: Topology,
        move: Callable[[list[SlotMove]], None],
    ) -> None:
        """Give each node that joined its hottest planned slot alone first, then wait until
        a client reads from it (at most ``intro_s``): clients that touch that slot get a
        MOVED and learn the node before any ASK sends them there (redis-py, for one, fails
        on an ASK to a node it does not know yet)."""
        new_ids = {n.id for n in topo.nodes.values() if n.address in journal.add}
        for target, (src, slot) in sorted(_intro_slots(groups, stats, new_ids).items()):
            move([SlotMove(slot, topo.nodes[src], topo.nodes[target])])
            groups[(src, target)].remove(slot)
            address = topo.nodes[target].address
            deadline = time.monotonic() + self.intro_s
            while time.monotonic() < deadline:  # until a client reads there, or intro_s
                info = self.conns.call(address, "INFO", "stats")
                if int(info["keyspace_hits"]) + int(info["keyspace_misses"]):
                    break
                time.sleep(0.05)

    def _run(self, journal: Journal, stats: SlotStats, *, resumed: bool) -> RedisExecution:
        t0 = time.perf_counter()
        topo = self.topology()
        if not journal.replica_migration:
            before = {
                n.address: self.conns.config(n.address, "cluster-allow-replica-migration")
                for n in topo.masters
            }
            journal = journal.model_copy(update={"replica_migration": before})
            self.store.set_journal(journal)
        for n in topo.masters:
            self.conns.call(n.address, "CONFIG", "SET", "cluster-allow-replica-migration", "no")
        if journal.add:
            topo = add_nodes(self.conns, topo, self.seed, journal.add)
            for n in topo.masters:
                self.conns.call(n.address, "CONFIG", "SET", "cluster-allow-replica-migration", "no")
            self.log(f"added {', '.join(journal.add)}; every node knows them")
        mover = SlotMover(self.conns, key_batch=self.key_batch)
        for slot in sorted(topo.open_slots()):
            target = mover.repair(topo, slot, journal.targets.get(slot))
            self.log(f"slot {slot}: an interrupted move finished on {topo.nodes[target].address}")
        topo = self.topology()
        owners = topo.slot_owners()
        groups: dict[tuple[str, str], list[int]] = defaultdict(list)
        for slot, target in sorted(journal.targets.items()):
            if owners.get(slot) != target:
                groups[(owners[slot], target)].append(slot)
        total = sum(len(v) for v in groups.values())
        self.log(f"moving {total} slot(s) in {len(groups)} (source, target) pair(s)")
        masters = topo.masters
        timed: list[BatchTiming] = []

        def move(batch: list[SlotMove]) -> None:
            t = time.perf_counter()
            keys = mover.move(batch, masters)
            size = float(stats.bytes[[m.slot for m in batch]].sum())
            # list.append is atomic: pairs move in parallel threads
            timed.append(BatchTiming(len(batch), keys, size, time.perf_counter() - t))

        self._introduce(journal, groups, stats, topo, move)
        intro_s = sum(t.seconds for t in timed)  # the first slots' moves, not the waits
        batches: dict[tuple[str, str], list[list[SlotMove]]] = defaultdict(list)
        for (src, dst), slots in groups.items():
            for k in range(0, len(slots), self.slot_batch):
                batch = slots[k : k + self.slot_batch]
                batches[(src, dst)].append([SlotMove(s, topo.nodes[src], topo.nodes[dst]) for s in batch])
        t_moves = time.perf_counter()
        run_disjoint(batches, move)
        moves_s = intro_s + time.perf_counter() - t_moves
        self.store.add_timings(timed)
        removed: list[str] = []
        if journal.remove:
            leaving = {topo.nodes[nid].address for nid in journal.remove}
            if self.seed in leaving:  # from now on, enter the cluster through a node that stays
                self.seed = next(n.address for n in topo.masters if n.address not in leaving)
            topo = wait_converged(self.conns, self.seed, set(topo.nodes))
            for nid in journal.remove:
                node = topo.nodes[nid]
                remove_node(self.conns, topo, node)
                removed.append(node.address)
                self.log(f"removed {node.address} (no slot, no key left): forgotten by every node")
        topo = self.topology()
        # A plan that follows at once may move a slot back to the node that gave it away: if
        # that node reclaims it before it knows the taker's new config epoch, its claim can
        # lose to the taker's in its own view, and nobody serves the slot. So every node knows
        # every epoch first, and then every node's view of the slots agrees with their owners'
        # (a view can lag its epochs under load; the next plan would be refused meanwhile).
        # The moves are done: a node that does not answer is the next plan's refusal.
        try:
            wait_epochs_known(self.conns, [n.address for n in topo.nodes.values()], timeout=10.0)
            topo = wait_converged(self.conns, self.seed, set(topo.nodes), timeout=10.0)
        except (ClusterUnhealthy, SourceError) as exc:
            self.log(f"the nodes do not agree yet on every config epoch and slot: {exc}")
        for n in topo.masters:
            value = journal.replica_migration.get(n.address, "yes")
            self.conns.call(n.address, "CONFIG", "SET", "cluster-allow-replica-migration", value)
        self.store.set_journal(None)
        owners = topo.slot_owners()
        b, lo = balance(owners, stats, [n.id for n in topo.masters])
        return RedisExecution(
            resumed=resumed,
            slots_moved=mover.slots,
            keys_moved=mover.keys,
            bytes_moved=float(sum(journal.sizes.get(s, 0.0) for s in journal.targets)),
            wall_s=time.perf_counter() - t0,
            moves_s=moves_s,
            predicted_s=journal.predicted_s,
            nodes_added=journal.add,
            nodes_removed=tuple(removed),
            max_bytes_over_mean=b,
            max_load_over_mean=lo,
        )


__all__ = [
    "PlannedRescale",
    "RedisClusterRescaler",
    "RedisExecution",
    "Snapshot",
    "balance",
    "keep_empty_slots",
    "run_disjoint",
]
