"""``/v1/placement``: servers, buckets and where each bucket lives."""

from __future__ import annotations

from fastapi import APIRouter

from regimetune.backend.deps import Authorized, ServiceDep
from regimetune.backend.schemas import ErrorBody, PlacementInit, PlacementView
from regimetune.backend.service import summarise

router = APIRouter(prefix="/v1", tags=["placement"], dependencies=[Authorized])


@router.get("/placement", response_model=PlacementView, responses={404: {"model": ErrorBody}})
def get_placement(service: ServiceDep) -> PlacementView:
    """The current placement with per-server totals."""
    return summarise(service.placement())


@router.post(
    "/placement",
    response_model=PlacementView,
    status_code=201,
    responses={409: {"model": ErrorBody}, 422: {"model": ErrorBody}},
)
def init_placement(service: ServiceDep, request: PlacementInit) -> PlacementView:
    """Set up servers and buckets (round-robin when no placement is given). Refused with 409
    when a placement exists, unless ``replace``."""
    return summarise(service.init_placement(request))
