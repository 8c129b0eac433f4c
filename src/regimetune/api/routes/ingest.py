"""``POST /v1/ingest``: batches from storage daemons, acknowledged once durable.

A batch is parsed, validated, turned into columns and stored on the service's one ingest
thread (``app.state.ingest_pool``), never on the event loop (a JSON body of 100k keys takes
tens of milliseconds to parse): batches are stored one at a time anyway (in sequence order),
and one thread instead of a pool's forty leaves the event loop the GIL often enough that a
daemon's ``GET /v1/policy`` does not wait for others' ingest. :class:`IngestFastPath` takes
the requests before the framework, so the loop only checks the token and reads the body; the
routes below document both paths (the JSON body's schema as if the framework parsed it,
:func:`document_ingest_body`) and answer what the fast path hands on."""

from __future__ import annotations

import asyncio
import logging
import math
import re
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from functools import partial
from typing import Annotated, Any, TypeVar
from urllib.parse import parse_qsl

import numpy as np
from fastapi import APIRouter, FastAPI, Header, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError
from starlette.responses import JSONResponse, PlainTextResponse, Response

from regimetune.api.auth import WriteAccess, check_write_header
from regimetune.api.deps import EngineDep, SettingsDep
from regimetune.api.errors import RETRY_AFTER_S, error_response, invalid_response, unparsable_reason
from regimetune.api.metrics import Metrics
from regimetune.api.routes._errors import WRITE, errors
from regimetune.api.schemas import IngestAck, IngestIn
from regimetune.api.settings import Settings
from regimetune.control.engine import Engine, IngestResult
from regimetune.models import InputError, RegimetuneError
from regimetune.models.wire import COUNTS_MEDIA_TYPE, decode_counts

log = logging.getLogger(__name__)

router = APIRouter(prefix="/v1/ingest", tags=["ingest"], dependencies=[WriteAccess])
IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        min_length=1,
        max_length=128,
        description="A daemon's id for the batch: a batch sent again with it is acknowledged once.",
    ),
]


_T = TypeVar("_T")


async def _on_ingest_thread(request: Request, fn: Callable[..., _T], *args: object, **kw: object) -> _T:
    """``fn(*args, **kw)`` on the service's ingest thread."""
    return await asyncio.get_running_loop().run_in_executor(
        request.app.state.ingest_pool, partial(fn, *args, **kw)
    )


def _ack(res: IngestResult) -> IngestAck:
    return IngestAck(seq=res.seq, rows=res.rows, windows_closed=len(res.windows), duplicate=res.duplicate)


def _array(values: Sequence[int] | Sequence[float], dtype: type[np.generic], name: str) -> np.ndarray:
    try:
        return np.asarray(values, dtype=dtype)
    except (OverflowError, ValueError) as exc:
        raise InputError(f"{name}: {exc}") from None


def _buckets(body: IngestIn, n_buckets: int) -> dict[str, np.ndarray]:
    if body.buckets is None:
        return {}
    b = body.buckets
    if not len(b.ids) == len(b.load) == len(b.bytes):
        raise InputError("buckets.ids, buckets.load and buckets.bytes must have equal lengths")
    ids = np.asarray(b.ids, dtype=np.int64)
    if len(ids) and ids.max() >= n_buckets:
        raise InputError(f"bucket id {int(ids.max())} is not below engine.n_buckets={n_buckets}")
    if len(np.unique(ids)) != len(ids):
        raise InputError("buckets.ids must not repeat")
    load = np.zeros(n_buckets)
    size = np.zeros(n_buckets)
    load[ids] = b.load
    size[ids] = b.bytes
    return {"bucket_load": load, "bucket_bytes": size}


_JSON_BODY = {
    "required": True,
    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/IngestIn"}}},
}


@router.post(
    "",
    response_model=IngestAck,
    summary="Ingest per-key counts or raw events of a window (JSON, columnar arrays)",
    responses=errors(*WRITE, 409, 413),
    openapi_extra={"requestBody": _JSON_BODY},
)
async def ingest(
    request: Request,
    engine: EngineDep,
    settings: SettingsDep,
    idempotency_key: IdempotencyKey = None,
) -> IngestAck:
    """Answers once the batch is committed to the store with its sequence number (503 with
    ``Retry-After`` while the store cannot write: send it again under the same key)."""
    raw = await request.body()
    return await _on_ingest_thread(request, _ingest_json, raw, engine, settings, idempotency_key)


