"""What the reference backend does, without HTTP: apply policy versions, keep the placement,
plan and apply rescale orders with the Pufferscale planner. Raises the project's errors;
the app maps them to status codes."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import numpy as np

from regimetune.backend.schemas import (
    MAX_ID,
    MAX_SERVER_ID,
    Placement,
    PlacementInit,
    PlacementView,
    RescaleOrder,
    RescaleResult,
    ServerSummary,
)
from regimetune.backend.settings import BackendSettings
from regimetune.backend.state import RevisionConflict, StateStore
from regimetune.models import (
    Bucket,
    InputError,
    NotFoundError,
    PolicyVersion,
    PufferscaleWeights,
    RescaleOperation,
    RescalePlan,
)

Planner = Callable[..., RescalePlan]


def _default_planner(*args: Any, **kwargs: Any) -> RescalePlan:
    from regimetune.tuner.rescale import plan_rescale  # the tuner is heavy: import on first use

    return plan_rescale(*args, **kwargs)


def demo_placement(*, servers: int, buckets: int, seed: int = 0) -> PlacementInit:
    """A reproducible demo: skewed loads (log-normal), sizes around 1 GB, round-robin.

    >>> p = demo_placement(servers=2, buckets=4, seed=1)
    >>> p.servers, len(p.buckets)
    ((0, 1), 4)
    """
    if servers < 1 or buckets < 1:
        raise InputError(f"a demo placement needs >= 1 server and bucket, got {servers} and {buckets}")
    rng = np.random.default_rng(seed)
    load = rng.lognormal(mean=3.0, sigma=1.0, size=buckets)
    size = rng.lognormal(mean=np.log(1e9), sigma=0.5, size=buckets)
    return PlacementInit(
        servers=tuple(range(servers)),
        buckets=tuple(
            Bucket(id=j, load=round(float(lo), 3), size=round(float(s)))
            for j, (lo, s) in enumerate(zip(load, size, strict=True))
        ),
    )


def summarise(placement: Placement) -> PlacementView:
    """Per-server bucket count, load and bytes."""
    index = {s: k for k, s in enumerate(placement.servers)}
    host = np.fromiter((index[placement.placement[b.id]] for b in placement.buckets), np.int64)
    load = np.fromiter((b.load for b in placement.buckets), np.float64)
    size = np.fromiter((b.size for b in placement.buckets), np.float64)
    n = len(placement.servers)
    counts = np.bincount(host, minlength=n)
    loads = np.bincount(host, weights=load, minlength=n)
    sizes = np.bincount(host, weights=size, minlength=n)
    summary = tuple(
        ServerSummary(server=s, buckets=int(counts[k]), load=float(loads[k]), bytes=float(sizes[k]))
        for k, s in enumerate(placement.servers)
    )
    return PlacementView(**placement.model_dump(), summary=summary)


class ReferenceService:
    """The backend's behaviour over a :class:`StateStore`."""

    def __init__(
        self,
        settings: BackendSettings,
        *,
        store: StateStore | None = None,
        planner: Planner | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.store = store if store is not None else StateStore(settings.state)
        self.planner = planner if planner is not None else _default_planner
        self.clock = clock

    # -- policies ----------------------------------------------------------------------------
    def apply_policy(self, version: PolicyVersion) -> Literal["applied", "duplicate"]:
        if version.version > MAX_ID:
            raise InputError(f"version must be <= {MAX_ID}, got {version.version}")
        return self.store.apply_policy(version, now=self.clock())

    def current_policy(self) -> PolicyVersion:
        current = self.store.current_policy()
        if current is None:
            raise NotFoundError("no policy has been pushed yet")
        return current

    # -- placement ---------------------------------------------------------------------------
    def placement(self) -> Placement:
        placement = self.store.placement()
        if placement is None:
            raise NotFoundError("no placement yet: POST /v1/placement first")
        return placement

    def init_placement(self, request: PlacementInit) -> Placement:
        try:
            placement = request.to_placement()
        except ValueError as exc:  # pydantic's ValidationError is a ValueError
            raise InputError(f"invalid placement: {_first_error(exc)}") from exc
        expected = None
        if request.replace:
            current = self.store.placement()
            expected = current.revision if current is not None else None
        return self.store.set_placement(placement, expected_revision=expected)

    # -- rescaling ---------------------------------------------------------------------------
    def rescale(self, order: RescaleOrder) -> RescaleResult:
        """Plan ``order`` with the weights in force (or the order's own); unless a dry run,
        store the new placement. Unknown servers and impossible requests raise before
        anything changes."""
        try:
            operation = RescaleOperation(kind=order.kind, count=order.count, servers=order.servers)
        except ValueError as exc:
            raise InputError(f"invalid rescale order: {_first_error(exc)}") from exc
        placement = self.placement()
        if order.expected_revision is not None and order.expected_revision != placement.revision:
            raise RevisionConflict(
                f"the placement is at revision {placement.revision}, the order expected "
                f"{order.expected_revision}"
            )
        unknown = sorted(set(order.servers) - set(placement.servers))
        if unknown:
            raise NotFoundError(f"cannot decommission unknown server(s) {unknown[:5]}")
        if order.kind == "commission" and max(placement.servers, default=-1) + order.count > MAX_SERVER_ID:
            raise InputError(
                f"cannot commission {order.count} server(s): new servers take ids after the largest, "
                f"{max(placement.servers)}, and ids end at {MAX_SERVER_ID}"
            )
        policy = self.store.current_policy()
        weights = order.weights or (policy.policy.weights if policy else PufferscaleWeights())
        plan = self.planner(
            list(placement.buckets),
            placement.placement,
            list(placement.servers),
            operation,
            weights,
            net_bandwidth=self.settings.net_bandwidth,
            capacity=self.settings.capacity,
            model=self.settings.model,
        )
        after = _servers_after(placement.servers, order)
        result_revision = placement.revision
        if not order.dry_run:
            new = Placement(servers=after, buckets=placement.buckets, placement=dict(plan.placement))
            result_revision = self.store.set_placement(new, expected_revision=placement.revision).revision
        return RescaleResult(
            applied=not order.dry_run,
            revision=result_revision,
            servers_before=placement.servers,
            servers_after=after,
            weights=weights,
            policy_version=policy.version if policy else None,
            plan=plan,
        )


def _servers_after(servers: Sequence[int], order: RescaleOrder) -> tuple[int, ...]:
    """New servers get ids max+1, ... (the planner's convention); removed ones drop out."""
    if order.kind == "commission":
        top = max(servers)
        return (*servers, *range(top + 1, top + 1 + order.count))
    gone = set(order.servers)
    return tuple(s for s in servers if s not in gone)


def _first_error(exc: ValueError) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        first: Mapping[str, Any] = errors()[0]
        loc = ".".join(str(p) for p in first.get("loc", ()))
        msg = str(first.get("msg", exc)).removeprefix("Value error, ")
        return f"{loc}: {msg}" if loc else msg
    return str(exc)


__all__ = ["Planner", "ReferenceService", "demo_placement", "summarise"]
