"""Bearer-token checks: writes need a write token; reads need a read or write token when
``auth.protect_reads`` is set. Tokens are compared in constant time and never echoed.

Writes are checked twice: by :class:`WriteTokenFirst` before anything reads the request
body (a large body without a token costs no memory or parsing), and by the routes'
dependency, which documents the security scheme in the OpenAPI document."""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi.security.utils import get_authorization_scheme_param

from regimetune.api.settings import AuthSettings

_bearer = HTTPBearer(auto_error=False, description="A token from the service's auth settings.")
Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]


def _matches(token: str, allowed: tuple[str, ...]) -> bool:
    ok = False
    for candidate in allowed:  # no early exit: the time taken does not tell which matched
        ok |= secrets.compare_digest(token.encode(), candidate.encode())
    return ok


def _check(request: Request, creds: HTTPAuthorizationCredentials | None, *, write: bool) -> None:
    _check_token(request.app.state.settings.auth, None if creds is None else creds.credentials, write=write)


def _check_token(cfg: AuthSettings, token: str | None, *, write: bool) -> None:
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
    if not token:
        raise HTTPException(
            401,
            "a bearer token is required (Authorization: Bearer <token>)",
            headers={"WWW-Authenticate": "Bearer"},
        )
    if not _matches(token, allowed):
        what = "write" if write else "read"
        raise HTTPException(403, f"the bearer token does not grant {what} access")


async def require_write(request: Request, creds: Credentials) -> None:
    _check(request, creds, write=True)


async def require_read(request: Request, creds: Credentials) -> None:
    _check(request, creds, write=False)


WriteAccess = Depends(require_write)
ReadAccess = Depends(require_read)


def document_open_reads(app: FastAPI) -> None:
    """Say in the OpenAPI document that reads need no token (``auth.protect_reads`` unset):
    each read's security requirements get the empty one beside the bearer scheme, which
    OpenAPI reads as "optional" (clients and fuzzers then do not expect a 401)."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            for ops in build().get("paths", {}).values():
                op = ops.get("get", {})
                if op.get("security") and {} not in op["security"]:
                    op["security"] = [{}, *op["security"]]
        assert app.openapi_schema is not None
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


_WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def check_write_header(cfg: AuthSettings, headers: Iterable[tuple[bytes, bytes]]) -> None:
    """Raise the 401/403 :class:`HTTPException` unless the first ``Authorization`` of the raw
    ASGI ``headers`` carries a write token (or anonymous writes are allowed)."""
    header = next((v for k, v in headers if k == b"authorization"), b"")
    scheme, token = get_authorization_scheme_param(header.decode("latin-1"))
    _check_token(cfg, token if scheme.lower() == "bearer" else None, write=True)


class WriteTokenFirst:
    """ASGI middleware: a write request under ``/v1/`` without a valid write token is answered
    401/403 before its body is read (every write route of the API needs that token)."""

    def __init__(self, app: Any, *, auth: AuthSettings) -> None:
        self.app = app
        self.auth = auth

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] in _WRITE_METHODS and scope["path"].startswith("/v1/"):
            try:
                check_write_header(self.auth, scope.get("headers", ()))
            except HTTPException as exc:
                resp = JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=exc.headers)
                await resp(scope, receive, send)
                return
        await self.app(scope, receive, send)


__all__ = [
    "ReadAccess",
    "WriteAccess",
    "WriteTokenFirst",
    "check_write_header",
    "document_open_reads",
    "require_read",
    "require_write",
]
