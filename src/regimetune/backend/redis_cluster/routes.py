"""``/v1/rescale`` of the Redis Cluster backend: the reference route's contract, with the
order's optional ``nodes`` and the answer's ``execution``."""

from __future__ import annotations

from typing import cast

from fastapi import APIRouter

from regimetune.backend.deps import Authorized, ServiceDep
from regimetune.backend.redis_cluster.service import (
    RedisClusterService,
    RedisRescaleOrder,
    RedisRescaleResult,
)
from regimetune.backend.schemas import ErrorBody

router = APIRouter(prefix="/v1", tags=["rescale"], dependencies=[Authorized])


@router.post(
    "/rescale",
    response_model=RedisRescaleResult,
    responses={
        404: {"model": ErrorBody, "description": "an unknown server"},
        409: {"model": ErrorBody, "description": "unhealthy cluster, infeasible, or a rescale in flight"},
        422: {"model": ErrorBody, "description": "an invalid order"},
        502: {"model": ErrorBody, "description": "a Redis node could not be reached"},
    },
)
def rescale(service: ServiceDep, order: RedisRescaleOrder) -> RedisRescaleResult:
    """Plan the order with Pufferscale and the weights in force (or the order's
    ``weights``) on the cluster as it is now, and carry it out unless ``dry_run`` or the
    backend runs in ``recommend`` mode."""
    return cast(RedisClusterService, service).rescale(order)
