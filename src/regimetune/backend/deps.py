"""Dependency aliases of the backend's routes (``Annotated``, as the FastAPI template)."""

from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import Depends, Header, HTTPException, Request

from regimetune.backend.service import ReferenceService


def get_service(request: Request) -> ReferenceService:
    service: ReferenceService = request.app.state.service
    return service


def require_token(request: Request, authorization: Annotated[str | None, Header()] = None) -> None:
    """When the backend has a token, every ``/v1`` call carries ``Authorization: Bearer``."""
    token = get_service(request).settings.token
    if not token:
        return
    scheme, _, given = (authorization or "").partition(" ")
    # bytes: compare_digest refuses non-ASCII str (a 500), and any header text encodes
    if scheme.lower() != "bearer" or not secrets.compare_digest(
        given.strip().encode("utf-8", "surrogateescape"), token.encode("utf-8")
    ):
        raise HTTPException(
            status_code=401,
            detail="missing or wrong bearer token",
            headers={"WWW-Authenticate": "Bearer"},
        )


ServiceDep = Annotated[ReferenceService, Depends(get_service)]
Authorized = Depends(require_token)

__all__ = ["Authorized", "ServiceDep", "get_service", "require_token"]
