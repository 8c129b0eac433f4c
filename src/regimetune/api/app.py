"""The application factory: ``create_app(settings)`` wires the store, the application
(:class:`regimetune.control.Controller`), the push worker, routes, auth, metrics and the
error handler. Nothing happens at import time."""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from prometheus_client import CollectorRegistry

from regimetune import __version__
from regimetune.api.auth import WriteTokenFirst, document_open_reads
from regimetune.api.docs import install_offline_docs
from regimetune.api.errors import BodyLimit, install_error_handlers
from regimetune.api.metrics import IngestAccounting, Metrics
from regimetune.api.outbox import SqlOutbox
from regimetune.api.routes import ROUTERS
from regimetune.api.routes.ingest import COUNTS_PATH, JSON_PATH, IngestFastPath, document_ingest_body
from regimetune.api.routes.policies import PolicyFastPath
from regimetune.api.settings import PushSettings, Settings
from regimetune.api.store import SqlStore
from regimetune.control.controller import Controller
from regimetune.control.jobs import run_tuning
from regimetune.models import ConfigError
from regimetune.push import Backend, DeliveryEvent, OutboxWorker, RetryPolicy, backend_for

log = logging.getLogger(__name__)


def make_backend(cfg: PushSettings) -> Backend | None:
    """The push adapter the settings name (None: pull only), picked by the push registry."""
    return backend_for(
        cfg.backend,
        cfg.url,
        token=None if cfg.token is None else cfg.token.get_secret_value(),
        timeout=cfg.timeout_s,
        method=cfg.method,
        payload=cfg.payload,
        headers=cfg.headers,
    )


