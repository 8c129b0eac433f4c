"""``/healthz``: liveness, and what is in force."""

from __future__ import annotations

from fastapi import APIRouter

from regimetune.backend.deps import ServiceDep
from regimetune.backend.schemas import Health

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health)
def healthz(service: ServiceDep) -> Health:
    policy = service.store.current_policy()
    placement = service.store.placement()
    return Health(
        policy_version=policy.version if policy else None,
        placement_revision=placement.revision if placement else None,
    )
