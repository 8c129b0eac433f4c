"""The compose topology as native processes on 127.0.0.1: PostgreSQL (already running),
``regimetune migrate``, a Dask scheduler and a worker, the reference backend, the service, a
replay daemon (``regimetune replay``, two daemons), and Prometheus scraping the service and the
backend with the repository's config and alert rules. Parts whose software is absent skip:
PostgreSQL (everything), distributed (the Dask part), prometheus (the scrape part)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
import yaml

from regimetune.cli.demo import free_port, spawn, stop, wait_ready
from regimetune.collectors import GeneratorConfig, generate, write_events

from .conftest import PG_URL, ROOT, pg_reachable

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

TOKEN = "e2e-write-token"
BACKEND_TOKEN = "e2e-backend-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def until(check: Callable[[], Any], timeout: float, what: str) -> Any:
    end = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.25)


@dataclass
class Topology:
    root: Path
    schema: str
    service: str = ""
    backend: str = ""
    prometheus: str | None = None
    dask: str | None = None
    dask_on_service: bool = False
    replay: dict[str, Any] = field(default_factory=dict)
    migrate_out: str = ""
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    logs: list[Any] = field(default_factory=list)

    def popen(self, args: list[str], name: str) -> subprocess.Popen[bytes]:
        log = (self.root / f"{name}.log").open("wb")
        self.logs.append(log)
        p = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        self.procs.append(p)
        return p

    def stop(self) -> None:
        for p in reversed(self.procs):
            stop(p)
        for log in self.logs:
            log.close()


def _prometheus_config(t: Topology, service_port: int, backend_port: int) -> Path:
    """The repository's config with the compose hosts replaced by the local ports, a 1 s
    scrape interval and the real alert rules."""
    src = ROOT / "deploy" / "prometheus"
    cfg = yaml.safe_load((src / "prometheus.yml").read_text())
    cfg["global"]["scrape_interval"] = cfg["global"]["evaluation_interval"] = "1s"
    cfg["rule_files"] = [str(src / r) for r in cfg["rule_files"]]
    ports = {"regimetune": service_port, "backend": backend_port}
    for job in cfg["scrape_configs"]:
        for sc in job["static_configs"]:
            sc["targets"] = [f"127.0.0.1:{ports[t.split(':')[0]]}" for t in sc["targets"]]
    path = t.root / "prometheus.yml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _start(t: Topology) -> None:
    env_store = {"REGIMETUNE_STORE__URL": PG_URL, "REGIMETUNE_STORE__SCHEMA_NAME": t.schema}
    r = subprocess.run(
        [sys.executable, "-m", "regimetune.cli.main", "migrate"],
        env={**os.environ, **env_store},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    t.migrate_out = r.stdout

    if DASK:
        port = free_port()
        t.dask = f"tcp://127.0.0.1:{port}"
        t.popen(
            [DASK, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"], "scheduler"
        )
        t.popen([DASK, "worker", t.dask, "--nthreads", "1", "--no-nanny", "--no-dashboard"], "worker")

    bport, sport = free_port(), free_port()
    t.backend, t.service = f"http://127.0.0.1:{bport}", f"http://127.0.0.1:{sport}"
    backend = spawn(
        ["backend", "--port", str(bport), "--state", str(t.root / "backend.db"), "--servers", "8"],
        {"REGIMETUNE_BACKEND_TOKEN": BACKEND_TOKEN},
        t.root / "backend.log",
    )
    t.procs.append(backend)
    env = {
        **env_store,
        "REGIMETUNE_CONFIG": str(ROOT / "deploy" / "regimetune.example.toml"),
        "REGIMETUNE_AUTH__WRITE_TOKENS": json.dumps([TOKEN]),
        "REGIMETUNE_ENGINE__WINDOW_S": "60",
        "REGIMETUNE_PUSH__BACKEND": "reference",
        "REGIMETUNE_PUSH__URL": t.backend,
        "REGIMETUNE_PUSH__TOKEN": BACKEND_TOKEN,
        "REGIMETUNE_PUSH__POLL_INTERVAL_S": "0.1",
        "REGIMETUNE_TUNING__UPLOAD_DIR": str(t.root),
    }
    if t.dask and _executor_takes(t.dask):
        env["REGIMETUNE_TUNING__EXECUTOR"] = t.dask
        env["REGIMETUNE_TUNING__MAX_WORKERS"] = "2"
        t.dask_on_service = True
    service = spawn(["serve", "--host", "127.0.0.1", "--port", str(sport)], env, t.root / "service.log")
    t.procs.append(service)

    prom_bin = shutil.which("prometheus")
    if prom_bin:
        pport = free_port()
        t.prometheus = f"http://127.0.0.1:{pport}"
        t.popen(
            [
                prom_bin,
                f"--config.file={_prometheus_config(t, sport, bport)}",
                f"--storage.tsdb.path={t.root / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{pport}",
            ],
            "prometheus",
        )
    wait_ready(f"{t.backend}/healthz", backend, t.root / "backend.log")
    wait_ready(f"{t.service}/readyz", service, t.root / "service.log", timeout=90)
    if t.prometheus:
        until(lambda: _ok(f"{t.prometheus}/-/ready"), 30, "Prometheus to be ready")


def _ok(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _executor_takes(address: str) -> bool:
    from regimetune.api import load_settings
    from regimetune.models import ConfigError

    try:
        load_settings(tuning={"executor": address})
    except ConfigError:
        return False
    return True


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


DASK = shutil.which("dask", path=str(Path(sys.executable).parent)) if _has("distributed") else None


@pytest.fixture(scope="module")
def topology(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Topology]:
    if not pg_reachable():
        pytest.skip("PostgreSQL at 127.0.0.1:5432 is unreachable")
    t = Topology(root=tmp_path_factory.mktemp("e2e"), schema=f"rt_e2e_{uuid.uuid4().hex[:8]}")
    try:
        _start(t)
        trace = t.root / "run.parquet"
        write_events(generate(GeneratorConfig(duration_s=9000, workers=64, seed=1, start_s=0.0)), trace)
        r = subprocess.run(
            [
                *(sys.executable, "-m", "regimetune.cli.main", "replay", str(trace), "--url", t.service),
                *("--window", "60", "--fast", "--daemons", "2", "--run-id", "e2e", "--json"),
            ],
            env={**os.environ, "REGIMETUNE_REPLAY_TOKEN": TOKEN},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 0, r.stderr
        t.replay = json.loads(r.stdout.strip().splitlines()[-1])
        yield t
    finally:
        t.stop()
        eng = sa.create_engine(PG_URL)
        with eng.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{t.schema}" CASCADE'))
        eng.dispose()


def test_migrate_brought_the_store_to_head(topology: Topology) -> None:
    assert "(head)" in topology.migrate_out and "***" not in topology.migrate_out  # no password here
    assert topology.schema  # the service then started on the migrated schema (readyz answered)


def test_the_service_saw_every_batch(topology: Topology) -> None:
    rep = topology.replay
    assert rep["windows"] == 150 and rep["duplicates"] == 0 and rep["batches"] >= 2 * 150 - 5

    def applied() -> dict[str, Any] | None:
        st = httpx.get(f"{topology.service}/v1/engine", headers=AUTH).json()
        return st if st["applied_seq"] == st["last_seq"] == rep["batches"] else None

    st = until(applied, 30, "the engine to apply every batch")
    # the last windows stay open for late batches (the allowed lateness, default 3 windows)
    assert st["windows"] == rep["windows"] - 1 - 3
    metrics = httpx.get(f"{topology.service}/metrics").text
    assert f"regimetune_ingest_keys_total {float(rep['keys'])}" in metrics
    regimes = httpx.get(f"{topology.service}/v1/regimes", headers=AUTH).json()["items"]
    assert len({s["regime_id"] for s in regimes}) >= 2


def test_a_policy_reached_the_backend(topology: Topology) -> None:
    def delivered() -> int | None:
        decisions = httpx.get(f"{topology.service}/v1/decisions", headers=AUTH).json()["items"]
        versions = [d["policy_version"] for d in decisions if d["policy_version"] is not None]
        r = httpx.get(f"{topology.backend}/v1/policy", headers={"Authorization": f"Bearer {BACKEND_TOKEN}"})
        if versions and r.status_code == 200 and r.json()["version"] == max(versions):
            return max(versions)
        return None

    version = until(delivered, 30, "the newest policy version at the backend")
    assert version >= 1
    assert (
        f"regimetune_backend_policy_version {float(version)}" in httpx.get(f"{topology.backend}/metrics").text
    )


def test_prometheus_scraped_the_service_and_the_backend(topology: Topology) -> None:
    if topology.prometheus is None:
        pytest.skip("prometheus is not installed (Debian: prometheus)")

    def query(q: str) -> list[dict[str, Any]]:
        r = httpx.get(f"{topology.prometheus}/api/v1/query", params={"query": q}, timeout=5)
        assert r.status_code == 200, r.text
        return list(r.json()["data"]["result"])

    keys = float(topology.replay["keys"])
    until(
        lambda: [x for x in query("regimetune_ingest_keys_total") if float(x["value"][1]) == keys],
        30,
        "Prometheus to scrape the service's ingest counter",
    )
    # each target is scraped at its own offset within the interval: wait for both, do not sample once
    want = {"regimetune": "1", "regimetune-backend": "1"}

    def both_up() -> dict[str, str] | None:
        up = {x["metric"]["job"]: x["value"][1] for x in query("up")}
        return up if up == want else None

    until(both_up, 30, f"Prometheus to see both targets up ({want})")
    until(lambda: query("regimetune_backend_policy_version >= 1"), 30, "the backend's policy version")
    for name in (
        "regimetune_current_regime_id",
        "regimetune_engine_paused",
        "regimetune_outbox_pending_versions",
    ):
        assert query(name), name
    rules = httpx.get(f"{topology.prometheus}/api/v1/rules").json()["data"]["groups"]
    alerts = {r["name"]: r for g in rules for r in g["rules"]}
    assert len(alerts) == 7 and all(r["health"] != "err" for r in alerts.values())


def test_the_dask_worker_joined_the_scheduler(topology: Topology) -> None:
    if topology.dask is None:
        pytest.skip("distributed is not installed")
    from distributed import Client

    with Client(topology.dask, timeout=20) as client:
        client.wait_for_workers(1, timeout=30)
        assert len(client.scheduler_info()["workers"]) == 1
        assert client.submit(sum, [1, 2, 3]).result(timeout=30) == 6


def test_a_tuning_job_runs_on_the_dask_cluster(topology: Topology) -> None:
    if topology.dask is None:
        pytest.skip("distributed is not installed")
    if not topology.dask_on_service:
        pytest.skip("tuning.executor does not take a Dask scheduler address yet (issue 15 item 2)")
    trace = topology.root / "recorded.csv"
    write_events(generate(GeneratorConfig(duration_s=1800, workers=16, seed=5)), trace)
    r = httpx.post(
        f"{topology.service}/v1/tuning-jobs/upload",
        params={"filename": trace.name, "budget": 4},
        content=trace.read_bytes(),
        headers={**AUTH, "Content-Type": "application/octet-stream"},
        timeout=60,
    )
    assert r.status_code in (200, 201, 202), r.text
    job_id = r.json()["id"]

    def done() -> dict[str, Any] | None:
        job = httpx.get(f"{topology.service}/v1/tuning-jobs/{job_id}", headers=AUTH).json()
        return job if job["status"] not in ("pending", "running") else None

    job = until(done, 60, "the tuning job")
    assert job["status"] == "succeeded", job.get("error")
    from distributed import Client

    with Client(topology.dask, timeout=10) as client:
        prefixes = client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.task_prefixes))
    assert prefixes > 0, "the scheduler ran no task"
