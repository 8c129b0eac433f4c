"""The decision log: regime change, inputs, policy chosen, score and push outcome."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from regimetune.api.auth import ReadAccess
from regimetune.api.deps import StoreDep
from regimetune.api.routes._errors import READ, errors
from regimetune.api.schemas import Page
from regimetune.models import Decision

router = APIRouter(prefix="/v1", tags=["decisions"], dependencies=[ReadAccess], responses=errors(*READ))


@router.get(
    "/decisions", response_model=Page[Decision], summary="Decisions, newest first", responses=errors(422)
)
def decisions(
    store: StoreDep,
    offset: Annotated[int, Query(ge=0, le=2**31)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> Page[Decision]:
    items, total = store.decisions(offset=offset, limit=limit)
    return Page[Decision](items=items, total=total, offset=offset, limit=limit)
