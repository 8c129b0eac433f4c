"""The Redis Cluster backend behind the push contract: the reference backend's policy log,
with the placement read from the cluster (slots on masters, bytes and load measured) and
rescale orders carried out on it.

In ``recommend`` mode every order is planned and answered, and nothing moves. The
placement's ``revision`` is the cluster's ``cluster_current_epoch``, which every slot
handover raises: an order's ``expected_revision`` refuses it if the cluster changed since.
"""

from __future__ import annotations

import threading
from typing import Literal

from pydantic import Field

from regimetune.backend.redis_cluster.rescaler import RedisClusterRescaler, RedisExecution
from regimetune.backend.redis_cluster.store import RedisStateStore
from regimetune.backend.schemas import Placement, PlacementInit, RescaleOrder, RescaleResult
from regimetune.backend.service import ReferenceService, _first_error, _servers_after
from regimetune.backend.settings import BackendSettings
from regimetune.backend.state import RevisionConflict
from regimetune.models import BackendError, ConflictError, InputError, PufferscaleWeights, RescaleOperation

Mode = Literal["apply", "recommend"]


def redis_errors() -> type[Exception]:
    import redis

    return redis.RedisError


class RedisRescaleOrder(RescaleOrder):
    """A rescale order; a commission may name the empty nodes to add (``HOST:PORT``),
    else the backend takes its spares."""

    nodes: tuple[str, ...] = Field(default=(), max_length=1024)


class RedisRescaleResult(RescaleResult):
    """The plan, and what was done on the cluster (None: a dry run or ``recommend`` mode)."""

    mode: Mode
    execution: RedisExecution | None = None


class RedisClusterService(ReferenceService):
    def __init__(
        self, settings: BackendSettings, rescaler: RedisClusterRescaler, *, mode: Mode = "apply"
    ) -> None:
        store = rescaler.store
        super().__init__(settings, store=store)
        self.redis_store: RedisStateStore = store
        self.rescaler = rescaler
        self.mode: Mode = mode
        self._busy = threading.Lock()

    def revision(self) -> int:
        info = self.rescaler.conns.call(self.rescaler.seed, "CLUSTER", "INFO").decode()
        for line in info.splitlines():
            if line.startswith("cluster_current_epoch:"):
                return int(line.split(":")[1])
        return 0

    def placement(self) -> Placement:
        try:
            snap = self.rescaler.snapshot(healthy=False)
        except redis_errors() as exc:
            raise BackendError(f"Redis refused a command: {exc}") from exc
        return snap.placement().model_copy(update={"revision": self.revision()})

    def init_placement(self, request: PlacementInit) -> Placement:
        raise ConflictError(
            "the placement of a Redis Cluster is its slot map: it is read from the cluster, not set"
        )

    def rescale(self, order: RescaleOrder) -> RedisRescaleResult:
        """Plan ``order`` on the cluster as it is; carry it out unless a dry run or in
        ``recommend`` mode. One order at a time."""
        try:
            operation = RescaleOperation(kind=order.kind, count=order.count, servers=order.servers)
        except ValueError as exc:
            raise InputError(f"invalid rescale order: {_first_error(exc)}") from exc
        if not self._busy.acquire(blocking=False):
            raise ConflictError("a rescale is running on this cluster; try again when it is done")
        try:
            return self._rescale(order, operation)
        except redis_errors() as exc:
            raise BackendError(f"Redis refused a command: {exc}") from exc
        finally:
            self._busy.release()

    def _rescale(self, order: RescaleOrder, operation: RescaleOperation) -> RedisRescaleResult:
        if order.expected_revision is not None and order.expected_revision != self.revision():
            raise RevisionConflict(
                f"the cluster is at epoch {self.revision()}, the order expected {order.expected_revision}"
            )
        policy = self.store.current_policy()
        weights = order.weights or (policy.policy.weights if policy else PufferscaleWeights())
        nodes = order.nodes if isinstance(order, RedisRescaleOrder) else ()
        planned = self.rescaler.plan(operation, weights, self.settings, nodes=nodes)
        apply = self.mode == "apply" and not order.dry_run
        execution = self.rescaler.execute(planned) if apply else None
        servers = tuple(sorted(planned.snapshot.servers.values()))
        return RedisRescaleResult(
            applied=apply,
            revision=self.revision(),
            servers_before=servers,
            servers_after=_servers_after(servers, order),
            weights=weights,
            policy_version=policy.version if policy else None,
            plan=planned.plan,
            mode=self.mode,
            execution=execution,
        )


__all__ = ["Mode", "RedisClusterService", "RedisRescaleOrder", "RedisRescaleResult"]
