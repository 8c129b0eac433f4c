"""``regimetune demo`` (what ``make run`` runs): the reference backend and the service as real
processes on 127.0.0.1, and a storage daemon replaying a generated ParSplice-like run into the
service, so that its four regimes are detected and their policies delivered to the backend
within a minute.

The steps, in order: :func:`start_processes` (backend, then service), :func:`demo_workload`
(the run replayed, and the recorded run the tuning jobs learn from), the replay with a
:class:`Narrator` printing what happens, :func:`print_summary`. SIGINT and SIGTERM stop the
demo and both processes it started.
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from regimetune.cli.output import print_tables, regime_name
from regimetune.cli.traces import OldWorkersOpt, SimWorkersOpt, WindowOpt, renamed
from regimetune.models import DEFAULT_WINDOW_S, ConfigError

if TYPE_CHECKING:
    from regimetune.cli.demo_redis import RedisDemo
    from regimetune.collectors import GeneratorConfig

console = Console()

DEMO_RUN_S = 4 * 3600.0
"""Length of the demo's workload: at this length the ``parsplice`` preset's flash crowd (10-20 %
of the run) and decline (15-25 %) outlast the detector's ``min_regime_s`` (15 minutes), so all
four regimes are confirmed online."""
DEMO_BUCKETS = 64
"""Buckets of the recorded run (the generator's ``n_buckets``): what the Pufferscale weights
are tuned on, so the demo tunes both halves of each regime's policy."""
POLL_S = 0.25
"""Wall seconds between two looks at the service's decisions and the backend's policies."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spawn(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """``python -m regimetune.cli.main <args>`` with output to ``log``."""
    out = log.open("wb")
    return subprocess.Popen(
        [sys.executable, "-m", "regimetune.cli.main", *args],
        env={**os.environ, **env},
        stdout=out,
        stderr=subprocess.STDOUT,
    )


def wait_ready(url: str, proc: subprocess.Popen[bytes], log: Path, *, timeout: float = 60.0) -> None:
    import httpx

    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            tail = log.read_text(errors="replace")[-800:]
            raise ConfigError(f"{url} exited with code {proc.returncode}: {tail.strip()}")
        try:
            if httpx.get(url, timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise ConfigError(f"{url} did not become ready within {timeout:.0f} s (see {log})")


def stop(proc: subprocess.Popen[bytes] | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


class Stopped(Exception):
    """The demo received SIGINT or SIGTERM."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextmanager
def stop_on_signals() -> Iterator[None]:
    """Turn SIGINT and SIGTERM into :class:`Stopped`, so that ``finally`` blocks stop the
    child processes (SIGTERM's default would end the demo and leave them running)."""

    def handler(signum: int, _frame: FrameType | None) -> None:
        raise Stopped(signum)

    before = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in before.items():
            signal.signal(s, h)


@contextmanager
def ignoring_signals() -> Iterator[None]:
    """Ignore SIGINT and SIGTERM for a moment (while the children are being stopped)."""
    before = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in before.items():
            signal.signal(s, h)


@dataclass
class Processes:
    """The reference backend and the service, their URLs and tokens."""

    backend: subprocess.Popen[bytes]
    service: subprocess.Popen[bytes] | None
    backend_url: str
    service_url: str
    token: str
    backend_token: str
    redis: RedisDemo | None = None  # a local Redis Cluster behind the backend (--backend redis)

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    @property
    def backend_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.backend_token}"}

    def running(self) -> bool:
        return self.service is not None and self.service.poll() is None and self.backend.poll() is None

    def stop(self) -> None:
        stop(self.service)
        stop(self.backend)
        if self.redis is not None:
            self.redis.stop()


