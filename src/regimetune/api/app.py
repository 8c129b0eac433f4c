"""The application factory: ``create_app(settings)`` wires store, engine, push worker, jobs,
routes, auth, metrics and the error handler. Nothing happens at import time."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from concurrent.futures import Executor
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from prometheus_client import CollectorRegistry

from regimetune import __version__
from regimetune.api.auth import WriteTokenFirst
from regimetune.api.docs import install_offline_docs
from regimetune.api.errors import BodyLimit, install_error_handlers
from regimetune.api.metrics import IngestAccounting, Metrics
from regimetune.api.outbox import SqlOutboxStore
from regimetune.api.routes import ROUTERS
from regimetune.api.routes.policies import PolicyFastPath
from regimetune.api.settings import PushSettings, Settings
from regimetune.api.store import Store
from regimetune.control.engine import Engine
from regimetune.control.jobs import JobManager
from regimetune.models import ConfigError, Objective, PushOutcome, TuningRun
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


_VIA_FRAMEWORK = "regimetune.via_framework"  # scope key: the fast path fell back to the framework


class _Service(FastAPI):
    """FastAPI with ``GET /v1/policy`` (what storage daemons poll, maybe thousands of times a
    second) answered by :class:`PolicyFastPath` before the framework: no telemetry check, no
    middleware stack, no routing, a fraction of the CPU and GIL time per request. Latency is
    still recorded under the route's template. Reads that need a token, the 404 before the
    first version and a failure of the fast path go through the framework as any request."""

    policy_fast_path: PolicyFastPath | None = None
    policy_duration: Any = None  # the latency histogram's child for the route

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        fast = self.policy_fast_path
        if (
            fast is None
            or scope["type"] != "http"
            or scope["path"] != "/v1/policy"
            or scope["method"] != "GET"
        ):
            await super().__call__(scope, receive, send)
            return
        t0 = time.perf_counter()
        started = False

        async def sent(message: Any) -> None:
            nonlocal started
            started = True
            await send(message)

        try:
            await fast(scope, receive, sent)
        except Exception:
            if started:
                raise
            log.exception("GET /v1/policy fast path failed; answering through the framework")
            scope.pop(_VIA_FRAMEWORK, None)
            await super().__call__(scope, receive, send)
            return
        if not scope.get(_VIA_FRAMEWORK):  # the framework's timing middleware saw it otherwise
            self.policy_duration.observe(time.perf_counter() - t0)


def _on_delivery(store: Store, metrics: Metrics) -> Any:
    def handle(ev: DeliveryEvent) -> None:
        metrics.pushes.labels(outcome=ev.kind).inc()
        if ev.kind == "delivered":
            store.set_outcome(
                ev.version,
                PushOutcome.DELIVERED,
                "delivered" + (" (backend already held it)" if ev.duplicate else ""),
            )
        elif ev.kind == "superseded":
            store.set_outcome(ev.version, PushOutcome.SUPERSEDED, f"not delivered: {ev.error}")
        elif ev.kind in ("failed", "refused"):
            kept = "none" if ev.in_force is None else f"version {ev.in_force}"
            what = "refused by the backend" if ev.kind == "refused" else "push failed"
            store.set_outcome(
                ev.version,
                PushOutcome.REFUSED if ev.kind == "refused" else PushOutcome.FAILED,
                f"{what} ({ev.error}); later versions go on; the backend keeps {kept}",
            )
        elif ev.kind == "stalled":
            store.set_outcome(
                ev.version,
                PushOutcome.PENDING,
                f"backend behind: {ev.attempts} failed attempts ({ev.error}); still retrying",
            )

    return handle


def create_app(
    settings: Settings,
    *,
    registry: CollectorRegistry | None = None,
    backend: Backend | None = None,
    executor: Executor | None = None,
    jobs_runner: Any = None,
) -> FastAPI:
    """Build the service. ``backend`` overrides the push adapter the settings name (tests
    inject a recording one); ``executor`` the tuning-job pool; ``registry`` the metrics
    registry (a fresh one by default)."""
    if not settings.auth.write_tokens and not settings.auth.allow_anonymous_writes:
        raise ConfigError(
            "no write token configured: set REGIMETUNE_AUTH__WRITE_TOKENS='[\"<token>\"]' "
            "(or auth.allow_anonymous_writes=true on a trusted network)"
        )
    metrics = Metrics.create(registry)
    store = Store.open(settings.store)
    adapter = backend if backend is not None else make_backend(settings.push)
    outbox = SqlOutboxStore(store)
    worker = None
    if adapter is not None:
        p = settings.push
        worker = OutboxWorker(
            outbox,
            adapter,
            retry=RetryPolicy(
                base=p.backoff_base_s, cap=max(p.backoff_max_s, p.backoff_base_s), max_attempts=p.max_attempts
            ),
            on_event=_on_delivery(store, metrics),
            supersede=p.supersede,
        )
    engine = Engine(
        settings=settings,
        store=store,
        metrics=metrics,
        pushing=adapter is not None,
        on_version=(lambda _v: worker.notify()) if worker is not None else None,
    )
    jobs_kw: dict[str, Any] = {} if jobs_runner is None else {"runner": jobs_runner}

    def applied(run: TuningRun, apply: bool) -> None:
        if not apply:
            return
        # a job tunes one part of a regime's policy (cache limits or rescaling weights);
        # the other part stays as it was
        keep = "weights" if run.objective is Objective.CACHE else "cache"
        for rid, policy in run.policies.items():
            old = store.regime_policy(rid)
            if old is not None:
                policy = policy.model_copy(update={keep: getattr(old, keep)})
            store.put_regime_policy(policy)
            engine.apply_policy_now(rid, f"tuning job {run.id} tuned the policy of the current regime")

    jobs = JobManager(
        store=store,
        settings=settings.tuning,
        metrics=metrics,
        executor=executor,
        on_success=applied,
        detector_state=engine.detector_state,
        window_s=settings.engine.window_s,
        **jobs_kw,
    )
    tuning_for: set[int] = set()

    def tune_unknown(regime_id: int) -> None:
        """A change to a regime without a policy: tune on the configured trace (once per
        regime); the safe default stays in force meanwhile."""
        trace = settings.engine.tuning_trace
        if not settings.engine.tune_unknown_regimes or trace is None or regime_id in tuning_for:
            return
        tuning_for.add(regime_id)
        try:
            jobs.submit(trace=trace, objective=Objective.CACHE, budget=None, optimizer="auto", apply=True)
        except Exception:
            log.exception("cannot start a tuning job for regime %d", regime_id)

    engine.on_unknown_regime = tune_unknown
    metrics.watch_engine(engine)
    engine.start()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        jobs.recover()  # jobs a crash left "running" are interrupted; stale uploads go
        if worker is not None:
            app.state.worker_thread = worker.start(idle=settings.push.poll_interval_s)
        try:
            yield
        finally:
            engine.stop()
            if worker is not None:
                worker.stop()
            if adapter is not None and backend is None:
                adapter.close()
            jobs.shutdown()
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
    app.state.engine = engine
    app.state.metrics = metrics
    app.state.outbox = outbox
    app.state.worker = worker
    app.state.worker_thread = None
    app.state.jobs = jobs
    install_error_handlers(app)
    install_offline_docs(app)
    for router in ROUTERS:
        app.include_router(router)
    app.add_middleware(BodyLimit, limit=settings.ingest.max_body_bytes, prefixes=("/v1/ingest",))
    app.add_middleware(
        BodyLimit, limit=settings.tuning.max_upload_bytes, prefixes=("/v1/tuning-jobs/upload",)
    )
    app.add_middleware(WriteTokenFirst, auth=settings.auth)  # before any body is read
    app.add_middleware(IngestAccounting, metrics=metrics)  # sees every ingest refusal, 401s too
    app.add_middleware(_Timing, metrics=metrics)
    if not settings.auth.protect_reads:

        async def framework(scope: Any, receive: Any, send: Any) -> None:
            scope[_VIA_FRAMEWORK] = True
            await FastAPI.__call__(app, scope, receive, send)

        app.policy_fast_path = PolicyFastPath(framework, store=store)
        app.policy_duration = metrics.request_duration.labels(route="/v1/policy", method="GET")
    return app


__all__ = ["create_app", "make_backend"]
