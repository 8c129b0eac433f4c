"""Policies: the one in force (cheap to poll: ETag / If-None-Match), its versions, and the
tuned or operator-set policy of every regime."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request, Response

from regimetune.api.auth import ReadAccess, WriteAccess
from regimetune.api.deps import EngineDep, SettingsDep, StoreDep
from regimetune.api.engine import check_bounds
from regimetune.api.routes._errors import READ, WRITE, errors
from regimetune.api.schemas import PolicyIn
from regimetune.models import NotFoundError, Policy, PolicyVersion

router = APIRouter(prefix="/v1", tags=["policies"])
RegimeId = Annotated[int, Path(ge=0, le=2**31 - 1, description="A regime id")]


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
        v, body = self.store.in_force_json()
        if v is None:
            await self.fallback(scope, receive, send)  # the 404 with its reason
            return
        etag = _etag(v).encode()
        inm = next((val for name, val in scope["headers"] if name == b"if-none-match"), None)
        if inm is not None and _matches(inm.decode("latin-1"), etag.decode()):
            status, headers, payload = 304, [(b"etag", etag)], b""
        else:
            status, payload = 200, body
            headers = [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"etag", etag),
            ]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": payload})


@router.get(
    "/policy",
    response_model=PolicyVersion,
    summary="The policy in force (poll with If-None-Match)",
    dependencies=[ReadAccess],
    responses=errors(304, *READ, 404),
)
async def policy_in_force(request: Request, store: StoreDep) -> Response:
    """The newest version not given up on by the push worker; a failed push leaves the last
    known-good version in force. The body is serialised once per version."""
    v, body = store.in_force_json()
    if v is None:
        raise NotFoundError("no policy version yet: no regime change has been decided")
    etag = _etag(v)
    if _matches(request.headers.get("if-none-match"), etag):
        return Response(status_code=304, headers={"ETag": etag})
    return Response(body, media_type="application/json", headers={"ETag": etag})


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
    responses=errors(*READ, 422),
)
def regime_policy(regime: RegimeId, engine: EngineDep) -> Policy:
    policy, _ = engine.choose_policy(regime)
    return policy


@router.put(
    "/policies/{regime}",
    response_model=Policy,
    summary="Set the policy of a regime (operator); checked against the hard bounds",
    dependencies=[WriteAccess],
    responses=errors(*WRITE),
)
def put_regime_policy(
    regime: RegimeId, body: PolicyIn, store: StoreDep, engine: EngineDep, settings: SettingsDep
) -> Policy:
    """If ``regime`` is the current regime, a new decision applies the policy at once."""
    policy = Policy(
        regime_id=regime, cache=body.cache, weights=body.weights, source="operator", score=body.score
    )
    check_bounds(policy, settings.engine.bounds)
    store.put_regime_policy(policy)
    engine.apply_policy_now(regime, "operator set the policy of the current regime")
    return policy