def start_processes(root: Path, *, port: int, window_s: float, redis: RedisDemo | None = None) -> Processes:
    """Start the reference backend (over ``redis``'s cluster, if given) and the service
    (SQLite stores in ``root``, logs beside them) and wait until both answer. The caller
    stops them (:meth:`Processes.stop`)."""
    for name in ("service.db", "backend.db"):
        for suffix in ("", "-wal", "-shm"):
            (root / f"{name}{suffix}").unlink(missing_ok=True)
    token, backend_token = secrets.token_urlsafe(16), secrets.token_urlsafe(16)
    bport, sport = free_port(), port or free_port()
    servers = redis.backend_args() if redis is not None else ["--servers", "8"]
    backend_args = ["--port", str(bport), "--state", str(root / "backend.db"), *servers]
    p = Processes(
        backend=spawn(
            ["backend", "--host", "127.0.0.1", *backend_args],
            {"REGIMETUNE_BACKEND_TOKEN": backend_token},
            root / "backend.log",
        ),
        service=None,
        backend_url=f"http://127.0.0.1:{bport}",
        service_url=f"http://127.0.0.1:{sport}",
        token=token,
        backend_token=backend_token,
        redis=redis,
    )
    try:
        service_env = {
            "REGIMETUNE_STORE__URL": f"sqlite:///{root / 'service.db'}",
            "REGIMETUNE_AUTH__WRITE_TOKENS": json.dumps([token]),
            "REGIMETUNE_ENGINE__WINDOW_S": str(window_s),
            "REGIMETUNE_ENGINE__DETECTOR": json.dumps({}),
            "REGIMETUNE_PUSH__BACKEND": "reference",
            "REGIMETUNE_PUSH__URL": p.backend_url,
            "REGIMETUNE_PUSH__TOKEN": backend_token,
            "REGIMETUNE_PUSH__POLL_INTERVAL_S": "0.1",
            "REGIMETUNE_TUNING__MAX_WORKERS": "2",  # the cache and the rescale job side by side
            "REGIMETUNE_TUNING__UPLOAD_DIR": str(root / "jobs"),  # removed with the rest
        }
        p.service = spawn(
            ["serve", "--host", "127.0.0.1", "--port", str(sport)], service_env, root / "service.log"
        )
        with console.status("starting the reference backend and the service..."):
            wait_ready(f"{p.backend_url}/healthz", p.backend, root / "backend.log")
            wait_ready(f"{p.service_url}/readyz", p.service, root / "service.log")
    except BaseException:
        p.stop()
        raise
    return p


def demo_workload(workers: int, seed: int) -> GeneratorConfig:
    """The run the demo replays: four hours of the ``parsplice`` preset (flash crowd, decline,
    two plateaus), long enough that each regime is confirmed online (:data:`DEMO_RUN_S`)."""
    from regimetune.collectors import GeneratorConfig

    return GeneratorConfig(duration_s=DEMO_RUN_S, workers=workers, seed=seed, preset="parsplice")


def demo(
    seconds: Annotated[
        float, typer.Option("--seconds", min=1.0, help="Wall-clock length of the replay.")
    ] = 60.0,
    window: WindowOpt = DEFAULT_WINDOW_S,
    window_old: Annotated[
        float | None, typer.Option("--window-s", min=1e-6, hidden=True, help="Old name of --window.")
    ] = None,
    workers: SimWorkersOpt = 64,
    workers_old: OldWorkersOpt = None,
    seed: Annotated[int, typer.Option("--seed", min=0, help="Seed of the generated run.")] = 1,
    data_dir: Annotated[
        Path | None,
        typer.Option(
            "--data-dir",
            help="Directory for the demo's SQLite files and logs, kept afterwards (default: a temporary "
            "directory, removed on exit).",
        ),
    ] = None,
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="Service port (0: a free one).")] = 0,
    keep_running: Annotated[
        bool, typer.Option("--keep-running", help="Keep both services running after the replay.")
    ] = False,
    tune: Annotated[
        bool,
        typer.Option(
            "--tune/--no-tune",
            help="Also tune per-regime policies on a recorded run (another seed) via tuning jobs.",
        ),
    ] = True,
    backend_kind: Annotated[
        str,
        typer.Option(
            "--backend", help="reference, or redis: a local Redis Cluster takes the workload and is rescaled."
        ),
    ] = "reference",
    redis_cluster: Annotated[
        str | None,
        typer.Option(
            "--redis-cluster",
            metavar="HOST:PORT",
            help="With --backend redis: an existing Redis Cluster (a node of it) instead of a local one.",
        ),
    ] = None,
    redis_spare: Annotated[
        str | None,
        typer.Option(
            "--redis-spare",
            metavar="HOST:PORT",
            help="With --redis-cluster: the empty cluster-enabled node the demo commissions.",
        ),
    ] = None,
) -> None:
    """Start the reference backend and the service, replay a generated four-regime run through
    POST /v1/ingest, and show regime changes and delivered policy versions as they happen."""
    window = renamed(window, window_old)
    workers = renamed(workers, workers_old)
    if backend_kind not in ("reference", "redis"):
        raise ConfigError(f"--backend {backend_kind!r}: choose reference or redis")
    if (redis_cluster or redis_spare) and backend_kind != "redis":
        raise ConfigError("--redis-cluster and --redis-spare need --backend redis")
    own_dir = data_dir is None
    root = Path(tempfile.mkdtemp(prefix="regimetune-demo-")) if data_dir is None else data_dir
    root.mkdir(parents=True, exist_ok=True)
    procs: Processes | None = None
    serving = failed = False
    try:
        with stop_on_signals():
            console.rule("[bold]regimetune demo")
            redis = None
            if backend_kind == "redis":
                from regimetune.cli.demo_redis import RedisDemo

                redis = RedisDemo(console, seed=redis_cluster, spare=redis_spare).start()
            procs = start_processes(root, port=port, window_s=window, redis=redis)
            _print_started(procs, None if own_dir else root)
            _run(procs, root, window=window, seconds=seconds, workers=workers, seed=seed, tune=tune)
            if keep_running:
                serving = True
                _print_still_serving(procs)
                while procs.running():
                    time.sleep(0.5)
    except Stopped as stopped:
        console.print(f"stopped by {stopped}: stopping the service and the backend", highlight=False)
        if not serving:
            raise typer.Exit(128 + stopped.signum) from None
    except Exception:
        failed = True
        raise
    finally:
        with ignoring_signals():  # a second Ctrl-C must not leave a child running
            if procs is not None:
                procs.stop()
            if own_dir and not failed:
                shutil.rmtree(root, ignore_errors=True)
            elif own_dir:
                console.print(f"the logs are kept in {root}", highlight=False)


