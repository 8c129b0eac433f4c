"""Tuning jobs: tune on a recorded trace in a background worker pool (a local
``ProcessPoolExecutor`` by default), with status and result in the store.

The work itself is the tuner's (:func:`run_tuning`, which calls ``regimetune.tuner``); this
module only schedules it and records what became of it.
"""

from __future__ import annotations

import contextlib
import logging
import tempfile
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from regimetune.api.metrics import Metrics
from regimetune.api.settings import TuningSettings
from regimetune.api.store import Store
from regimetune.models import (
    InputError,
    NotFoundError,
    Objective,
    PolicyFile,
    RunStatus,
    TuningError,
    TuningRun,
)

log = logging.getLogger(__name__)


def run_tuning(trace: str, objective: str, budget: int, optimizer: str) -> dict[str, Any]:
    """Run one tuning session (in a worker process); returns the policy file as JSON data.

    The tuner's trace-level entry point is looked up at call time so the service runs while
    the tuner grows; a missing entry point fails the job with a clear reason.
    """
    from regimetune import tuner

    entry: Callable[..., Any] | None = getattr(tuner, "tune_trace", None)
    if entry is None:
        raise TuningError("this build of regimetune.tuner has no trace-level entry point (tune_trace)")
    result = entry(trace, objective=objective, budget=budget, optimizer=optimizer)
    pf = result if isinstance(result, PolicyFile) else getattr(result, "policy_file", None)
    if not isinstance(pf, PolicyFile):
        raise TuningError("the tuner returned no policy file")
    report = getattr(result, "report", {}) or {}
    return {"policy_file": pf.model_dump(mode="json"), "report": report}


class JobManager:
    """Submit jobs to ``executor`` (built from settings when None) and record their runs.

    ``on_success(run)`` is called with the finished run (the app stores its policies when
    the job asked to ``apply`` them)."""

    def __init__(
        self,
        *,
        store: Store,
        settings: TuningSettings,
        metrics: Metrics,
        executor: Executor | None = None,
        runner: Callable[..., dict[str, Any]] = run_tuning,
        on_success: Callable[[TuningRun, bool], None] | None = None,
    ) -> None:
        self.store = store
        self.settings = settings
        self.metrics = metrics
        self.executor = executor
        self.runner = runner
        self.on_success = on_success
        self._lock = threading.Lock()
        self._futures: dict[str, Future[dict[str, Any]]] = {}

    def _pool(self) -> Executor:
        with self._lock:
            if self.executor is None:
                cls = ProcessPoolExecutor if self.settings.executor == "process" else ThreadPoolExecutor
                self.executor = cls(max_workers=self.settings.max_workers)
            return self.executor

    def resolve_trace(self, path: str) -> str:
        """A server-side trace path, allowed only under ``tuning.trace_dirs``."""
        if not self.settings.trace_dirs:
            raise InputError(
                "server-side trace paths are disabled (tuning.trace_dirs is empty); upload the trace"
            )
        p = Path(path)
        try:
            real = p.resolve(strict=False)
        except (OSError, RuntimeError) as exc:
            raise InputError(f"invalid trace path: {exc}") from None
        for d in self.settings.trace_dirs:
            root = Path(d).resolve()
            if real.is_relative_to(root):
                if not real.is_file():
                    raise NotFoundError(f"no trace file {path!r} under the allowed directories")
                return str(real)
        raise InputError(f"trace path {path!r} is not under an allowed directory (tuning.trace_dirs)")

    def save_upload(self, data: bytes, filename: str) -> str:
        base = Path(self.settings.upload_dir or tempfile.gettempdir()) / "regimetune-uploads"
        base.mkdir(parents=True, exist_ok=True)
        name = Path(filename).name or "trace"
        target = base / f"{uuid.uuid4().hex}-{name}"
        target.write_bytes(data)
        return str(target)

    def submit(
        self, *, trace: str, objective: Objective, budget: int | None, optimizer: str, apply: bool
    ) -> TuningRun:
        run = TuningRun(
            id=uuid.uuid4().hex,
            objective=objective,
            optimizer=optimizer,
            budget=budget or self.settings.budget,
            status=RunStatus.RUNNING,
            trace=trace,
        )
        self.store.save_job(run)
        fut = self._pool().submit(self.runner, trace, objective.value, run.budget, optimizer)
        with self._lock:
            self._futures[run.id] = fut
        fut.add_done_callback(lambda f: self._finished(run, f, apply))
        return run

    def _finished(self, run: TuningRun, fut: Future[dict[str, Any]], apply: bool) -> None:
        with self._lock:
            self._futures.pop(run.id, None)
        try:
            out = fut.result()
            pf = PolicyFile.model_validate(out["policy_file"])
            policies = {
                rid: p.model_copy(update={"regime_id": rid, "source": "tuned"})
                for rid, p in pf.regimes.items()
            }
            done = run.model_copy(
                update={
                    "status": RunStatus.SUCCEEDED,
                    "policies": policies,
                    "report": _jsonable(out.get("report", {})),
                    "best_value": _best(out.get("report", {})),
                }
            )
        except Exception as exc:  # a job's failure is its result, never the service's
            reason = str(exc) or type(exc).__name__
            done = run.model_copy(update={"status": RunStatus.FAILED, "error": reason[:2000]})
        try:
            self.store.save_job(done)
        except Exception:
            log.exception("cannot record tuning job %s", run.id)
            return
        self.metrics.tuning_jobs.labels(status=done.status.value).inc()
        if done.status is RunStatus.SUCCEEDED and self.on_success is not None:
            try:
                self.on_success(done, apply)
            except Exception:
                log.exception("applying tuning job %s failed", run.id)

    def wait(self, job_id: str, timeout: float | None = None) -> TuningRun:
        with self._lock:
            fut = self._futures.get(job_id)
        if fut is not None:
            with contextlib.suppress(Exception):
                fut.result(timeout)
        return self.store.job(job_id)

    def shutdown(self) -> None:
        if self.executor is not None:
            self.executor.shutdown(wait=False, cancel_futures=True)


def _best(report: Any) -> float | None:
    v = report.get("best_value") if isinstance(report, dict) else None
    return float(v) if isinstance(v, int | float) else None


def _jsonable(x: Any) -> Any:
    import json

    try:
        return json.loads(json.dumps(x, default=float))
    except (TypeError, ValueError):
        return {}


__all__ = ["JobManager", "run_tuning"]
