"""The engine's switches: mode (off / recommend / auto) and pause."""

from __future__ import annotations

from fastapi import APIRouter, Request

from regimetune.api.auth import ReadAccess, WriteAccess
from regimetune.api.deps import EngineDep, SettingsDep
from regimetune.api.routes._errors import READ, WRITE, errors
from regimetune.api.schemas import EngineModeIn, EngineStatus

router = APIRouter(prefix="/v1/engine", tags=["engine"])


def _status(request: Request, engine: EngineDep, settings: SettingsDep) -> EngineStatus:
    outbox = request.app.state.outbox
    return EngineStatus(
        mode=engine.mode,
        paused=engine.paused,
        current_regime=engine.current_regime,
        windows=engine.n_windows,
        last_seq=engine.last_seq,
        applied_seq=engine.applied_seq,
        detector=engine.detector_name,
        aggregator=engine.aggregator_name,
        push_backend=settings.push.backend,
        outbox_pending=outbox.count("pending"),
    )


@router.get(
    "",
    response_model=EngineStatus,
    summary="Engine status",
    dependencies=[ReadAccess],
    responses=errors(*READ),
)
def status(request: Request, engine: EngineDep, settings: SettingsDep) -> EngineStatus:
    return _status(request, engine, settings)


@router.post(
    "/pause",
    response_model=EngineStatus,
    summary="Stop pushing (decisions are still logged)",
    dependencies=[WriteAccess],
    responses=errors(*WRITE),
)
def pause(request: Request, engine: EngineDep, settings: SettingsDep) -> EngineStatus:
    engine.set_paused(True)
    return _status(request, engine, settings)


@router.post(
    "/resume",
    response_model=EngineStatus,
    summary="Resume pushing",
    dependencies=[WriteAccess],
    responses=errors(*WRITE),
)
def resume(request: Request, engine: EngineDep, settings: SettingsDep) -> EngineStatus:
    engine.set_paused(False)
    return _status(request, engine, settings)


@router.put(
    "/mode",
    response_model=EngineStatus,
    summary="Set the mode: off, recommend or auto",
    dependencies=[WriteAccess],
    responses=errors(*WRITE),
)
def set_mode(body: EngineModeIn, request: Request, engine: EngineDep, settings: SettingsDep) -> EngineStatus:
    engine.set_mode(body.mode)
    return _status(request, engine, settings)