def _print_started(p: Processes, kept: Path | None) -> None:
    logs = f"logs in {kept}" if kept is not None else "logs removed on exit; --data-dir DIR keeps them"
    console.print(f"reference backend  {p.backend_url}   ({logs})", soft_wrap=True, highlight=False)
    base = p.service_url
    console.print(
        f"service            {base}   dashboard [link={base}/dashboard]{base}/dashboard[/link]",
        soft_wrap=True,
    )


def _run(
    p: Processes, root: Path, *, window: float, seconds: float, workers: int, seed: int, tune: bool
) -> None:
    """Replay the demo's run into the service at ``seconds`` of wall time, narrating, then
    wait for the tuning jobs and the deliveries and print the summary."""
    import httpx

    from regimetune.cli.replay import Replayer, paced
    from regimetune.client.ingest import IngestClient, count_windows
    from regimetune.collectors import generate

    with console.status("generating a ParSplice-like run (four regimes)..."):
        cfg = demo_workload(workers, seed)
        windows = list(count_windows(generate(cfg), window))
    console.print(
        f"replaying {len(windows)} windows of {window:g} s ({cfg.duration_s / 3600:.1f} h of workload) "
        f"in about {seconds:g} s through POST /v1/ingest/counts"
    )
    base = p.service_url
    job_ids = _start_tuning(root, base, p.headers, cfg) if tune else []
    speed = len(windows) * window / seconds  # trace seconds per wall second
    with (
        Replayer([IngestClient(base, token=p.token)], run_id="demo") as daemon,
        httpx.Client(timeout=10.0) as http,
        Progress(
            TextColumn("[progress.description]{task.description}"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total}"),
            TimeRemainingColumn(),
            console=console,
            transient=True,
        ) as progress,
    ):
        narrator = Narrator(http, p)
        task = progress.add_task("windows", total=len(windows))
        last = 0.0
        for wc in paced(windows, speed=speed):
            daemon.send(wc)
            if p.redis is not None:
                p.redis.replay(wc)
            progress.advance(task)
            if time.monotonic() - last >= POLL_S:
                narrator.poll(truth=wc.label)
                job_ids = _job_report(http, base, p.headers, job_ids)
                last = time.monotonic()
        end = time.monotonic() + 20 + (60 if job_ids else 0)
        while time.monotonic() < end:  # let the jobs finish, the engine apply, the outbox deliver
            narrator.poll(truth=None)
            job_ids = _job_report(http, base, p.headers, job_ids)
            st = http.get(f"{base}/v1/engine", headers=p.headers).json()
            if not job_ids and not st["outbox_pending"] and st["applied_seq"] == st["last_seq"]:
                break
            time.sleep(POLL_S)
        narrator.poll(truth=None, final=True)
        print_summary(http, p)
        if p.redis is not None:
            p.redis.rescale(http, p.backend_url, p.backend_headers)


