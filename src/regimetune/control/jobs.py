"""Tuning jobs: tune on a recorded trace in a background worker pool, with status and result
in the store, contained so that the service's own life decides theirs.

- **Executor**: a local process pool by default (``tuning.executor = "process"``), a thread
  pool (``"thread"``), or a Dask scheduler address (``"tcp://host:8786"``: the job's driver
  runs in a thread here and its candidate evaluations on the cluster).
- **Contained**: pool processes are spawned, not forked, so they hold none of the service's
  sockets; each runs in its own process group, ignores Ctrl-C (the service stops it) and exits
  with its children when the service is gone (a thread watches the parent: ``PR_SET_PDEATHSIG``
  would fire when the *thread* that spawned the worker exits, not the service). Shutdown
  stops the groups (SIGTERM, then SIGKILL).
- **Recorded**: a job's evaluations are checkpointed as they complete; a job the service did
  not see finish (a crash, SIGKILL) is marked ``interrupted`` on the next start with those
  evaluations, and :meth:`JobManager.restart` resumes it from them.
- **Failures stay a job's own**: errors cross the pool intact (the trace error names file and
  line), a broken pool is reported by readiness and replaced for the next job, and an upload
  is deleted when its job ends (stale ones at startup).

The work itself is the tuner's (:func:`run_tuning`, which calls ``regimetune.tuner``); this
module only schedules it and records what became of it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import multiprocessing
import os
import signal
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import BrokenExecutor, Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from regimetune.control.recorder import Recorder
from regimetune.control.settings import TuningSettings
from regimetune.control.store import JobStore
from regimetune.models import (
    ConflictError,
    Evaluation,
    InputError,
    NotFoundError,
    Objective,
    PolicyFile,
    RunStatus,
    TuningError,
    TuningRun,
)

log = logging.getLogger(__name__)

MAX_UPLOAD_NAME = 100
"""Characters of an upload's own name kept in the stored file's name (its end: the suffix
names the format); the file system allows 255 bytes for the whole name."""
_STOP_GRACE_S = 3.0
_ERROR_CHARS = 2000
"""Characters of a job's error kept in its record."""


