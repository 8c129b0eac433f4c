"""Tuning jobs in the service: a bad upload fails only its own job, a broken pool shows in
readiness and is replaced, uploads go when their job ends, interrupted jobs resume."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from regimetune.api.store import SqlStore
from regimetune.control.jobs import read_checkpoint, run_tuning
from regimetune.models import Objective, RunStatus, TuningRun
from regimetune.regimes import OnlineRegimeDetector

from .conftest import AUTH, SHORT_REGIME_S, TestClient, settings_for

UPLOAD = {**AUTH, "Content-Type": "application/octet-stream"}


@pytest.fixture(scope="module")
def trace_bytes(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    from regimetune.collectors import GeneratorConfig, generate, write_events

    path = tmp_path_factory.mktemp("trace") / "run.csv"
    write_events(generate(GeneratorConfig(duration_s=1800, workers=8, seed=3)), path)
    return path.read_bytes()


def upload(c: TestClient, data: bytes, filename: str, **params: object) -> dict:
    r = c.post(
        "/v1/tuning-jobs/upload", params={"filename": filename, **params}, content=data, headers=UPLOAD
    )
    assert r.status_code == 202, r.text
    return r.json()


def files(d: Path) -> list[Path]:
    return sorted(p for p in d.rglob("*") if p.is_file()) if d.exists() else []


def test_a_malformed_upload_fails_its_own_job_with_file_and_line_and_later_jobs_work(
    make_client, trace_bytes, tmp_path
) -> None:
    c = make_client(
        tuning={"executor": "process", "upload_dir": str(tmp_path / "work"), "budget": 4},
        engine={"window_s": 10.0},
    )
    lines = trace_bytes.split(b"\n")
    bad = b"\n".join([*lines[:2], b"yesterday,42,get,4096,-1,0", *lines[3:]])
    job = upload(c, bad, "bad.csv")
    run = c.app.state.jobs.wait(job["id"], timeout=120)
    assert run.status is RunStatus.FAILED
    assert "bad.csv:3" in run.error and "terminated abruptly" not in run.error
    assert c.get("/readyz").json()["checks"]["tuning_pool"] is True
    good = c.app.state.jobs.wait(upload(c, trace_bytes, "good.csv")["id"], timeout=120)
    assert good.status is RunStatus.SUCCEEDED, good.error
    assert good.n_evaluations == 4 and good.policies
    # both uploads (and checkpoints) are gone once their jobs ended
    assert files(tmp_path / "work") == []


def test_an_upload_name_of_any_allowed_length_is_stored(make_client, tmp_path) -> None:
    calls: list[str] = []

    def runner(trace: str, *a: object, **k: object) -> dict:
        calls.append(trace)
        return {"policy_file": {"regimes": {}}, "report": {}}

    from concurrent.futures import ThreadPoolExecutor

    from regimetune.api import create_app

    s = settings_for(tmp_path, tuning={"upload_dir": str(tmp_path / "work")})
    with ThreadPoolExecutor(1) as pool, TestClient(create_app(s, executor=pool, jobs_runner=runner)) as c:
        name = "a" * 251 + ".csv"
        job = upload(c, b"ts,key\n1,2\n", name)
        c.app.state.jobs.wait(job["id"], timeout=30)
        stored = Path(calls[0]).name
        assert len(stored.encode()) <= 255 and stored.endswith("a.csv")
        r = c.post("/v1/tuning-jobs/upload", params={"filename": "b" * 256}, content=b"x", headers=UPLOAD)
        assert r.status_code == 422


def test_a_killed_worker_fails_its_job_shows_in_readiness_and_the_next_job_runs(
    make_client, trace_bytes, tmp_path
) -> None:
    c = make_client(
        tuning={"executor": "process", "upload_dir": str(tmp_path / "work")}, engine={"window_s": 10.0}
    )
    jobs = c.app.state.jobs
    job = upload(c, trace_bytes, "long.csv", budget=5000, optimizer="RandomSearch")
    ck = jobs._checkpoint(job["id"])
    wait_for(lambda: ck.exists() and len(read_checkpoint(ck)) >= 2, timeout=60)
    for pid in list(jobs.executor._processes):
        os.kill(pid, signal.SIGKILL)
    run = jobs.wait(job["id"], timeout=60)
    assert run.status is RunStatus.FAILED and "tuning worker died" in run.error
    r = c.get("/readyz")
    assert r.status_code == 503 and r.json()["checks"]["tuning_pool"] is False
    nxt = jobs.wait(upload(c, trace_bytes, "next.csv", budget=3)["id"], timeout=120)
    assert nxt.status is RunStatus.SUCCEEDED, nxt.error
    assert c.get("/readyz").status_code == 200


def test_a_job_left_running_is_interrupted_on_restart_and_resumes_from_its_evaluations(
    trace_bytes, tmp_path
) -> None:
    from regimetune.api import create_app

    s = settings_for(tmp_path, tuning={"executor": "thread", "upload_dir": str(tmp_path / "work")})
    s = s.model_copy(update={"engine": s.engine.model_copy(update={"window_s": 10.0})})
    # a previous process stored a job as running, checkpointed 7 evaluations, then died
    with TestClient(create_app(s)) as c:
        work = c.app.state.jobs.work_dir
        state = c.app.state.engine.detector_state()
    trace = work / "uploads" / "0123-run.csv"
    trace.write_bytes(trace_bytes)
    (work / "uploads" / "0456-stale.csv").write_bytes(b"left by a crash")
    run = TuningRun(
        id="deadjob",
        objective=Objective.CACHE,
        optimizer="auto",
        budget=12,
        status=RunStatus.RUNNING,
        trace=str(trace),
    )
    store = SqlStore.open(s.store)
    store.save_job(run)
    store.close()
    checkpoint = work / "checkpoints" / "deadjob.jsonl"
    run_tuning(
        str(trace), "cache", 7, "auto", window_s=10.0, detector_state=state, checkpoint=str(checkpoint)
    )
    with checkpoint.open("a") as f:
        f.write('{"params": {"limit_0"')  # torn by the crash

    with TestClient(create_app(s)) as c:
        got = c.get("/v1/tuning-jobs/deadjob").json()
        assert got["status"] == "interrupted" and got["n_evaluations"] == 7
        assert "restart" in got["error"] and len(got["report"]["evaluations"]) == 7
        assert [p.name for p in files(work)] == ["0123-run.csv"]  # the stale upload went
        r = c.post("/v1/tuning-jobs/deadjob/restart", headers=AUTH)
        assert r.status_code == 202, r.text
        new = c.app.state.jobs.wait(r.json()["id"], timeout=120)
        assert new.status is RunStatus.SUCCEEDED, new.error
        assert new.report["resumed_from"] == "deadjob" and new.report["resumed_evaluations"] == 7
        assert new.n_evaluations == 12  # the budget, of which 7 came from the interrupted run
        assert c.post("/v1/tuning-jobs/deadjob/restart", headers=AUTH).status_code == 409
        assert c.post(f"/v1/tuning-jobs/{new.id}/restart", headers=AUTH).status_code == 409
        assert c.post("/v1/tuning-jobs/nope/restart", headers=AUTH).status_code == 404
        assert files(work) == []  # the upload went with the job that finished it


def wait_for(pred, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


def test_a_job_evaluates_its_candidates_on_a_dask_cluster(make_client, trace_bytes, tmp_path) -> None:
    distributed = pytest.importorskip("distributed")
    from distributed.diagnostics.plugin import SchedulerPlugin

    class Finished(SchedulerPlugin):
        n = 0

        def transition(self, key, start, finish, *args, **kwargs) -> None:
            if finish == "memory":
                Finished.n += 1

    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
    ) as cluster:
        cluster.scheduler.add_plugin(Finished())
        c = make_client(
            tuning={"executor": cluster.scheduler_address, "upload_dir": str(tmp_path / "work")},
            engine={"window_s": 10.0},
        )
        run = c.app.state.jobs.wait(upload(c, trace_bytes, "run.csv", budget=8)["id"], timeout=120)
    assert run.status is RunStatus.SUCCEEDED, run.error
    assert run.n_evaluations == 8 and run.policies
    assert Finished.n >= 8  # every evaluation (and the scattered problem) went through the cluster


def test_a_running_job_reports_its_progress_live_and_its_count_at_the_end(make_client, tmp_path) -> None:
    """``evaluations_done`` counts the checkpoint while a job runs (the stored run says 0
    until the end); ``progress`` is done / budget, unknown (null) for a running rescale job,
    whose budget is per regime."""
    import threading

    go, release = threading.Event(), threading.Event()

    def runner(trace: str, objective: str, budget: int, *a: object, checkpoint: str, **k: object) -> dict:
        go.wait(30)
        Path(checkpoint).write_text('{"params": {"x": 1.0}, "value": 2.0}\n' * 4)
        release.wait(30)
        if objective == "cache":
            return {"policy_file": {"regimes": {}}, "report": {"n_evaluations": budget}}
        return {"policy_file": {"regimes": {}}, "report": {"0": {"evaluations": 9}, "1": {"evaluations": 7}}}

    c = make_client(tuning={"executor": "thread", "max_workers": 2, "upload_dir": str(tmp_path / "work")})
    c.app.state.jobs.runner = runner
    try:
        _check_progress(c, go, release)
    finally:  # the jobs never outlive the test, even when it fails
        go.set()
        release.set()


def _check_progress(c: TestClient, go: Any, release: Any) -> None:
    cache = upload(c, b"ts,key\n1,2\n", "a.csv", budget=10)
    rescale = upload(c, b"ts,key\n1,2\n", "b.csv", budget=5, objective="rescale")
    assert cache["evaluations_done"] == 0 and cache["progress"] == 0.0 and cache["budget_scope"] == "job"
    assert rescale["budget_scope"] == "regime" and rescale["progress"] is None
    go.set()
    wait_for(lambda: c.get(f"/v1/tuning-jobs/{cache['id']}").json()["evaluations_done"] == 4)
    got = c.get(f"/v1/tuning-jobs/{cache['id']}").json()
    assert got["status"] == "running" and got["progress"] == pytest.approx(0.4)
    listed = {j["id"]: j for j in c.get("/v1/tuning-jobs").json()}
    assert listed[cache["id"]]["evaluations_done"] == 4
    wait_for(lambda: c.get(f"/v1/tuning-jobs/{rescale['id']}").json()["evaluations_done"] == 4)
    assert c.get(f"/v1/tuning-jobs/{rescale['id']}").json()["progress"] is None
    release.set()
    for job, n in ((cache, 10), (rescale, 16)):  # a rescale job sums its regimes' evaluations
        run = c.app.state.jobs.wait(job["id"], timeout=30)
        assert run.status is RunStatus.SUCCEEDED, run.error
        got = c.get(f"/v1/tuning-jobs/{job['id']}").json()
        assert got["evaluations_done"] == got["n_evaluations"] == n and got["progress"] == 1.0


def test_a_rescale_job_counts_each_evaluation_as_it_completes(trace_bytes, tmp_path) -> None:
    from regimetune.control.jobs import count_lines

    trace = tmp_path / "run.csv"
    trace.write_bytes(trace_bytes)
    progress = tmp_path / "progress.jsonl"
    out = run_tuning(str(trace), "rescale", 3, "auto", window_s=60.0, checkpoint=str(progress))
    per_regime = [r["evaluations"] for r in out["report"]["regimes"].values()]
    assert per_regime and all(n >= 3 for n in per_regime)
    assert out["report"]["n_evaluations"] == sum(per_regime)  # what the job records
    assert count_lines(progress) >= 3 * len(per_regime)
    assert read_checkpoint(progress) == []  # progress lines are not evaluations to resume from


def test_a_job_starts_from_the_regimes_policies_and_must_beat_them(
    make_client, trace_bytes, tmp_path
) -> None:
    """The service hands a job its policies per regime: the search starts from them (a warm
    start) and a tuned policy replaces one only if it beats it on held-apart data."""
    seen: list[Any] = []

    def runner(trace: str, objective: str, budget: int, *a: object, **k: Any) -> dict:
        seen.append(k["current"])
        return {"policy_file": {"regimes": {}}, "report": {}}

    c = make_client(tuning={"executor": "thread", "upload_dir": str(tmp_path / "work")})
    c.app.state.jobs.runner = runner
    cache = {"mode": "lru", "limit_keys": 300}
    assert c.put("/v1/policies/1", json={"cache": cache}, headers=AUTH).status_code == 200
    c.app.state.jobs.wait(upload(c, b"ts,key\n1,2\n", "a.csv")["id"], timeout=30)
    assert seen and seen[0][1]["cache"] == {**seen[0][1]["cache"], **cache}
    assert seen[0][1]["source"] == "operator"

    trace = tmp_path / "run.csv"
    trace.write_bytes(trace_bytes)
    current = {r: {"cache": cache} for r in range(4)}
    short = OnlineRegimeDetector(min_regime_s=SHORT_REGIME_S).to_state()  # a half-hour trace
    out = run_tuning(str(trace), "cache", 6, "auto", window_s=10.0, current=current, detector_state=short)
    report = out["report"]
    assert report["warm_started"] and report["n_evaluations"] <= 6
    assert "current_held_out" in report["decision"]  # compared with the policies in force
    for pol in out["policy_file"]["regimes"].values():  # each one tuned, or the current one kept
        assert report["decision"]["push"] or pol["cache"] == {**pol["cache"], **cache}


def _tuned_runner(trace: str, *a: object, **k: object) -> dict:
    time.sleep(0.2)  # the job ends after its submission has been answered
    return {"policy_file": {"regimes": {"0": {"cache": {"mode": "lru", "limit_keys": 42}}}}, "report": {}}


def _service_with_runner(tmp_path: Path, pool: Any) -> TestClient:
    from regimetune.api import create_app

    s = settings_for(tmp_path, tuning={"trace_dirs": [str(tmp_path)]})
    return TestClient(create_app(s, executor=pool, jobs_runner=_tuned_runner))


def test_a_job_is_seen_succeeded_only_once_its_policies_are_in_force(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    trace = tmp_path / "t.csv"
    trace.write_text("ts,key\n")
    with ThreadPoolExecutor(1) as pool, _service_with_runner(tmp_path, pool) as c:
        store = c.app.state.store
        put = store.put_regime_policy

        def slow_put(policy: Any) -> None:  # the policy is stored a while after tuning ended
            time.sleep(1.0)
            put(policy)

        store.put_regime_policy = slow_put
        r = c.post("/v1/tuning-jobs", json={"trace": str(trace), "apply": True}, headers=AUTH)
        assert r.status_code == 202, r.text
        seen = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            status = c.get(f"/v1/tuning-jobs/{r.json()['id']}").json()["status"]
            policies = c.get("/v1/policies").json()
            seen.append(status)
            if status == "succeeded":
                assert policies.get("0", {}).get("source") == "tuned", (
                    "succeeded before its policy was stored"
                )
                break
            time.sleep(0.02)
        assert seen[-1] == "succeeded" and seen[0] == "running", seen


def test_a_job_whose_policies_cannot_be_applied_says_so(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    trace = tmp_path / "t.csv"
    trace.write_text("ts,key\n")
    with ThreadPoolExecutor(1) as pool, _service_with_runner(tmp_path, pool) as c:

        def broken_put(policy: Any) -> None:
            raise OSError("disk full")

        c.app.state.store.put_regime_policy = broken_put
        r = c.post("/v1/tuning-jobs", json={"trace": str(trace), "apply": True}, headers=AUTH)
        run = c.app.state.jobs.wait(r.json()["id"], timeout=30)
        assert run.status is RunStatus.SUCCEEDED and run.policies
        got = c.get(f"/v1/tuning-jobs/{run.id}").json()
        assert "applying them failed: disk full" in got["error"]