class Narrator:
    """Prints the service's decisions and the backend's deliveries in causal order: a policy
    version is shown applied by the backend only after the decision that made it."""

    def __init__(self, http: Any, p: Processes) -> None:
        self.http, self.p = http, p
        self.seen_decisions: set[int] = set()
        self.decided: set[int] = set()  # policy versions whose decision was printed
        self.applied: set[int] = set()  # policy versions printed as applied

    def poll(self, *, truth: int | None, final: bool = False) -> None:
        """Print what happened since the last poll; ``truth`` is the generator's regime of the
        window just sent (``None`` once the replay is over); ``final``: every delivery left."""
        # the backend first: a version it holds was decided before, so the decisions read
        # next include its decision
        delivered = self._delivered()
        items = self.http.get(
            f"{self.p.service_url}/v1/decisions", params={"limit": 20}, headers=self.p.headers
        ).json()["items"]
        for d in reversed(items):
            if d["id"] not in self.seen_decisions:
                self.seen_decisions.add(d["id"])
                console.print(decision_line(d, truth))
                if d["policy_version"] is not None:
                    self.decided.add(int(d["policy_version"]))
        for v in sorted(delivered - self.applied):
            if final or v in self.decided or v < max(self.decided, default=0):
                self.applied.add(v)
                console.print(f"  [green]backend applied policy v{v}[/]")

    def _delivered(self) -> set[int]:
        r = self.http.get(f"{self.p.backend_url}/v1/policies", headers=self.p.backend_headers)
        if r.status_code != 200:
            return set()
        out = set()
        for e in r.json().get("entries", []):
            v = e.get("version")
            v = v.get("version") if isinstance(v, dict) else v
            if v is not None:
                out.add(int(v))
        return out


def decision_line(d: dict[str, Any], truth: int | None) -> str:
    """One decision of the service as the demo prints it (rich markup)."""
    policy = d.get("policy") or {}
    what = "cache " + _cache_text(policy.get("cache", {}))
    if policy.get("weights"):
        what += ", " + _weights_text(policy["weights"])
    if d["regime_from"] == d["regime_to"]:
        return (
            f"[bold cyan]policy update[/] for regime [bold]{d['regime_to']}[/] "
            f"({d['detail'].split(':')[0]}) -> policy v{d['policy_version']} ({what})"
        )
    inputs = d["inputs"]
    generator = "" if truth is None else f"; generator regime {truth}"
    return (
        f"[bold cyan]regime change[/] {regime_name(d['regime_from'])} -> [bold]{d['regime_to']}[/] at window "
        f"{int(inputs.get('window', -1))} ({inputs.get('reads_per_s', 0):.0f} reads/s, "
        f"{inputs.get('active_keys', 0):.0f} active keys{generator}) -> "
        f"policy v{d['policy_version']} ({what})"
    )


def _print_still_serving(p: Processes) -> None:
    """Where the service is and its write token, so the README's curl examples work against it
    (with this URL for localhost:8080 and this token for s3cret)."""
    base = p.service_url
    console.print(f"[bold]still serving[/] at {base}/dashboard; Ctrl-C stops both processes")
    console.print(
        f"write token: {p.token}\n"
        "try:\n"
        f"  export TOKEN={p.token}\n"
        f"  curl -s {base}/v1/policy\n"
        f"  curl -s -H \"Authorization: Bearer $TOKEN\" '{base}/v1/decisions?limit=5'",
        highlight=False,
        soft_wrap=True,
        markup=False,
    )


def _start_tuning(root: Path, base: str, headers: dict[str, str], cfg: GeneratorConfig) -> list[str]:
    """Upload yesterday's run (same workload, another seed, with a bucket column) as two
    tuning jobs that apply their per-regime results: the cache limits and, since the run has
    buckets, the W_L/W_D/W_T weights (each job keeps the other half of a regime's policy)."""
    from regimetune.collectors import generate, write_events

    recorded = dataclasses.replace(cfg, seed=cfg.seed + 100, n_buckets=DEMO_BUCKETS)
    trace = root / "recorded-run.parquet"
    write_events(generate(recorded), trace)
    jobs = [("cache", 12), ("rescale", 8)]
    ids = [_upload_job(base, headers, trace, objective, budget) for objective, budget in jobs]
    console.print(
        f"[magenta]tuning jobs[/] {', '.join(i[:8] for i in ids)} ({' and '.join(o for o, _ in jobs)}) started on "
        f"a recorded run ({trace.stat().st_size >> 20} MiB): regimes without a tuned policy get the safe "
        "default until they are done"
    )
    return ids


