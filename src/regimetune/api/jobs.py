"""Tuning jobs: tune on a recorded trace in a background worker pool (a local
``ProcessPoolExecutor`` by default), with status and result in the store.

The work itself is the tuner's (:func:`run_tuning`, which calls ``regimetune.tuner``); this
module only schedules it and records what became of it.
"""

from __future__ import annotations

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


def run_tuning(
    trace: str,
    objective: str,
    budget: int,
    optimizer: str,
    *,
    window_s: float = 10.0,
    detector_state: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run one tuning session on a trace file (in a worker process) and return the policy
    file and the report as JSON data: the cache limits per regime
    (:func:`~regimetune.tuner.sessions.tune_cache_batches`) or the Pufferscale weights per
    regime (:func:`~regimetune.tuner.rescale.session.tune_rescale`).

    The trace's windows go through a detector restored from the service's own detector
    state (when given), so the tuned policies are keyed by the regime ids the service uses.
    """
    from regimetune.collectors import read_trace
    from regimetune.regimes import OnlineRegimeDetector
    from regimetune.tuner.sessions import DEFAULT_OPTIMIZER, tune_cache_batches

    detector = OnlineRegimeDetector.from_state(detector_state) if detector_state else None
    chosen = DEFAULT_OPTIMIZER if optimizer == "auto" else optimizer
    if objective == Objective.RESCALE.value:
        from regimetune.tuner.rescale.session import tune_rescale

        res = tune_rescale(
            trace, budget=budget, optimizer=chosen, window_s=window_s, detector=detector, show=False
        )
        return {"policy_file": res.policy_file.model_dump(mode="json"), "report": res.report_json()}
    if objective != Objective.CACHE.value:
        raise TuningError(f"unknown tuning objective {objective!r}")
    result = tune_cache_batches(
        read_trace(trace),
        window_s=window_s,
        trace_name=Path(trace).name,
        detector=detector,
        optimizer=chosen,
        budget=budget,
        workers=0,  # this job is already one worker of the pool
    )
    return {"policy_file": result.policy_file.model_dump(mode="json"), "report": result.report}


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
        detector_state: Callable[[], dict[str, Any] | None] | None = None,
        window_s: float = 10.0,
    ) -> None:
        self.store = store
        self.settings = settings
        self.metrics = metrics
        self.executor = executor
        self.runner = runner
        self.on_success = on_success
        self.detector_state = detector_state
        self.window_s = window_s
        self._lock = threading.Lock()
        self._futures: dict[str, Future[dict[str, Any]]] = {}
        self._done: dict[str, threading.Event] = {}

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
        state = self.detector_state() if self.detector_state is not None else None
        fut = self._pool().submit(
            self.runner,
            trace,
            objective.value,
            run.budget,
            optimizer,
            window_s=self.window_s,
            detector_state=state,
        )
        with self._lock:
            self._futures[run.id] = fut
            self._done[run.id] = threading.Event()
        fut.add_done_callback(lambda f: self._finished(run, f, apply))
        return run

    def _finished(self, run: TuningRun, fut: Future[dict[str, Any]], apply: bool) -> None:
        try:
            self._record(run, fut, apply)
        finally:
            with self._lock:
                self._futures.pop(run.id, None)
                done = self._done.pop(run.id, None)
            if done is not None:
                done.set()

    def _record(self, run: TuningRun, fut: Future[dict[str, Any]], apply: bool) -> None:
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
        """Wait until the job is finished and recorded (or ``timeout``); returns its run."""
        with self._lock:
            done = self._done.get(job_id)
        if done is not None:
            done.wait(timeout)
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
