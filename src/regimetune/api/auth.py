"""Bearer-token checks: writes need a write token; reads need a read or write token when
``auth.protect_reads`` is set. Tokens are compared in constant time and never echoed."""

from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from regimetune.api.settings import AuthSettings

_bearer = HTTPBearer(auto_error=False, description="A token from the service's auth settings.")
Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]


def _matches(token: str, allowed: tuple[str, ...]) -> bool:
    ok = False
    for candidate in allowed:  # no early exit: the time taken does not tell which matched
        ok |= secrets.compare_digest(token.encode(), candidate.encode())
    return ok


def _check(request: Request, creds: HTTPAuthorizationCredentials | None, *, write: bool) -> None:
    cfg: AuthSettings = request.app.state.settings.auth
    writers = tuple(t.get_secret_value() for t in cfg.write_tokens)
    readers = tuple(t.get_secret_value() for t in cfg.read_tokens)
    if write:
        if not writers and cfg.allow_anonymous_writes:
            return
        allowed = writers
    else:
        if not cfg.protect_reads:
            return
        allowed = writers + readers
    if creds is None or not creds.credentials:
        raise HTTPException(
            401,
            "a bearer token is required (Authorization: Bearer <token>)",
            headers={"WWW-Authenticate": "Bearer"},
        )
    if not _matches(creds.credentials, allowed):
        what = "write" if write else "read"
        raise HTTPException(403, f"the bearer token does not grant {what} access")


async def require_write(request: Request, creds: Credentials) -> None:
    _check(request, creds, write=True)


async def require_read(request: Request, creds: Credentials) -> None:
    _check(request, creds, write=False)


WriteAccess = Depends(require_write)
ReadAccess = Depends(require_read)

__all__ = ["ReadAccess", "WriteAccess", "require_read", "require_write"]
