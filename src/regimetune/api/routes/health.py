"""Liveness, readiness and Prometheus metrics."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from regimetune.api.deps import MetricsDep, StoreDep
from regimetune.api.schemas import Health
from regimetune.control.engine import Engine
from regimetune.control.store import StoreUnavailable

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health, summary="Liveness: the process answers")
def healthz() -> Health:
    return Health(status="ok")


@router.get(
    "/readyz",
    response_model=Health,
    summary="Readiness: the store takes a write, the engine runs and owes it no window, the "
    "tuning pool is whole",
    responses={503: {"model": Health, "description": "Not ready; `detail` says why."}},
)
def readyz(request: Request, store: StoreDep) -> Health | JSONResponse:
    """Not ready while the store cannot write (the probe writes a row, as a batch would be
    written) or while closed windows wait for it; ``detail.store`` then says why."""
    engine = request.app.state.engine
    problem = store.probe() or (None if engine is None else engine.store_error)
    checks = {"store": problem is None, "engine": engine is not None}
    worker = request.app.state.worker
    if worker is not None:
        checks["push_worker"] = worker._thread is not None and worker._thread.is_alive()
    jobs = getattr(request.app.state, "jobs", None)
    if jobs is not None:
        checks["tuning_pool"] = jobs.pool_ok()
    detail = {} if engine is None else {"telemetry": _telemetry(engine)}  # stale is not unready
    if problem is not None:
        owed = 0 if engine is None else engine.owed_windows
        detail["store"] = problem + (f" ({owed} closed windows wait to be stored)" if owed else "")
    if all(checks.values()):
        return Health(status="ok", checks=checks, detail=detail)
    return JSONResponse(
        Health(status="unavailable", checks=checks, detail=detail).model_dump(), status_code=503
    )


def _telemetry(engine: Engine) -> str:
    try:
        return engine.check_telemetry()
    except StoreUnavailable as exc:  # saying it is stale needs the store: the store check says why
        return f"unknown: {exc}"


@router.get(
    "/metrics",
    summary="Prometheus metrics",
    response_class=Response,
    responses={
        200: {
            "content": {"text/plain": {"schema": {"type": "string"}}},
            "description": "Prometheus text exposition format.",
        }
    },
)
def metrics(m: MetricsDep, request: Request) -> Response:
    outbox = request.app.state.outbox
    m.outbox_pending.set(outbox.count("pending"))
    m.push_refused.set(outbox.count("refused", "failed"))
    return Response(generate_latest(m.registry), media_type=CONTENT_TYPE_LATEST)
