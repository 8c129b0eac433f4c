"""``regimetune demo`` (what ``make run`` runs): the reference backend and the service as real
processes on 127.0.0.1, and a storage daemon replaying a generated ParSplice-like run into the
service, so regimes are detected and policies delivered to the backend within a minute."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from regimetune.cli.output import print_tables, regime_name
from regimetune.models import ConfigError

console = Console()


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


def demo(
    seconds: float = typer.Option(40.0, min=1.0, help="Wall-clock length of the replay."),
    window_s: float = typer.Option(60.0, min=1.0, help="Window length on the workload's clock."),
    workers: int = typer.Option(64, min=1, help="ParSplice workers of the generated run."),
    seed: int = typer.Option(1, min=0, help="Seed of the generated run."),
    data_dir: Path | None = typer.Option(
        None, help="Directory for the demo's SQLite files and logs (default: a fresh temp dir)."
    ),
    port: int = typer.Option(0, min=0, max=65535, help="Service port (0: a free one)."),
    keep_running: bool = typer.Option(False, help="Keep both services running after the replay."),
    tune: bool = typer.Option(
        True, help="Also tune per-regime policies on a recorded run (another seed) via a tuning job."
    ),
    backend_kind: str = typer.Option(
        "reference",
        "--backend",
        help="reference, or redis: a local Redis Cluster takes the workload and is rescaled.",
    ),
) -> None:
    """Start the reference backend and the service, replay a generated four-regime run through
    POST /v1/ingest, and show regime changes and delivered policy versions as they happen."""
    import httpx

    from regimetune.cli.replay import Replayer, paced
    from regimetune.client.ingest import IngestClient, count_windows
    from regimetune.collectors import GeneratorConfig, generate

    own_dir = data_dir is None
    root = Path(tempfile.mkdtemp(prefix="regimetune-demo-")) if data_dir is None else data_dir
    root.mkdir(parents=True, exist_ok=True)
    for name in (
        "service.db",
        "service.db-wal",
        "service.db-shm",
        "backend.db",
        "backend.db-wal",
        "backend.db-shm",
    ):
        (root / name).unlink(missing_ok=True)
    token, backend_token = secrets.token_urlsafe(16), secrets.token_urlsafe(16)
    bport, sport = free_port(), port or free_port()
    base, burl = f"http://127.0.0.1:{sport}", f"http://127.0.0.1:{bport}"
    backend = service = None
    if backend_kind not in ("reference", "redis"):
        raise ConfigError(f"--backend {backend_kind!r}: choose reference or redis")
    redis = None
    try:
        console.rule("[bold]regimetune demo")
        if backend_kind == "redis":
            from regimetune.cli.demo_redis import RedisDemo

            redis = RedisDemo(console).start()
        backend = spawn(
            [
                "backend",
                "--host",
                "127.0.0.1",
                "--port",
                str(bport),
                "--state",
                str(root / "backend.db"),
                *(redis.backend_args() if redis else ["--servers", "8"]),
            ],
            {"REGIMETUNE_BACKEND_TOKEN": backend_token},
            root / "backend.log",
        )
        service_env = {
            "REGIMETUNE_STORE__URL": f"sqlite:///{root / 'service.db'}",
            "REGIMETUNE_AUTH__WRITE_TOKENS": json.dumps([token]),
            "REGIMETUNE_ENGINE__WINDOW_S": str(window_s),
            "REGIMETUNE_ENGINE__DETECTOR": json.dumps({}),
            "REGIMETUNE_PUSH__BACKEND": "reference",
            "REGIMETUNE_PUSH__URL": burl,
            "REGIMETUNE_PUSH__TOKEN": backend_token,
            "REGIMETUNE_PUSH__POLL_INTERVAL_S": "0.1",
            "REGIMETUNE_TUNING__MAX_WORKERS": "2",  # the cache and the rescale job side by side
            "REGIMETUNE_TUNING__UPLOAD_DIR": str(root / "jobs"),  # removed with the rest
        }
        service = spawn(
            ["serve", "--host", "127.0.0.1", "--port", str(sport)], service_env, root / "service.log"
        )
        with console.status("starting the reference backend and the service..."):
            wait_ready(f"{burl}/healthz", backend, root / "backend.log")
            wait_ready(f"{base}/readyz", service, root / "service.log")
        console.print(f"reference backend  {burl}   (log {root / 'backend.log'})", soft_wrap=True)
        console.print(
            f"service            {base}   dashboard [link={base}/dashboard]{base}/dashboard[/link]",
            soft_wrap=True,
        )
        with console.status("generating a ParSplice-like run (four regimes)..."):
            cfg = GeneratorConfig(duration_s=9000, workers=workers, seed=seed, preset="classic")
            windows = list(count_windows(generate(cfg), window_s))
        console.print(
            f"replaying {len(windows)} windows of {window_s:g} s ({cfg.duration_s / 3600:.1f} h of workload) "
            f"in about {seconds:g} s through POST /v1/ingest/counts"
        )
        headers = {"Authorization": f"Bearer {token}"}
        bheaders = {"Authorization": f"Bearer {backend_token}"}
        job_ids = _start_tuning(root, base, headers, cfg) if tune else []
        seen_decisions: set[int] = set()
        seen_versions: set[int] = set()
        speed = len(windows) * window_s / seconds  # trace seconds per wall second
        with (
            Replayer([IngestClient(base, token=token)], run_id="demo") as daemon,
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
            task = progress.add_task("windows", total=len(windows))
            for wc in paced(windows, speed=speed):
                daemon.send(wc)
                if redis:
                    redis.replay(wc)
                _report(http, base, burl, headers, bheaders, seen_decisions, seen_versions, wc.label)
                job_ids = _job_report(http, base, headers, job_ids)
                progress.advance(task)
            end = time.monotonic() + 20 + (60 if job_ids else 0)
            while time.monotonic() < end:  # let the jobs finish, the engine apply, the outbox deliver
                _report(http, base, burl, headers, bheaders, seen_decisions, seen_versions, -1)
                job_ids = _job_report(http, base, headers, job_ids)
                st = http.get(f"{base}/v1/engine", headers=headers).json()
                if not job_ids and not st["outbox_pending"] and st["applied_seq"] == st["last_seq"]:
                    break
                time.sleep(0.2)
            _summary(http, base, burl, headers, bheaders)
            if redis:
                redis.rescale(http, burl, bheaders)
        if keep_running:
            _print_still_serving(base, token)
            try:
                while service.poll() is None and backend.poll() is None:
                    time.sleep(0.5)
            except KeyboardInterrupt:
                pass
    finally:
        stop(service)
        stop(backend)
        if redis:
            redis.stop()
        if own_dir and not keep_running:
            shutil.rmtree(root, ignore_errors=True)


def _print_still_serving(base: str, token: str) -> None:
    """Where the service is and its write token, so the README's curl examples work against it
    (with this URL for localhost:8080 and this token for s3cret)."""
    console.print(f"[bold]still serving[/] at {base}/dashboard; Ctrl-C stops both processes")
    console.print(
        f"write token: {token}\n"
        "try:\n"
        f"  export TOKEN={token}\n"
        f"  curl -s {base}/v1/policy\n"
        f"  curl -s -H \"Authorization: Bearer $TOKEN\" '{base}/v1/decisions?limit=5'",
        highlight=False,
        soft_wrap=True,
        markup=False,
    )


DEMO_BUCKETS = 64
"""Buckets of the recorded run (the generator's ``n_buckets``): what the Pufferscale weights
are tuned on, so the demo tunes both halves of each regime's policy."""


def _start_tuning(root: Path, base: str, headers: dict[str, str], cfg: Any) -> list[str]:
    """Upload yesterday's run (same workload, another seed, with a bucket column) as two
    tuning jobs that apply their per-regime results: the cache limits and, since the run has
    buckets, the W_L/W_D/W_T weights (each job keeps the other half of a regime's policy)."""
    import dataclasses

    from regimetune.collectors import generate, write_events

    recorded = dataclasses.replace(cfg, seed=cfg.seed + 100, n_buckets=DEMO_BUCKETS)
    trace = root / "recorded-run.csv"
    write_events(generate(recorded), trace)
    jobs = [("cache", 12)] + ([("rescale", 8)] if recorded.n_buckets else [])
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


def _report(
    http: Any,
    base: str,
    burl: str,
    headers: dict[str, str],
    bheaders: dict[str, str],
    seen: set[int],
    seen_versions: set[int],
    truth: int,
) -> None:
    items = http.get(f"{base}/v1/decisions", params={"limit": 20}, headers=headers).json()["items"]
    for d in reversed(items):
        if d["id"] in seen:
            continue
        seen.add(d["id"])
        policy = d.get("policy") or {}
        cache = "cache " + _cache_text(policy.get("cache", {}))
        if policy.get("weights"):
            cache += ", " + _weights_text(policy["weights"])
        if d["regime_from"] == d["regime_to"]:
            console.print(
                f"[bold cyan]policy update[/] for regime [bold]{d['regime_to']}[/] "
                f"({d['detail'].split(':')[0]}) -> policy v{d['policy_version']} ({cache})"
            )
            continue
        console.print(
            f"[bold cyan]regime change[/] {regime_name(d['regime_from'])} -> [bold]{d['regime_to']}[/] at window "
            f"{int(d['inputs'].get('window', -1))} ({d['inputs'].get('reads_per_s', 0):.0f} reads/s, "
            f"{d['inputs'].get('active_keys', 0):.0f} active keys; generator regime {truth}) -> "
            f"policy v{d['policy_version']} ({cache})"
        )
    r = http.get(f"{burl}/v1/policies", headers=bheaders)
    if r.status_code == 200:
        for e in r.json().get("entries", []):
            v = (
                e.get("version", {}).get("version")
                if isinstance(e.get("version"), dict)
                else e.get("version")
            )
            if v is not None and v not in seen_versions:
                seen_versions.add(v)
                console.print(f"  [green]backend applied policy v{v}[/]")


def _summary(http: Any, base: str, burl: str, headers: dict[str, str], bheaders: dict[str, str]) -> None:
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
    r = http.get(f"{burl}/v1/policy", headers=bheaders)
    at_backend = r.json()["version"] if r.status_code == 200 else None
    ok = bool(decided) and at_backend == decided[-1]
    console.print(
        f"{len(segs)} segments, {len(decisions)} decisions, versions {decided}; backend holds "
        f"v{at_backend}: " + ("[bold green]in step[/]" if ok else "[bold red]NOT in step[/]")
    )


def register(app: typer.Typer) -> None:
    """Add this module's commands to ``app``."""
    app.command(name="demo")(demo)
