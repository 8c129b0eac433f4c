"""One place that maps the project's errors to HTTP statuses, and the request body limit."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from regimetune.models import (
    BackendError,
    BoundsError,
    ConfigError,
    ConflictError,
    InfeasibleError,
    InputError,
    NotFoundError,
    RegimetuneError,
    TuningError,
)

# most specific first
STATUS: tuple[tuple[type[RegimetuneError], int], ...] = (
    (NotFoundError, 404),
    (ConflictError, 409),
    (InfeasibleError, 422),
    (BoundsError, 422),
    (InputError, 422),
    (ConfigError, 422),
    (BackendError, 502),
    (TuningError, 500),
)


def status_of(exc: RegimetuneError) -> int:
    for cls, status in STATUS:
        if isinstance(exc, cls):
            return status
    return 500


def install_error_handlers(app: FastAPI) -> None:
    async def _handle(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RegimetuneError)
        return JSONResponse({"detail": str(exc)}, status_code=status_of(exc))

    app.add_exception_handler(RegimetuneError, _handle)


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
        too_big = False

        async def counted() -> Message:
            nonlocal seen, too_big
            msg = await receive()
            if msg["type"] == "http.request":
                seen += len(msg.get("body", b""))
                if seen > self.limit:
                    too_big = True
                    raise _TooLarge
            return msg

        try:
            await self.app(scope, counted, send)
        except _TooLarge:
            await self._reject(scope, receive, send)

    async def _reject(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.on_reject is not None:
            self.on_reject()
        resp = JSONResponse(
            {"detail": f"request body larger than the limit of {self.limit} bytes"}, status_code=413
        )
        await resp(scope, receive, send)


class _TooLarge(Exception):
    pass


__all__ = ["BodyLimit", "STATUS", "install_error_handlers", "status_of"]
