"""Policies: the one desired (cheap to poll: ETag / If-None-Match; the ``X-Delivered-Version``
header says what the backend last acknowledged), how delivery stands, the versions, and the
tuned or operator-set policy of every regime."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request, Response
from pydantic import BaseModel, ConfigDict

from regimetune.api.auth import ReadAccess, WriteAccess
from regimetune.api.deps import ControlDep, StoreDep
from regimetune.api.routes._errors import READ, WRITE, errors
from regimetune.api.schemas import PolicyIn
from regimetune.models import NotFoundError, Policy, PolicyVersion

router = APIRouter(prefix="/v1", tags=["policies"])
RegimeId = Annotated[int, Path(ge=0, le=2**31 - 1, description="A regime id")]
DELIVERED = "X-Delivered-Version"  # the newest version the backend acknowledged ("none" before one)


def _delivered(n: int | None) -> str:
    return "none" if n is None else str(n)


class RefusedVersion(BaseModel):
    """A version the backend refused (or the push worker gave up on), and why."""

    model_config = ConfigDict(frozen=True)
    version: int
    reason: str


class PolicyStatus(BaseModel):
    """Desired against delivered, as a Kubernetes object's spec and status: ``desired`` is
    what the engine wants (served by ``GET /v1/policy``), ``delivered_version`` what the
    backend last acknowledged; ``pending`` the versions still to deliver; ``last_error`` why
    delivery is not done: the newest pending version's last failure, else the refusal of a
    version newer than the one delivered, else why the push worker's last pass failed (a
    store that cannot record a delivery); ``refused`` the versions refused or given up
    (newest first, at most 20) with the reason."""

    model_config = ConfigDict(frozen=True)
    desired: PolicyVersion | None
    delivered_version: int | None
    pushing: bool
    pending: list[int]
    last_error: str | None = None
    refused: list[RefusedVersion] = []


def _etag(v: PolicyVersion) -> str:
    return f'"v{v.version}"'


def _matches(header: str | None, etag: str) -> bool:
    if not header:
        return False
    tags = [t.strip().removeprefix("W/") for t in header.split(",")]
    return "*" in tags or etag in tags


class PolicyFastPath:
    """Answers ``GET /v1/policy`` without the framework's per-request work (what storage
    daemons poll, possibly thousands of times a second); same answers as the route below,
    which documents it. The caller routes only open reads of that path here; ``fallback``
    (the framework) answers the 404 before the first version."""

    def __init__(self, fallback: Any, *, store: Any) -> None:
        self.fallback = fallback
        self.store = store

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        v, body, delivered = self.store.policy_status()
        if v is None:
            await self.fallback(scope, receive, send)  # the 404 with its reason
            return
        etag = _etag(v).encode()
        status_headers = [(b"etag", etag), (DELIVERED.lower().encode(), _delivered(delivered).encode())]
        inm = next((val for name, val in scope["headers"] if name == b"if-none-match"), None)
        if inm is not None and _matches(inm.decode("latin-1"), etag.decode()):
            status, headers, payload = 304, status_headers, b""
        else:
            status, payload = 200, body
            headers = [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *status_headers,
            ]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": payload})


@router.get(
    "/policy",
    response_model=PolicyVersion,
    summary="The policy desired (poll with If-None-Match); X-Delivered-Version: what the backend holds",
    dependencies=[ReadAccess],
    responses=errors(304, *READ, 404),
)
async def policy_in_force(request: Request, store: StoreDep) -> Response:
    """What the engine wants: the newest version the backend did not refuse (a refusal
    leaves the last good version), delivered or not; the ``X-Delivered-Version`` header is
    the newest version the backend acknowledged (``none`` before one). With a policy file,
    its default is version 1 until the first change. The body is serialised once per version."""
    v, body, delivered = store.policy_status()
    if v is None:
        raise NotFoundError("no policy version yet: no regime change has been decided")
    headers = {"ETag": _etag(v), DELIVERED: _delivered(delivered)}
    if _matches(request.headers.get("if-none-match"), headers["ETag"]):
        return Response(status_code=304, headers=headers)
    return Response(body, media_type="application/json", headers=headers)


@router.get(
    "/policy/status",
    response_model=PolicyStatus,
    summary="Desired against delivered: the policy the engine wants and what the backend holds",
    dependencies=[ReadAccess],
    responses=errors(*READ),
)
def policy_status(request: Request, store: StoreDep) -> PolicyStatus:
    v, _, delivered = store.policy_status()
    worker = request.app.state.worker
    outbox = request.app.state.outbox
    pending = list(outbox.pending()) if worker is not None else []
    refused = outbox.refused() if worker is not None else []
    error = next((e.last_error for e in reversed(pending) if e.last_error), None)
    if error is None and refused and refused[0].version.version > (delivered or 0):
        error = refused[0].last_error
    if error is None and worker is not None:
        error = worker.last_failure
    return PolicyStatus(
        desired=v,
        delivered_version=delivered,
        pushing=worker is not None,
        pending=[e.version.version for e in pending],
        last_error=error,
        refused=[RefusedVersion(version=e.version.version, reason=e.last_error or e.state) for e in refused],
    )


@router.get(
    "/policy/versions",
    response_model=list[PolicyVersion],
    summary="Policy versions, newest first",
    dependencies=[ReadAccess],
    responses=errors(*READ, 422),
)
def versions(store: StoreDep, limit: Annotated[int, Query(ge=1, le=1000)] = 100) -> list[PolicyVersion]:
    return store.versions(limit=limit)


@router.get(
    "/policies",
    response_model=dict[int, Policy],
    summary="The newest tuned or operator-set policy of every regime",
    dependencies=[ReadAccess],
    responses=errors(*READ),
)
def regime_policies(store: StoreDep) -> dict[int, Policy]:
    return store.regime_policies()


@router.get(
    "/policies/{regime}",
    response_model=Policy,
    summary="The policy of one regime (the safe default when none is stored)",
    dependencies=[ReadAccess],
    responses=errors(*READ, 404, 422),
)
def regime_policy(regime: RegimeId, control: ControlDep) -> Policy:
    return control.regime_policy(regime)


@router.put(
    "/policies/{regime}",
    response_model=Policy,
    summary="Set the policy of a regime (operator); checked against the hard bounds",
    dependencies=[WriteAccess],
    responses=errors(*WRITE, 404),
)
def put_regime_policy(regime: RegimeId, body: PolicyIn, control: ControlDep) -> Policy:
    """If ``regime`` is the current regime, a new decision applies the policy at once. An
    unknown regime is a 404: a policy set for an id the detector has not given out would
    silently apply to whatever regime later gets that id."""
    return control.set_policy(regime, cache=body.cache, weights=body.weights, score=body.score)
