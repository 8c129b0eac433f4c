"""Tuning jobs: tune on a recorded trace (server-side path or upload) in the worker pool."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request
from pydantic import Field

from regimetune.api.auth import ReadAccess, WriteAccess
from regimetune.api.deps import JobsDep, StoreDep
from regimetune.api.routes._errors import READ, WRITE, errors
from regimetune.api.schemas import TuningJobIn
from regimetune.control.jobs import JobManager
from regimetune.models import InputError, Objective, RunStatus, TuningRun

router = APIRouter(prefix="/v1/tuning-jobs", tags=["tuning"])


class TuningJob(TuningRun):
    """A tuning run with its progress, so a dashboard can draw a bar while it runs."""

    evaluations_done: int = Field(
        ge=0,
        description="Evaluations completed so far: the optimizer's, counted live while the job "
        "runs; once it ended, `n_evaluations` (for a rescale job the sum over its regimes, each "
        "regime's four presets included)",
    )
    budget_scope: Literal["job", "regime"] = Field(
        description="What `budget` counts: the whole job (cache) or each regime (rescale)"
    )
    progress: float | None = Field(
        ge=0.0,
        le=1.0,
        description="evaluations_done / budget (1 once the job ended); null while a rescale job "
        "runs, as its total depends on how many regimes the trace holds",
    )


def _with_progress(run: TuningRun, jobs: JobManager) -> TuningJob:
    done = jobs.evaluations_done(run)
    per_regime = run.objective is Objective.RESCALE
    if run.status not in (RunStatus.RUNNING, RunStatus.PENDING):
        progress: float | None = 1.0
    else:
        progress = None if per_regime else min(done / run.budget, 1.0)
    return TuningJob(
        **dict(run),
        evaluations_done=done,
        budget_scope="regime" if per_regime else "job",
        progress=progress,
    )


@router.post(
    "",
    response_model=TuningJob,
    status_code=202,
    summary="Tune on a trace on the server",
    dependencies=[WriteAccess],
    responses=errors(*WRITE, 404, 409),
)
def submit(body: TuningJobIn, jobs: JobsDep) -> TuningJob:
    trace = jobs.resolve_trace(body.trace)
    run = jobs.submit(
        trace=trace, objective=body.objective, budget=body.budget, optimizer=body.optimizer, apply=body.apply
    )
    return _with_progress(run, jobs)


@router.post(
    "/upload",
    response_model=TuningJob,
    status_code=202,
    summary="Tune on an uploaded trace (raw body)",
    dependencies=[WriteAccess],
    responses=errors(*WRITE, 409, 413),
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
) -> TuningJob:
    data = await request.body()
    if not data:
        raise InputError("the uploaded trace is empty")
    from starlette.concurrency import run_in_threadpool

    path = await run_in_threadpool(jobs.save_upload, data, filename)
    run = await run_in_threadpool(
        lambda: jobs.submit(trace=path, objective=objective, budget=budget, optimizer=optimizer, apply=apply)
    )
    return _with_progress(run, jobs)


@router.post(
    "/{job_id}/restart",
    response_model=TuningJob,
    status_code=202,
    summary="Resume an interrupted tuning job from its stored evaluations",
    dependencies=[WriteAccess],
    responses=errors(*WRITE, 404, 409),
)
def restart(job_id: str, jobs: JobsDep, apply: bool | None = None) -> TuningJob:
    """A new job on the same trace that starts from the evaluations the interrupted one
    stored; ``apply`` defaults to what the interrupted job asked."""
    return _with_progress(jobs.restart(job_id, apply=apply), jobs)


@router.get(
    "",
    response_model=list[TuningJob],
    summary="Recent tuning jobs, newest first",
    dependencies=[ReadAccess],
    responses=errors(*READ, 422),
)
def list_jobs(
    jobs: JobsDep, store: StoreDep, limit: Annotated[int, Query(ge=1, le=1000)] = 100
) -> list[TuningJob]:
    return [_with_progress(run, jobs) for run in store.jobs(limit=limit)]


@router.get(
    "/{job_id}",
    response_model=TuningJob,
    summary="Status and result of a tuning job",
    dependencies=[ReadAccess],
    responses=errors(*READ, 404),
)
def get_job(job_id: str, jobs: JobsDep, store: StoreDep) -> TuningJob:
    return _with_progress(store.job(job_id), jobs)