def _upload_job(base: str, headers: dict[str, str], trace: Path, objective: str, budget: int) -> str:
    import httpx

    r = httpx.post(
        f"{base}/v1/tuning-jobs/upload",
        params={"filename": trace.name, "apply": "true", "budget": budget, "objective": objective},
        content=trace.read_bytes(),
        headers={**headers, "Content-Type": "application/octet-stream"},
        timeout=60.0,
    )
    r.raise_for_status()
    return str(r.json()["id"])


def _job_report(http: Any, base: str, headers: dict[str, str], job_ids: list[str]) -> list[str]:
    """Print the jobs that finished; return those still running."""
    running = []
    for job_id in job_ids:
        job = http.get(f"{base}/v1/tuning-jobs/{job_id}", headers=headers).json()
        if job["status"] in ("pending", "running"):
            running.append(job_id)
        elif job["status"] == "succeeded":
            text = _cache_text if job["objective"] == "cache" else _weights_text
            key = "cache" if job["objective"] == "cache" else "weights"
            tuned = ", ".join(f"regime {rid}: {text(p[key])}" for rid, p in job["policies"].items())
            console.print(f"[magenta]{job['objective']} tuning job done[/]: {tuned}")
        else:
            console.print(f"[magenta]{job['objective']} tuning job failed[/]: {job['error']}")
    return running


def _weights_text(w: dict[str, Any]) -> str:
    """Pufferscale weights in a few words.

    >>> _weights_text({"w_load": 1.0, "w_data": 0.5, "w_time": 2.25})
    'W_L 1.00 W_D 0.50 W_T 2.25'
    """
    return f"W_L {w['w_load']:.2f} W_D {w['w_data']:.2f} W_T {w['w_time']:.2f}"


def _cache_text(cache: dict[str, Any]) -> str:
    """A cache policy in a few words: ``lru n=10,000`` or ``unlimited`` (never ``n=None``).

    >>> _cache_text({"mode": "lru", "limit_keys": 10000}), _cache_text({"mode": "unlimited"})
    ('lru n=10,000', 'unlimited')
    """
    limit = cache.get("limit_keys")
    return str(cache.get("mode", "?")) + ("" if not limit else f" n={limit:,}")


def print_summary(http: Any, p: Processes) -> None:
    """The regimes the service detected, its decisions, and whether the backend holds the
    newest policy version."""
    base, headers = p.service_url, p.headers
    segs = http.get(f"{base}/v1/regimes", params={"limit": 1000}, headers=headers).json()["items"]
    t = Table(title="Detected regimes (segments)")
    for col in ("regime", "kind", "windows", "start (s)", "end (s)", "requests/s"):
        t.add_column(col, justify="right")
    for s in segs:
        t.add_row(
            str(s["regime_id"]),
            s["kind"],
            str(s["end_window"] - s["start_window"]),
            f"{s['start']:.0f}",
            f"{s['end']:.0f}",
            f"{s['summary'].get('requests_per_s', 0):.1f}",
        )
    print_tables(console, t)
    decisions = http.get(f"{base}/v1/decisions", params={"limit": 1000}, headers=headers).json()["items"]
    d = Table(title="Decisions")
    for col in ("version", "from", "to", "outcome", "detail"):
        d.add_column(col)
    for x in reversed(decisions):
        d.add_row(
            "-" if x["policy_version"] is None else str(x["policy_version"]),
            regime_name(x["regime_from"]),
            str(x["regime_to"]),
            x["outcome"],
            x["detail"],
        )
    print_tables(console, d)
    decided = [x["policy_version"] for x in reversed(decisions) if x["policy_version"] is not None]
    r = http.get(f"{p.backend_url}/v1/policy", headers=p.backend_headers)
    at_backend = r.json()["version"] if r.status_code == 200 else None
    ok = bool(decided) and at_backend == decided[-1]
    n_regimes = len({s["regime_id"] for s in segs})
    console.print(
        f"{n_regimes} regimes in {len(segs)} segments, {len(decisions)} decisions, versions {decided}; "
        f"backend holds v{at_backend}: " + ("[bold green]in step[/]" if ok else "[bold red]NOT in step[/]")
    )


def register(app: typer.Typer) -> None:
    """Add this module's commands to ``app``."""
    app.command(name="demo")(demo)