def run_tuning(
    trace: str,
    objective: str,
    budget: int,
    optimizer: str,
    *,
    window_s: float = 10.0,
    detector_state: dict[str, Any] | None = None,
    executor: str | None = None,
    checkpoint: str | None = None,
    resume: list[dict[str, Any]] | None = None,
    current: dict[int, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Run one tuning session on a trace file (in a worker) with :func:`regimetune.tuner.tune`
    and return the policy file and the report as JSON data: the cache limits or the
    Pufferscale weights per regime.

    The trace's windows go through a detector restored from the service's own detector
    state (when given), so the tuned policies are keyed by the regime ids the service uses.
    ``current`` (the service's policies per regime) is where the search starts and what a
    tuned policy must beat on held-apart data to replace it. ``executor`` (a Dask scheduler
    address) runs the candidate evaluations; without it they run here. A cache job appends
    each evaluation to ``checkpoint`` (JSON lines) and starts from the evaluations in
    ``resume``; a rescale job starts over.
    """
    from regimetune.collectors import read_trace
    from regimetune.regimes import OnlineRegimeDetector
    from regimetune.tuner import CacheConfig, RescaleConfig, Validation, Workload, tune
    from regimetune.tuner.config import DEFAULT_OPTIMIZER

    detector = OnlineRegimeDetector.from_state(detector_state) if detector_state else None
    chosen = DEFAULT_OPTIMIZER if optimizer == "auto" else optimizer
    if objective not in (Objective.CACHE.value, Objective.RESCALE.value):
        raise TuningError(f"unknown tuning objective {objective!r}")
    work = Workload.from_batches(
        read_trace(trace), window_s=window_s, detector=detector, name=Path(trace).name
    )
    config = (CacheConfig if objective == Objective.CACHE.value else RescaleConfig)(
        budget=budget, optimizer=chosen
    )
    in_force = PolicyFile.model_validate({"regimes": current}) if current else None
    before: dict[str, Any] = {"validation": Validation(current=in_force), "warm_start": in_force}
    if objective == Objective.RESCALE.value:
        return _run_rescale(work, config, executor=executor, progress=checkpoint, **before)
    with _Checkpoint(checkpoint) as record:
        result = tune(
            work,
            objective,
            config=config,
            executor=executor,
            workers=0,  # without a cluster: this job is already one worker of the pool
            resume=[Evaluation.model_validate(e) for e in resume or []],
            on_evaluation=record,
            **before,
        )
    return {"policy_file": result.policy_file.model_dump(mode="json"), "report": result.report}


def _run_rescale(
    work: Any, config: Any, *, executor: str | None, progress: str | None, **before: Any
) -> dict[str, Any]:
    """A rescale job; without a cluster its evaluations run here through a
    :class:`_CountingExecutor`, which appends a line to ``progress`` as each completes."""
    import contextlib

    from regimetune.tuner import tune
    from regimetune.tuner.optim.executors import open_executor

    with open_executor(executor) if executor else contextlib.nullcontext(_CountingExecutor(progress)) as pool:
        res = tune(work, Objective.RESCALE, config=config, executor=pool, **before)
    return {"policy_file": res.policy_file.model_dump(mode="json"), "report": res.report}


class _CountingExecutor(Executor):
    """Runs each evaluation inline (as ``executor=None`` would) and appends a line to
    ``path`` when it completes: a rescale job's progress, which the tuner reports no other
    way. The lines are not evaluations, so :func:`read_checkpoint` skips them."""

    def __init__(self, path: str | None) -> None:
        self.path = path

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        fut: Future[Any] = Future()
        try:
            fut.set_result(fn(*args, **kwargs))
        except Exception as exc:  # the driver reads it as that candidate's failure
            fut.set_exception(exc)
        if self.path is not None:
            with open(self.path, "a", encoding="utf-8") as f:
                f.write('{"progress": 1}\n')
        return fut


def count_lines(path: Path) -> int:
    """Lines in a checkpoint or progress file (0 when there is none)."""
    try:
        with path.open("rb") as f:
            return sum(1 for _ in f)
    except OSError:
        return 0


class _Checkpoint:
    """Appends each evaluation to a JSON-lines file (flushed, so a crash keeps what ran)."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self._file: Any = None

    def __enter__(self) -> Callable[[Evaluation], None] | None:
        if self.path is None:
            return None
        self._file = open(self.path, "a", encoding="utf-8")  # closed in __exit__
        return self

    def __call__(self, evaluation: Evaluation) -> None:
        self._file.write(evaluation.model_dump_json() + "\n")
        self._file.flush()

    def __exit__(self, *exc: object) -> None:
        if self._file is not None:
            self._file.close()


def read_checkpoint(path: Path) -> list[dict[str, Any]]:
    """The evaluations a checkpoint holds (a torn last line, from a crash mid-write, is skipped)."""
    out = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    for line in lines:
        try:
            out.append(Evaluation.model_validate_json(line).model_dump(mode="json"))
        except ValueError:
            continue
    return out


# --- the pool's processes --------------------------------------------------------------------


def _worker_init(service_pid: int) -> None:
    """First thing in every pool process: its own process group, Ctrl-C left to the service,
    and a watch that ends the group when the service is gone."""
    os.setpgid(0, 0)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_watch_parent, args=(service_pid,), name="parent-watch", daemon=True).start()


def _watch_parent(service_pid: int, interval_s: float = 0.2) -> None:
    while os.getppid() == service_pid:
        time.sleep(interval_s)
    os.killpg(0, signal.SIGKILL)  # this worker and whatever it started


def _stop_process_pool(pool: ProcessPoolExecutor, grace_s: float = _STOP_GRACE_S) -> None:
    """Stop every process of ``pool`` and its group: SIGTERM, then SIGKILL after ``grace_s``."""
    procs = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for p in procs:
            if p.exitcode is None:
                _signal_group(p.pid, sig)
        end = time.monotonic() + grace_s
        for p in procs:
            p.join(max(end - time.monotonic(), 0.0))
        if all(p.exitcode is not None for p in procs):
            return


def _signal_group(pid: int | None, sig: int) -> None:
    if pid is None:
        return
    try:
        if os.getpgid(pid) == pid:  # its own group (the initializer ran): the whole group
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _is_broken(executor: Executor | None) -> bool:
    return bool(getattr(executor, "_broken", False))


# --- the manager --------------------------------------------------------------------------


class JobManager:
    """Submit jobs to ``executor`` (built from settings when None) and record their runs.

    ``on_success(run, apply)`` is called with a run that succeeded, before it is recorded so
    (the controller stores its policies when the job asked to ``apply`` them). ``work_dir``
    holds uploads and checkpoints (by default a directory per store under
    ``tuning.upload_dir`` or the system's temp dir)."""

    def __init__(
        self,
        *,
        store: JobStore,
        settings: TuningSettings,
        recorder: Recorder,
        executor: Executor | None = None,
        runner: Callable[..., dict[str, Any]] = run_tuning,
        on_success: Callable[[TuningRun, bool], None] | None = None,
        detector_state: Callable[[], dict[str, Any] | None] | None = None,
        window_s: float = 10.0,
        work_dir: str | Path | None = None,
    ) -> None:
        self.store = store
        self.settings = settings
        self.recorder = recorder
        self.executor = executor
        self.runner = runner
        self.on_success = on_success
        self.detector_state = detector_state
        self.window_s = window_s
        self.work_dir = Path(work_dir) if work_dir is not None else None
        self._own_pool = executor is None
        self._closing = False
        self._lock = threading.Lock()
        self._futures: dict[str, Future[dict[str, Any]]] = {}
        self._done: dict[str, threading.Event] = {}

    # -- places ----------------------------------------------------------------------------
    def _dir(self, name: str) -> Path:
        if self.work_dir is None:
            tag = hashlib.sha256(self.store.location.encode()).hexdigest()[:16]
            base = Path(self.settings.upload_dir) if self.settings.upload_dir else Path(tempfile.gettempdir())
            self.work_dir = base / f"regimetune-jobs-{tag}"
        d = self.work_dir / name
        d.mkdir(parents=True, exist_ok=True)
        return d

    def _checkpoint(self, job_id: str) -> Path:
        return self._dir("checkpoints") / f"{job_id}.jsonl"

    def _is_upload(self, trace: str | None) -> bool:
        return trace is not None and Path(trace).parent == self._dir("uploads")

    # -- the pool --------------------------------------------------------------------------
    def _pool(self) -> Executor:
        with self._lock:
            if self._closing:
                raise ConflictError("the service is stopping; it takes no new tuning jobs")
            if self._own_pool and _is_broken(self.executor):
                log.warning("the tuning pool broke; starting a new one")
                assert self.executor is not None
                self.executor.shutdown(wait=False, cancel_futures=True)
                self.executor = None
            if self.executor is None:
                self.executor = self._new_pool()
            return self.executor

    def _new_pool(self) -> Executor:
        n = self.settings.max_workers
        if self.settings.executor == "process":
            return ProcessPoolExecutor(
                max_workers=n,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_worker_init,
                initargs=(os.getpid(),),
            )
        return ThreadPoolExecutor(max_workers=n, thread_name_prefix="tuning-job")

    def pool_ok(self) -> bool:
        """False while the pool is broken (a worker died); the next job replaces it."""
        return not _is_broken(self.executor)

    # -- inputs ----------------------------------------------------------------------------
    def resolve_trace(self, path: str) -> str:
        """A server-side trace path, allowed only under ``tuning.trace_dirs``."""
        if not self.settings.trace_dirs:
            raise InputError(
                "server-side trace paths are disabled (tuning.trace_dirs is empty); upload the trace"
            )
        p = Path(path)
        try:
            real = p.resolve(strict=False)
        except (OSError, RuntimeError, ValueError) as exc:
            raise InputError(f"invalid trace path: {exc}") from None
        for d in self.settings.trace_dirs:
            root = Path(d).resolve()
            if real.is_relative_to(root):
                if not real.is_file():
                    raise NotFoundError(f"no trace file {path!r} under the allowed directories")
                return str(real)
        raise InputError(f"trace path {path!r} is not under an allowed directory (tuning.trace_dirs)")

    def save_upload(self, data: bytes, filename: str) -> str:
        """Store an uploaded trace under a fresh name that keeps the end of ``filename`` (its
        suffix names the format), short enough for any file system."""
        name = Path(filename).name[-MAX_UPLOAD_NAME:].lstrip(".") or "trace"
        target = self._dir("uploads") / f"{uuid.uuid4().hex}-{name}"
        target.write_bytes(data)
        return str(target)

    # -- jobs ------------------------------------------------------------------------------
    def submit(
        self,
        *,
        trace: str,
        objective: Objective,
        budget: int | None,
        optimizer: str,
        apply: bool,
        resume: list[dict[str, Any]] | None = None,
        resumed_from: str | None = None,
    ) -> TuningRun:
        """Start a job; ``resume`` holds the evaluations of the interrupted job it continues."""
        run = TuningRun(
            id=uuid.uuid4().hex,
            objective=objective,
            optimizer=optimizer,
            budget=budget or self.settings.budget,
            status=RunStatus.RUNNING,
            trace=trace,
            report={"apply": apply, **({"resumed_from": resumed_from} if resumed_from else {})},
        )
        pool = self._pool()
        self.store.save_job(run)
        state = self.detector_state() if self.detector_state is not None else None
        dask = self.settings.executor if "://" in self.settings.executor else None
        try:
            fut = pool.submit(
                self.runner,
                trace,
                objective.value,
                run.budget,
                optimizer,
                window_s=self.window_s,
                detector_state=state,
                current={r: p.model_dump(mode="json") for r, p in self.store.regime_policies().items()},
                **self._runner_options(run.id, dask, resume),
            )
        except RuntimeError as exc:  # a pool that broke between the check and the submit
            self._end(run.model_copy(update={"status": RunStatus.FAILED, "error": f"cannot start: {exc}"}))
            raise TuningError(f"the tuning pool cannot take jobs: {exc}") from exc
        with self._lock:
            self._futures[run.id] = fut
            self._done[run.id] = threading.Event()
        fut.add_done_callback(lambda f: self._finished(run, f, apply))
        return run

    def _runner_options(
        self, job_id: str, dask: str | None, resume: list[dict[str, Any]] | None
    ) -> dict[str, Any]:
        return {"executor": dask, "checkpoint": str(self._checkpoint(job_id)), "resume": resume}

    def restart(self, job_id: str, *, apply: bool | None = None) -> TuningRun:
        """Resume an interrupted job from its stored evaluations, as a new job."""
        old = self.store.job(job_id)
        if old.status is not RunStatus.INTERRUPTED:
            raise ConflictError(
                f"tuning job {job_id} is {old.status.value}; only an interrupted job restarts"
            )
        if "restarted_as" in old.report:
            raise ConflictError(f"tuning job {job_id} was already restarted as {old.report['restarted_as']}")
        if old.trace is None or not Path(old.trace).is_file():
            raise ConflictError(f"the trace of tuning job {job_id} is gone; submit a new job")
        evaluations = list(old.report.get("evaluations", []))
        new = self.submit(
            trace=old.trace,
            objective=old.objective,
            budget=old.budget,
            optimizer=old.optimizer,
            apply=bool(old.report.get("apply", False)) if apply is None else apply,
            resume=evaluations if old.objective is Objective.CACHE else None,
            resumed_from=job_id,
        )
        self.store.save_job(old.model_copy(update={"report": {**old.report, "restarted_as": new.id}}))
        return new

    def recover(self) -> list[TuningRun]:
        """At startup: mark the jobs a previous process left running as ``interrupted`` (with
        the evaluations their checkpoints hold), and delete uploads no job can use any more."""
        interrupted = []
        for run in self.store.jobs(limit=100_000):
            if run.status in (RunStatus.RUNNING, RunStatus.PENDING):
                run = self._interrupted(run, "the service stopped while it ran")
                self.store.save_job(run)
                self.recorder.job_ended(run.status.value)
            if run.status is RunStatus.INTERRUPTED and "restarted_as" not in run.report:
                interrupted.append(run)
        keep = {Path(r.trace).name for r in interrupted if r.trace is not None}
        for folder, keep_names in (("uploads", keep), ("checkpoints", set())):
            for f in self._dir(folder).iterdir():
                if f.name not in keep_names:
                    f.unlink(missing_ok=True)
        return interrupted

    def _interrupted(self, run: TuningRun, why: str) -> TuningRun:
        evaluations = read_checkpoint(self._checkpoint(run.id))
        values = [e["value"] for e in evaluations if e.get("value") is not None]
        return run.model_copy(
            update={
                "status": RunStatus.INTERRUPTED,
                "n_evaluations": len(evaluations),
                "best_value": min(values) if values else None,
                "error": f"{why}; POST /v1/tuning-jobs/{run.id}/restart resumes it from its "
                f"{len(evaluations)} stored evaluations",
                "report": {**run.report, "evaluations": evaluations},
            }
        )

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
        if fut.cancelled() or (self._closing and fut.exception() is not None):
            done = self._interrupted(run, "the service stopped while it ran")
        else:
            done = self._outcome(run, fut)
        # Its policies are applied before the job is recorded as succeeded: a client that
        # sees "succeeded" finds them in force.
        if done.status is RunStatus.SUCCEEDED and self.on_success is not None:
            try:
                self.on_success(done, apply)
            except Exception as exc:
                log.exception("applying tuning job %s failed", run.id)
                why = f"the job tuned its policies, but applying them failed: {exc}"
                done = done.model_copy(update={"error": why[:_ERROR_CHARS]})
        self._end(done)

    def _outcome(self, run: TuningRun, fut: Future[dict[str, Any]]) -> TuningRun:
        try:
            out = fut.result()
            pf = PolicyFile.model_validate(out["policy_file"])
            policies = {
                rid: p.model_copy(update={"regime_id": rid, "source": "tuned"})
                for rid, p in pf.regimes.items()
            }
            report = _jsonable(out.get("report", {}))
            return run.model_copy(
                update={
                    "status": RunStatus.SUCCEEDED,
                    "policies": policies,
                    "report": {**run.report, **report},
                    "best_value": _best(report),
                    "n_evaluations": _count(report),
                }
            )
        except BrokenExecutor as exc:
            reason = f"the tuning worker died (killed, or out of memory?): {exc}"
        except Exception as exc:  # a job's failure is its result, never the service's
            reason = f"{type(exc).__name__}: {exc}" if not str(exc) else str(exc)
        return run.model_copy(update={"status": RunStatus.FAILED, "error": reason[:_ERROR_CHARS]})

    def _end(self, run: TuningRun) -> None:
        """Store a job's last state; its checkpoint goes, and its upload unless it can restart."""
        try:
            self.store.save_job(run)
        except Exception:
            log.exception("cannot record tuning job %s", run.id)
            return
        self.recorder.job_ended(run.status.value)
        self._checkpoint(run.id).unlink(missing_ok=True)
        if run.status is not RunStatus.INTERRUPTED and self._is_upload(run.trace):
            Path(str(run.trace)).unlink(missing_ok=True)

    def evaluations_done(self, run: TuningRun) -> int:
        """Evaluations a job has completed: counted from its checkpoint while it runs (the
        stored run says 0 until the end), the stored count once it ended."""
        if run.status in (RunStatus.RUNNING, RunStatus.PENDING):
            return count_lines(self._checkpoint(run.id))
        return run.n_evaluations

    def wait(self, job_id: str, timeout: float | None = None) -> TuningRun:
        """Wait until the job is finished and recorded (or ``timeout``); returns its run."""
        with self._lock:
            done = self._done.get(job_id)
        if done is not None:
            done.wait(timeout)
        return self.store.job(job_id)

    def shutdown(self) -> None:
        """Stop the pool with the service: running jobs are recorded as ``interrupted`` and
        the pool's process groups are stopped (SIGTERM, then SIGKILL)."""
        with self._lock:
            self._closing = True
            pool, own = self.executor, self._own_pool
            pending = dict(self._done)
        if pool is None:
            return
        if own and isinstance(pool, ProcessPoolExecutor):
            _stop_process_pool(pool)
        else:
            pool.shutdown(wait=False, cancel_futures=True)
        for event in pending.values():
            event.wait(_STOP_GRACE_S)


def _best(report: Any) -> float | None:
    v = report.get("best_value") if isinstance(report, dict) else None
    return float(v) if isinstance(v, int | float) else None


def _count(report: Any) -> int:
    """Evaluations a report counts: a cache job's ``n_evaluations``, or the sum of a rescale
    job's per-regime ``evaluations``."""
    if not isinstance(report, dict):
        return 0
    v = report.get("n_evaluations")
    if isinstance(v, int):
        return v
    per_regime = [r.get("evaluations") for r in report.values() if isinstance(r, dict)]
    return sum(n for n in per_regime if isinstance(n, int))


def _jsonable(x: Any) -> Any:
    try:
        return json.loads(json.dumps(x, default=float))
    except (TypeError, ValueError):
        return {}


__all__ = ["JobManager", "read_checkpoint", "run_tuning"]