def _parse(raw: bytes) -> IngestIn:
    """The JSON body as the framework would validate it (a 422 names the fields)."""
    try:
        text = raw.decode()
    except UnicodeDecodeError as exc:
        raise InputError(unparsable_reason(exc)) from None
    try:
        return IngestIn.model_validate_json(text)
    except ValidationError as exc:
        errs = exc.errors(include_url=False)
        raise RequestValidationError([{**e, "loc": ("body", *e["loc"])} for e in errs]) from None


def _ingest_json(raw: bytes, engine: Engine, settings: Settings, idempotency_key: str | None) -> IngestAck:
    body = _parse(raw)
    if (body.counts is None) == (body.events is None):
        raise InputError("a batch holds exactly one of 'counts' and 'events'")
    buckets = _buckets(body, settings.engine.n_buckets)
    if body.counts is not None:
        c = body.counts
        n = len(c.keys)
        if len(c.reads) != n or (c.writes is not None and len(c.writes) != n):
            raise InputError("counts.keys, counts.reads and counts.writes must have equal lengths")
        if n > settings.ingest.max_keys_per_batch:
            raise InputError(f"{n} keys in one batch; the limit is {settings.ingest.max_keys_per_batch}")
        cols = {
            "keys": _array(c.keys, np.uint64, "counts.keys"),
            "reads": _array(c.reads, np.uint32, "reads"),
        }
        cols["writes"] = np.zeros(n, np.uint32) if c.writes is None else _array(c.writes, np.uint32, "writes")
        kind = "counts"
    else:
        assert body.events is not None
        e = body.events
        n = len(e.ts)
        for name, col in (("key", e.key), ("op", e.op), ("size", e.size)):
            if col is not None and len(col) != n:
                raise InputError(f"events.{name} must have as many rows as events.ts")
        if n and min(e.ts) < body.window_start:
            raise InputError("events must not be older than window_start")
        cols = {"ts": _array(e.ts, np.float64, "ts"), "key": _array(e.key, np.uint64, "key")}
        if e.op is not None:
            cols["op"] = _array(e.op, np.uint8, "op")
        if e.size is not None:
            cols["size"] = _array(e.size, np.uint32, "size")
        if n and (np.diff(cols["ts"]) < 0).any():
            raise InputError("events must be in time order")
        kind = "events"
    res = engine.ingest(
        kind=kind, window_start=body.window_start, columns=cols | buckets, client_key=idempotency_key
    )
    return _ack(res)


@router.post(
    "/counts",
    response_model=IngestAck,
    summary="Ingest per-key counts of a window (compact binary)",
    responses=errors(*WRITE, 409, 413, 415),
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {COUNTS_MEDIA_TYPE: {"schema": {"type": "string", "format": "binary"}}},
            "description": "n keys (uint64 little-endian), then n read counts (uint32), then n "
            "write counts (uint32): 16 bytes per key.",
        }
    },
)
async def ingest_counts(
    request: Request,
    engine: EngineDep,
    settings: SettingsDep,
    window_start: Annotated[float, Query(ge=0, allow_inf_nan=False)],
    idempotency_key: IdempotencyKey = None,
) -> IngestAck:
    """The fast path for large windows: columns as raw little-endian arrays."""
    ctype = request.headers.get("content-type", "").split(";")[0].strip()
    if ctype != COUNTS_MEDIA_TYPE:
        raise HTTPException(415, f"send the body as {COUNTS_MEDIA_TYPE}")
    body = await request.body()
    return await _on_ingest_thread(
        request, _ingest_counts, body, window_start, engine, settings, idempotency_key
    )


def document_ingest_body(app: FastAPI) -> None:
    """Put the schema of the JSON ingest body (and of the models it holds) in the OpenAPI
    document's components, where the route's request body refers to it."""
    build = app.openapi

    def openapi() -> dict[str, object]:
        if app.openapi_schema is None:
            doc = build()
            schema = IngestIn.model_json_schema(ref_template="#/components/schemas/{model}")
            schemas = doc.setdefault("components", {}).setdefault("schemas", {})
            schemas.update(schema.pop("$defs", {}))
            schemas["IngestIn"] = schema
        assert app.openapi_schema is not None
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _ingest_counts(
    body: bytes, window_start: float, engine: Engine, settings: Settings, idempotency_key: str | None
) -> IngestAck:
    cols = decode_counts(body)
    n = len(cols["keys"])
    if n > settings.ingest.max_keys_per_batch:
        raise InputError(f"{n} keys in one batch; the limit is {settings.ingest.max_keys_per_batch}")
    res = engine.ingest(kind="counts", window_start=window_start, columns=cols, client_key=idempotency_key)
    return _ack(res)


