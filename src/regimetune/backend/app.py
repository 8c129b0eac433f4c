"""The reference backend's FastAPI app, built by :func:`create_app` (no work at import).

One handler maps the project's errors to status codes, so every refusal is a 4xx with a
one-line ``detail`` and a ``code``, never a 500.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from regimetune.backend.routes import health, metrics, placement, policy, rescale
from regimetune.backend.service import Planner, ReferenceService
from regimetune.backend.settings import BackendSettings
from regimetune.models import RegimetuneError
from regimetune.models.http import http_status

DESCRIPTION = """\
The reference rescaling backend of regimetune: it holds a bucket placement, takes policy
versions (Pufferscale weights and cache thresholds) pushed by regimetune, and answers rescale
orders with Pufferscale migration plans.

**The push contract** (any backend can implement it): `PUT /v1/policy` with a `PolicyVersion`
and an `Idempotency-Key` header equal to its `version`. `200 applied` when it is newer than
the version in force; `200 duplicate` for the same version again (nothing changes); `409`
with `detail`, `code` (`stale_version` / `version_conflict`) and `current_version` for an
older version or the same number with other content; `422` for an invalid body; `5xx` or no
answer means "try again later".
"""


def _error(exc: RegimetuneError) -> JSONResponse:
    status, code = http_status(exc)  # the same table as the service's
    body: dict[str, Any] = {"detail": str(exc), "code": code}
    current = getattr(exc, "current_version", None)
    if current is not None:
        body["current_version"] = current
    return JSONResponse(status_code=status, content=body)


def _validation(exc: RequestValidationError) -> JSONResponse:
    errors = jsonable_encoder(exc.errors())
    first = errors[0] if errors else {}
    loc = ".".join(str(p) for p in first.get("loc", ()) if p != "body")
    msg = str(first.get("msg", "invalid request")).removeprefix("Value error, ")
    detail = f"{loc}: {msg}" if loc else msg
    return JSONResponse(
        status_code=422, content={"detail": detail, "code": "invalid_request", "errors": errors}
    )


def create_app(
    settings: BackendSettings,
    *,
    planner: Planner | None = None,
    service: ReferenceService | None = None,
    rescale_router: APIRouter | None = None,
) -> FastAPI:
    """The app over the state file of ``settings``; ``planner`` replaces the Pufferscale
    planner (tests). Another backend brings its own ``service`` (the same interface) and
    ``rescale_router`` (e.g. the Redis Cluster backend's)."""
    if service is None:
        service = ReferenceService(settings, planner=planner)
    service.store.current_policy()  # open (and create) the state file now: fail fast

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        service.store.close()

    app = FastAPI(
        title="regimetune reference rescaling backend",
        version="1",
        description=DESCRIPTION,
        lifespan=lifespan,
    )
    app.state.service = service

    @app.exception_handler(RegimetuneError)
    async def _regimetune_error(request: Request, exc: RegimetuneError) -> JSONResponse:
        return _error(exc)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return _validation(exc)

    for router in (
        policy.router,
        placement.router,
        rescale_router or rescale.router,
        health.router,
        metrics.router,
    ):
        app.include_router(router)
    return app


__all__ = ["DESCRIPTION", "create_app"]
