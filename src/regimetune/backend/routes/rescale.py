"""``/v1/rescale``: commission or decommission servers; answers with the plan."""

from __future__ import annotations

from fastapi import APIRouter

from regimetune.backend.deps import Authorized, ServiceDep
from regimetune.backend.schemas import ErrorBody, RescaleOrder, RescaleResult

router = APIRouter(prefix="/v1", tags=["rescale"], dependencies=[Authorized])


@router.post(
    "/rescale",
    response_model=RescaleResult,
    responses={
        404: {"model": ErrorBody, "description": "no placement yet, or an unknown server"},
        409: {"model": ErrorBody, "description": "infeasible (e.g. data does not fit) or stale revision"},
        422: {"model": ErrorBody, "description": "an invalid order"},
    },
)
def rescale(service: ServiceDep, order: RescaleOrder) -> RescaleResult:
    """Plan the order with the Pufferscale heuristic and the weights in force (or the
    order's ``weights``); apply it unless ``dry_run``. Nothing moves when it is refused."""
    return service.rescale(order)
