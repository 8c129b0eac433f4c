"""Regimes: the current one, the history as segments, and the windows behind them."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from regimetune.api.auth import ReadAccess
from regimetune.api.deps import EngineDep, StoreDep
from regimetune.api.routes._errors import READ, errors
from regimetune.api.schemas import CurrentRegime, Page, SegmentOut, WindowOut

router = APIRouter(prefix="/v1", tags=["regimes"], dependencies=[ReadAccess], responses=errors(*READ))


@router.get("/regimes/current", response_model=CurrentRegime, summary="The current regime")
def current(engine: EngineDep, store: StoreDep) -> CurrentRegime:
    seg = store.last_segment()
    return CurrentRegime(
        regime_id=engine.current_regime,
        kind=engine.current_kind,
        since=None if seg is None else seg.start,
        since_window=None if seg is None else seg.start_window,
        windows=engine.n_windows,
        detector=engine.detector_name,
    )


@router.get(
    "/regimes",
    response_model=Page[SegmentOut],
    summary="Regime history as segments, oldest first",
    responses=errors(422),
)
def history(
    store: StoreDep,
    offset: Annotated[int, Query(ge=0, le=2**31)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> Page[SegmentOut]:
    segs, total = store.segments(offset=offset, limit=limit)
    items = [
        SegmentOut(
            regime_id=s.regime_id,
            start_window=s.start_window,
            end_window=s.end_window,
            start=s.start,
            end=s.end,
            summary=s.summary,
            kind=s.kind,
        )
        for s in segs
    ]
    return Page[SegmentOut](items=items, total=total, offset=offset, limit=limit)


@router.get(
    "/windows",
    response_model=list[WindowOut],
    summary="Closed windows after a given index",
    responses=errors(422),
)
def windows(
    store: StoreDep,
    after: Annotated[int, Query(ge=-1, le=2**62)] = -1,
    limit: Annotated[int, Query(ge=1, le=5000)] = 1000,
) -> list[WindowOut]:
    return [
        WindowOut(index=i, start=s, length=n, requests=r, regime_id=g)
        for i, s, n, r, g in store.windows(after=after, limit=limit)
    ]