JSON_PATH, COUNTS_PATH = "/v1/ingest", "/v1/ingest/counts"
_PLAIN_NUMBER = re.compile(r"(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")  # what the query's float takes as is


class IngestFastPath:
    """Answers ``POST /v1/ingest`` and ``POST /v1/ingest/counts`` with the least work on the
    event loop: a crowd of daemons posts hundreds of batches a second while others poll
    ``GET /v1/policy``, and each millisecond the loop spends on a batch is one a policy read
    may wait. The loop checks the write token and reads the body; the ingest thread parses,
    validates and stores it and renders the answer (a refusal as the error handlers render
    it). A request the framework refuses before reading the body (no valid token, a body
    over ``ingest.max_body_bytes``, a bad Idempotency-Key, content type or ``window_start``)
    goes to ``fallback`` (the framework) untouched, a body that grows over the limit as read
    so far: the framework's middleware answers, counts and times those."""

    def __init__(
        self, fallback: Any, *, settings: Settings, engine: Engine, pool: Executor, metrics: Metrics
    ) -> None:
        self.fallback = fallback
        self.settings = settings
        self.engine = engine
        self.pool = pool
        self.metrics = metrics

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        binary = scope["path"] == COUNTS_PATH
        args = self._arguments(scope, binary=binary)
        if args is None:
            await self.fallback(scope, receive, send)
            return
        chunks: list[bytes] = []
        size, more = 0, True
        while more:
            msg = await receive()
            if msg["type"] != "http.request":  # the client went away
                return
            chunks.append(msg.get("body", b""))
            size += len(chunks[-1])
            more = msg.get("more_body", False)
            if size > self.settings.ingest.max_body_bytes:
                await self.fallback(scope, _replayed(b"".join(chunks), more, receive), send)
                return
        body = b"".join(chunks)
        try:
            answer = await asyncio.get_running_loop().run_in_executor(self.pool, self._answer, body, *args)
        except RuntimeError:  # the ingest pool was shut down: the service is stopping
            answer = JSONResponse(
                {"detail": "the service is stopping"},
                status_code=503,
                headers={"Retry-After": str(RETRY_AFTER_S)},
            )
        self.metrics.ingest_answered(answer.status_code, len(body))
        await send(
            {"type": "http.response.start", "status": answer.status_code, "headers": answer.raw_headers}
        )
        await send({"type": "http.response.body", "body": answer.body})

    def _arguments(self, scope: Any, *, binary: bool) -> tuple[str | None, float | None] | None:
        """The request's Idempotency-Key and (binary batches) ``window_start``; None when the
        framework is to answer."""
        headers = scope["headers"]
        try:
            check_write_header(self.settings.auth, headers)
        except HTTPException:
            return None
        keys = [v for k, v in headers if k == b"idempotency-key"]
        if len(keys) > 1 or (keys and not 1 <= len(keys[0]) <= 128):
            return None
        declared = next((v for k, v in headers if k == b"content-length"), b"0")
        if not declared.isdigit() or int(declared) > self.settings.ingest.max_body_bytes:
            return None
        key = keys[0].decode("latin-1") if keys else None
        if not binary:
            return key, None
        ctype = next((v for k, v in headers if k == b"content-type"), b"").decode("latin-1")
        query = parse_qsl(scope["query_string"].decode("latin-1"), keep_blank_values=True)
        if (
            ctype.split(";")[0].strip() != COUNTS_MEDIA_TYPE
            or len(query) != 1
            or query[0][0] != "window_start"
        ):
            return None
        if not _PLAIN_NUMBER.fullmatch(query[0][1]) or not math.isfinite(window_start := float(query[0][1])):
            return None
        return key, window_start

    def _answer(self, body: bytes, key: str | None, window_start: float | None) -> Response:
        """On the ingest thread: the batch stored and acknowledged, or the refusal."""
        try:
            if window_start is None:
                ack = _ingest_json(body, self.engine, self.settings, key)
            else:
                ack = _ingest_counts(body, window_start, self.engine, self.settings, key)
        except RegimetuneError as exc:
            return error_response(exc)
        except RequestValidationError as exc:
            return invalid_response(exc)
        except Exception:
            log.exception("ingest batch failed")
            return PlainTextResponse("Internal Server Error", status_code=500)
        return Response(ack.model_dump_json(), media_type="application/json")


def _replayed(body: bytes, more: bool, receive: Any) -> Any:
    """``receive`` with ``body`` (read already) handed out first."""
    first = True

    async def replay() -> Any:
        nonlocal first
        if first:
            first = False
            return {"type": "http.request", "body": body, "more_body": more}
        return await receive()

    return replay
