"""Wire schemas of the reference backend (the push contract and the placement API).
Frozen pydantic models; the domain types come from ``regimetune.models``."""

from __future__ import annotations

import math
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from regimetune.models import Bucket, PolicyVersion, PufferscaleWeights, RescaleKind, RescalePlan

_FROZEN = ConfigDict(frozen=True, extra="forbid")
#: Ids and counts the backend accepts: servers are 32-bit, buckets and versions fit SQLite's
#: and numpy's int64; a commission adds at most MAX_NEW_SERVERS at once.
MAX_SERVER_ID = 2**31 - 1
MAX_ID = 2**63 - 1
MAX_NEW_SERVERS = 65_536
ServerId = Annotated[int, Field(ge=0, le=MAX_SERVER_ID)]


class Placement(BaseModel):
    """Servers, buckets and which server holds each bucket; ``revision`` grows by one with
    every applied rescale."""

    model_config = _FROZEN
    revision: int = Field(default=0, ge=0)
    servers: tuple[ServerId, ...]
    buckets: tuple[Bucket, ...]
    placement: dict[int, int]

    @model_validator(mode="after")
    def _consistent(self) -> Placement:
        if not self.servers:
            raise ValueError("a placement needs at least one server")
        if len(set(self.servers)) != len(self.servers):
            raise ValueError("server ids must be distinct")
        ids = [b.id for b in self.buckets]
        if len(set(ids)) != len(ids):
            raise ValueError("bucket ids must be distinct")
        if ids and max(ids) > MAX_ID:
            raise ValueError(f"bucket ids must be <= {MAX_ID}")
        missing = sorted(set(ids) - set(self.placement))
        if missing:
            raise ValueError(f"bucket(s) {missing[:5]} have no server")
        extra = sorted(set(self.placement) - set(ids))
        if extra:
            raise ValueError(f"the placement names unknown bucket(s) {extra[:5]}")
        unknown = sorted(set(self.placement.values()) - set(self.servers))
        if unknown:
            raise ValueError(f"bucket(s) placed on unknown server(s) {unknown[:5]}")
        for name in ("load", "size"):
            if not math.isfinite(sum(getattr(b, name) for b in self.buckets)):
                raise ValueError(f"the buckets' total {name} overflows a float")
        return self


class PlacementInit(BaseModel):
    """``POST /v1/placement``: set up servers and buckets. Without ``placement`` buckets go
    round-robin over the servers. An existing placement is kept unless ``replace``."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "servers": [0, 1],
                    "buckets": [
                        {"id": 0, "load": 10.0, "size": 1e9},
                        {"id": 1, "load": 5.0, "size": 2e9},
                    ],
                    "placement": {"0": 0, "1": 1},
                }
            ]
        },
    )
    servers: tuple[ServerId, ...]
    buckets: tuple[Bucket, ...]
    placement: dict[int, int] | None = None
    replace: bool = False

    def to_placement(self) -> Placement:
        servers = self.servers
        placement = self.placement
        if placement is None and servers:
            placement = {b.id: servers[k % len(servers)] for k, b in enumerate(self.buckets)}
        return Placement(servers=servers, buckets=self.buckets, placement=placement or {})


class ServerSummary(BaseModel):
    model_config = _FROZEN
    server: int
    buckets: int
    load: float
    bytes: float


class PlacementView(Placement):
    """``GET /v1/placement``: the placement and per-server totals."""

    summary: tuple[ServerSummary, ...] = ()


class PolicyAck(BaseModel):
    """The answer to a push: ``applied`` now, or a ``duplicate`` of the version in force."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        json_schema_extra={"examples": [{"status": "applied", "version": 4, "current_version": 4}]},
    )
    status: Literal["applied", "duplicate"]
    version: int
    current_version: int


class PolicyLogEntry(BaseModel):
    """One received version; ``duplicates`` counts identical re-pushes it absorbed."""

    model_config = _FROZEN
    version: PolicyVersion
    received_at: float
    duplicates: int = 0


class PolicyLog(BaseModel):
    model_config = _FROZEN
    current_version: int | None
    entries: tuple[PolicyLogEntry, ...]


class RescaleOrder(BaseModel):
    """``POST /v1/rescale``: commission ``count`` servers or decommission ``servers``.
    ``weights`` overrides the policy in force (what-if); ``dry_run`` plans without moving;
    ``expected_revision`` refuses the order (409) if the placement changed meanwhile."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"kind": "commission", "count": 2},
                {"kind": "decommission", "servers": [3], "dry_run": True},
            ]
        },
    )
    kind: RescaleKind
    count: int = Field(default=0, ge=0, le=MAX_NEW_SERVERS)
    servers: tuple[ServerId, ...] = ()
    dry_run: bool = False
    weights: PufferscaleWeights | None = None
    expected_revision: int | None = None


class RescaleResult(BaseModel):
    """The plan (placement after, migrations, metrics against the paper's targets)."""

    model_config = _FROZEN
    applied: bool
    revision: int
    servers_before: tuple[int, ...]
    servers_after: tuple[int, ...]
    weights: PufferscaleWeights
    policy_version: int | None
    plan: RescalePlan


class ErrorBody(BaseModel):
    """Every 4xx: a one-line ``detail`` (the reason), a machine ``code``, and for version
    conflicts the ``current_version``."""

    model_config = ConfigDict(
        frozen=True,
        json_schema_extra={
            "examples": [
                {
                    "detail": "version 3 is older than version 5 in force",
                    "code": "stale_version",
                    "current_version": 5,
                }
            ]
        },
    )
    detail: str
    code: str
    current_version: int | None = None


class Health(BaseModel):
    model_config = _FROZEN
    status: Literal["ok"] = "ok"
    policy_version: int | None
    placement_revision: int | None


__all__ = [
    "MAX_ID",
    "MAX_NEW_SERVERS",
    "MAX_SERVER_ID",
    "ErrorBody",
    "Health",
    "Placement",
    "PlacementInit",
    "PlacementView",
    "PolicyAck",
    "PolicyLog",
    "PolicyLogEntry",
    "RescaleOrder",
    "RescaleResult",
    "ServerSummary",
]