class _Timing:
    """ASGI middleware: request latency by route template (bounded labels)."""

    def __init__(self, app: Any, *, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        t0 = time.perf_counter()
        try:
            await self.app(scope, receive, send)
        finally:
            route = scope.get("route")
            path = getattr(route, "path", "unmatched")
            self.metrics.request_duration.labels(route=path, method=scope["method"]).observe(
                time.perf_counter() - t0
            )


_VIA_FRAMEWORK = "regimetune.via_framework"  # scope key: a fast path handed the request on


class _Service(FastAPI):
    """FastAPI with the requests that come by the hundred a second answered before the
    framework: ``GET /v1/policy`` (what storage daemons poll) by :class:`PolicyFastPath` and
    ``POST /v1/ingest[/counts]`` (what they send) by :class:`IngestFastPath`: no telemetry
    check, no middleware stack, no routing, a fraction of the event loop's time per request.
    Latency is still recorded under the route's template. What a fast path hands on (reads
    that need a token, the 404 before the first version, refused writes) goes through the
    framework as any request, and so does a request whose fast path failed before answering
    or reading the body."""

    policy_fast_path: PolicyFastPath | None = None
    ingest_fast_path: IngestFastPath | None = None
    fast_durations: dict[str, Any]  # the latency histogram's child of each fast path's route

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        fast: Any = None
        if scope["type"] == "http":
            if scope["method"] == "GET" and scope["path"] == "/v1/policy":
                fast = self.policy_fast_path
            elif scope["method"] == "POST" and scope["path"] in (JSON_PATH, COUNTS_PATH):
                fast = self.ingest_fast_path
        if fast is None:
            await super().__call__(scope, receive, send)
            return
        t0 = time.perf_counter()
        started = False

        async def sent(message: Any) -> None:
            nonlocal started
            started = True
            await send(message)

        async def received() -> Any:
            nonlocal started
            started = True  # the body is being read: the framework could not read it again
            return await receive()

        try:
            await fast(scope, received, sent)
        except Exception:
            if started:
                raise
            log.exception(
                "%s %s fast path failed; answering through the framework", scope["method"], scope["path"]
            )
            scope.pop(_VIA_FRAMEWORK, None)
            await super().__call__(scope, receive, send)
            return
        if not scope.get(_VIA_FRAMEWORK):  # the framework's timing middleware saw it otherwise
            self.fast_durations[scope["path"]].observe(time.perf_counter() - t0)


def create_app(
    settings: Settings,
    *,
    registry: CollectorRegistry | None = None,
    backend: Backend | None = None,
    executor: Executor | None = None,
    jobs_runner: Callable[..., dict[str, Any]] | None = None,
    clock: Callable[[], float] = time.time,
) -> FastAPI:
    """Build the service: open the store and restore the application's state (a bad policy
    file or a detector state that disagrees with the store's fails here); the lifespan
    replays the stored batches and runs the engine, the tuning pool and the push worker.
    ``backend`` overrides the push adapter the settings name (tests inject a recording one);
    ``executor`` the tuning-job pool; ``jobs_runner`` what a tuning job runs; ``registry``
    the metrics registry (a fresh one by default); ``clock`` the wall clock the engine reads
    (batch admission, stale telemetry, decision times; tests advance one by hand)."""
    if not settings.auth.write_tokens and not settings.auth.allow_anonymous_writes:
        raise ConfigError(
            "no write token configured: set REGIMETUNE_AUTH__WRITE_TOKENS='[\"<token>\"]' "
            "(or auth.allow_anonymous_writes=true on a trusted network)"
        )
    metrics = Metrics.create(registry)
    store = SqlStore.open(settings.store)
    adapter = backend if backend is not None else make_backend(settings.push)
    outbox = SqlOutbox(store)
    worker: OutboxWorker | None = None
    control = Controller(
        settings=settings,
        store=store,
        recorder=metrics,
        pushing=adapter is not None,
        on_version=lambda _v: worker.notify() if worker is not None else None,
        executor=executor,
        runner=run_tuning if jobs_runner is None else jobs_runner,
        clock=clock,
    )
    if adapter is not None:
        worker = _push_worker(settings.push, outbox, adapter, on_event=control.delivered)
    try:
        control.restore()
    except BaseException:
        store.close()
        raise
    metrics.watch_engine(control.engine)
    metrics.watch_delivery(lambda: store.policy_status()[2])
    metrics.watch_store(lambda: store.write_error)

    ingest_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="regimetune-ingest")

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        control.start()  # jobs a crash left running are interrupted; stored batches replayed
        gc.collect()
        gc.freeze()  # what start-up made lives on: full collections no longer walk it
        if worker is not None:
            app.state.worker_thread = worker.start(idle=settings.push.poll_interval_s)
        try:
            yield
        finally:
            ingest_pool.shutdown(wait=True)
            control.stop()
            if worker is not None:
                worker.stop()
            if adapter is not None and backend is None:
                adapter.close()
            store.close()

    app = _Service(
        title="regimetune",
        version=__version__,
        description="Online workload-regime detection and per-regime tuning of elastic storage services.",
        lifespan=lifespan,
        docs_url=None,  # served with packaged assets by install_offline_docs
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.store = store
    app.state.control = control
    app.state.engine = control.engine
    app.state.jobs = control.jobs
    app.state.metrics = metrics
    app.state.outbox = outbox
    app.state.ingest_pool = ingest_pool  # parses and stores batches, off the event loop
    app.state.worker = worker
    app.state.worker_thread = None
    install_error_handlers(app)
    install_offline_docs(app)
    for router in ROUTERS:
        app.include_router(router)
    document_ingest_body(app)
    if not settings.auth.protect_reads:
        document_open_reads(app)
    app.add_middleware(BodyLimit, limit=settings.ingest.max_body_bytes, prefixes=("/v1/ingest",))
    app.add_middleware(
        BodyLimit, limit=settings.tuning.max_upload_bytes, prefixes=("/v1/tuning-jobs/upload",)
    )
    app.add_middleware(WriteTokenFirst, auth=settings.auth)  # before any body is read
    app.add_middleware(IngestAccounting, metrics=metrics)  # sees every ingest refusal, 401s too
    app.add_middleware(_Timing, metrics=metrics)

    async def framework(scope: Any, receive: Any, send: Any) -> None:
        scope[_VIA_FRAMEWORK] = True
        await FastAPI.__call__(app, scope, receive, send)

    duration = metrics.request_duration.labels
    app.fast_durations = {path: duration(route=path, method="POST") for path in (JSON_PATH, COUNTS_PATH)}
    app.ingest_fast_path = IngestFastPath(
        framework, settings=settings, engine=control.engine, pool=ingest_pool, metrics=metrics
    )
    if not settings.auth.protect_reads:
        app.policy_fast_path = PolicyFastPath(framework, store=store)
        app.fast_durations["/v1/policy"] = duration(route="/v1/policy", method="GET")
    return app


def _push_worker(
    cfg: PushSettings, outbox: SqlOutbox, adapter: Backend, *, on_event: Callable[[DeliveryEvent], None]
) -> OutboxWorker:
    """The worker that delivers queued versions to the backend, with the settings' retries."""
    return OutboxWorker(
        outbox,
        adapter,
        retry=RetryPolicy(
            base=cfg.backoff_base_s,
            cap=max(cfg.backoff_max_s, cfg.backoff_base_s),
            max_attempts=cfg.max_attempts,
        ),
        on_event=on_event,
        supersede=cfg.supersede,
    )


__all__ = ["create_app", "make_backend"]
