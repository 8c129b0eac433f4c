"""The service's error handler (statuses from the one table of service and backend,
:mod:`regimetune.models.http`) and the request body limit.

A request that fails validation is a 422 whose body always serialises: a NaN, an infinity or
a number too large for a float (``1e400``) in the input is echoed as a string, never as a
bare ``NaN`` that JSON cannot carry; a body the framework cannot parse at all (JSON that is
not UTF-8) is a 422 with the reason, not a bare 400. A 405 names in ``Allow`` every method
the path serves (the framework would name only those of the first route that matched).
A store that cannot write (or read) now is a 503 with the reason and ``Retry-After``: the
client sends again later (a daemon under the same Idempotency-Key). Every status a route
returns is in its OpenAPI responses."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Iterable, Iterator, MutableMapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException
from starlette.routing import Match

from regimetune.control.store import StoreUnavailable
from regimetune.models import RegimetuneError
from regimetune.models.http import http_status

RETRY_AFTER_S = 2
"""What a 503 asks a client to wait before sending again (a store that cannot write now)."""


def status_of(exc: RegimetuneError) -> int:
    """The status of ``exc``: one table for the service and the reference backend
    (:mod:`regimetune.models.http`); a store that cannot write now is a 503."""
    if isinstance(exc, StoreUnavailable):
        return 503
    return http_status(exc)[0]


def error_response(exc: RegimetuneError) -> JSONResponse:
    """The answer to one of the project's errors: its status and ``{"detail": reason}``."""
    status = status_of(exc)
    headers = {"Retry-After": str(RETRY_AFTER_S)} if status == 503 else None
    return JSONResponse({"detail": str(exc)}, status_code=status, headers=headers)


def invalid_response(exc: RequestValidationError) -> JSONResponse:
    """The 422 of a request that failed validation; its body always serialises."""
    return JSONResponse({"detail": _finite(jsonable_encoder(exc.errors()))}, status_code=422)


def install_error_handlers(app: FastAPI) -> None:
    async def _handle(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RegimetuneError)
        return error_response(exc)

    async def _invalid(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        return invalid_response(exc)

    async def _http(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        if exc.status_code == 400 and exc.__cause__ is not None:
            # the framework could not parse the body (e.g. JSON that is not UTF-8): a 422
            # with the reason, as every other unreadable request
            return JSONResponse({"detail": unparsable_reason(exc.__cause__)}, status_code=422)
        if exc.status_code == 405:
            allow = ", ".join(allowed_methods(request.app, request.scope))
            exc = HTTPException(405, exc.detail, headers={**(exc.headers or {}), "Allow": allow})
        return await http_exception_handler(request, exc)

    app.add_exception_handler(RegimetuneError, _handle)
    app.add_exception_handler(RequestValidationError, _invalid)
    app.add_exception_handler(HTTPException, _http)


def allowed_methods(app: Any, scope: Scope) -> list[str]:
    """Every method ``app`` serves for the resource at the path of ``scope``, sorted: the
    methods of the routes with the most specific path template that matches (the fewest
    parameters: ``/v1/tuning-jobs/upload`` is not a job ``/v1/tuning-jobs/{job_id}``)."""
    matching = [
        r
        for r in _leaves(app.router.routes)
        if getattr(r, "methods", None) and r.matches(scope)[0] is not Match.NONE
    ]
    if not matching:
        return []
    best = min(matching, key=lambda r: len(r.param_convertors))
    return sorted({m for r in matching if r.path == best.path for m in r.methods})


def _leaves(routes: Iterable[Any]) -> Iterator[Any]:
    """The routes themselves: FastAPI keeps an included router as one route that holds it
    (``original_router``; its routes carry their router's prefix, and ours are included
    without another)."""
    for route in routes:
        inner = getattr(route, "original_router", None)
        if inner is not None:
            yield from _leaves(inner.routes)
        else:
            yield route


def unparsable_reason(cause: BaseException) -> str:
    if isinstance(cause, UnicodeDecodeError):
        return f"the request body is not text in UTF-8 ({cause})"
    return f"the request body cannot be parsed ({type(cause).__name__}: {cause})"[:500]


def _finite(value: Any) -> Any:
    """``value`` with every non-finite float replaced by its name (``"nan"``, ``"inf"``)."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class BodyLimit:
    """ASGI middleware: refuse bodies above ``limit`` bytes on paths starting with one of
    ``prefixes`` with 413, from Content-Length when given, else while streaming."""

    def __init__(self, app: Any, *, limit: int, prefixes: tuple[str, ...], on_reject: Any = None) -> None:
        self.app = app
        self.limit = limit
        self.prefixes = prefixes
        self.on_reject = on_reject

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(self.prefixes):
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = -1
                if declared > self.limit:
                    await self._reject(scope, receive, send)
                    return
        seen = 0

        async def counted() -> Message:
            # a streamed (chunked) body is counted as it arrives; the HTTPException passes
            # through the framework's body parsing (which turns other errors into a 400)
            nonlocal seen
            msg = await receive()
            if msg["type"] == "http.request":
                seen += len(msg.get("body", b""))
                if seen > self.limit:
                    raise _TooLarge(self.limit)
            return msg

        try:
            await self.app(scope, counted, send)
        except _TooLarge:
            await self._reject(scope, receive, send)

    async def _reject(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.on_reject is not None:
            self.on_reject()
        resp = JSONResponse({"detail": _TooLarge(self.limit).detail}, status_code=413)
        await resp(scope, receive, send)


class _TooLarge(HTTPException):
    def __init__(self, limit: int) -> None:
        super().__init__(413, f"request body larger than the limit of {limit} bytes")


__all__ = [
    "BodyLimit",
    "allowed_methods",
    "error_response",
    "install_error_handlers",
    "invalid_response",
    "status_of",
    "unparsable_reason",
]
