"""Tuning jobs: tune on a recorded trace (server-side path or upload) in the worker pool."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request

from regimetune.api.auth import ReadAccess, WriteAccess
from regimetune.api.deps import JobsDep
from regimetune.api.routes._errors import READ, WRITE, errors
from regimetune.api.schemas import TuningJobIn
from regimetune.models import InputError, Objective, TuningRun

router = APIRouter(prefix="/v1/tuning-jobs", tags=["tuning"])


@router.post(
    "",
    response_model=TuningRun,
    status_code=202,
    summary="Tune on a trace on the server",
    dependencies=[WriteAccess],
    responses=errors(*WRITE, 404),
)
def submit(body: TuningJobIn, jobs: JobsDep) -> TuningRun:
    trace = jobs.resolve_trace(body.trace)
    return jobs.submit(
        trace=trace, objective=body.objective, budget=body.budget, optimizer=body.optimizer, apply=body.apply
    )


@router.post(
    "/upload",
    response_model=TuningRun,
    status_code=202,
    summary="Tune on an uploaded trace (raw body)",
    dependencies=[WriteAccess],
    responses=errors(*WRITE, 413),
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
            "description": "The trace file as it is on disk (any format regimetune reads).",
        }
    },
)
async def upload(
    request: Request,
    jobs: JobsDep,
    filename: Annotated[str, Query(min_length=1, max_length=255, pattern=r"^[A-Za-z0-9._-]+$")],
    objective: Objective = Objective.CACHE,
    budget: Annotated[int | None, Query(ge=1, le=10_000)] = None,
    optimizer: Annotated[str, Query(min_length=1, max_length=64)] = "auto",
    apply: bool = False,
) -> TuningRun:
    data = await request.body()
    if not data:
        raise InputError("the uploaded trace is empty")
    from starlette.concurrency import run_in_threadpool

    path = await run_in_threadpool(jobs.save_upload, data, filename)
    return await run_in_threadpool(
        lambda: jobs.submit(trace=path, objective=objective, budget=budget, optimizer=optimizer, apply=apply)
    )


@router.get(
    "",
    response_model=list[TuningRun],
    summary="Recent tuning jobs, newest first",
    dependencies=[ReadAccess],
    responses=errors(*READ, 422),
)
def list_jobs(jobs: JobsDep, limit: Annotated[int, Query(ge=1, le=1000)] = 100) -> list[TuningRun]:
    return jobs.store.jobs(limit=limit)


@router.get(
    "/{job_id}",
    response_model=TuningRun,
    summary="Status and result of a tuning job",
    dependencies=[ReadAccess],
    responses=errors(*READ, 404),
)
def get_job(job_id: str, jobs: JobsDep) -> TuningRun:
    return jobs.store.job(job_id)
