"""``/v1/policy``: the push contract (see CONTRACT.md)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Header, HTTPException, Query

from regimetune.backend.deps import Authorized, ServiceDep
from regimetune.backend.schemas import MAX_ID, ErrorBody, PolicyAck, PolicyLog
from regimetune.models import PolicyVersion

router = APIRouter(prefix="/v1", tags=["policy"], dependencies=[Authorized])

_EXAMPLE = {
    "version": 4,
    "created_at": 1767225600.0,
    "policy": {
        "regime_id": 2,
        "source": "tuned",
        "weights": {"w_load": 1.0, "w_data": 0.3, "w_time": 2.0},
        "cache": {"mode": "two_phase", "limit_keys": 10000, "high_watermark_keys": 100000},
    },
}
_REFUSALS = {
    409: {
        "model": ErrorBody,
        "description": "a version older than the one in force, or the same "
        "version number with other content (code stale_version / version_conflict)",
    },
    422: {"description": "the body is not a valid policy version (e.g. weights with max(W_L, W_D) != 1)"},
    401: {"model": ErrorBody, "description": "missing or wrong bearer token"},
}


@router.put(
    "/policy",
    response_model=PolicyAck,
    responses=_REFUSALS,  # type: ignore[arg-type]
    summary="Push a policy version (idempotent)",
)
@router.post("/policy", response_model=PolicyAck, responses=_REFUSALS, include_in_schema=False)  # type: ignore[arg-type]
def push_policy(
    service: ServiceDep,
    version: Annotated[PolicyVersion, Body(openapi_examples={"tuned": {"value": _EXAMPLE}})],
    idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key")] = None,
) -> PolicyAck:
    """Apply ``version`` if it is newer than the version in force. The same version again
    (same content) answers ``200 duplicate`` and changes nothing; an older version, or the
    same number with other content, answers ``409`` with the reason and
    ``current_version``. The optional ``Idempotency-Key`` header must equal ``version``."""
    if idempotency_key is not None and idempotency_key.strip() != str(version.version):
        raise HTTPException(
            status_code=422,
            detail=f"Idempotency-Key {idempotency_key!r} differs from the body's version {version.version}",
        )
    status = service.apply_policy(version)
    return PolicyAck(status=status, version=version.version, current_version=version.version)


@router.get("/policy", response_model=PolicyVersion, responses={404: {"model": ErrorBody}})
def get_policy(service: ServiceDep) -> PolicyVersion:
    """The version in force (404 before the first push)."""
    return service.current_policy()


@router.get("/policies", response_model=PolicyLog)
def list_policies(
    service: ServiceDep,
    after: Annotated[int, Query(ge=0, le=MAX_ID, description="only versions above this one")] = 0,
) -> PolicyLog:
    """Every version received, in order, each once (re-pushes are counted in ``duplicates``)."""
    current = service.store.current_policy()
    return PolicyLog(
        current_version=current.version if current else None,
        entries=tuple(service.store.policy_log(after=after)),
    )
