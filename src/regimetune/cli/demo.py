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
) -> None:
    """Start the reference backend and the service, replay a generated four-regime run through
    POST /v1/ingest, and show regime changes and delivered policy versions as they happen."""
    import httpx

    from regimetune.api.replay import IngestClient, count_windows
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
    try:
        console.rule("[bold]regimetune demo")
        backend = spawn(
            [
                "backend",
                "--host",
                "127.0.0.1",
                "--port",
                str(bport),
                "--state",
                str(root / "backend.db"),
                "--servers",
                "8",
            ],
            {"REGIMETUNE_BACKEND_TOKEN": backend_token},
            root / "backend.log",
        )
        service_env = {
            "REGIMETUNE_STORE__URL": f"sqlite:///{root / 'service.db'}",
            "REGIMETUNE_AUTH__WRITE_TOKENS": json.dumps([token]),
            "REGIMETUNE_ENGINE__WINDOW_S": str(window_s),
            "REGIMETUNE_ENGINE__DETECTOR": json.dumps({"warmup": 10}),
            "REGIMETUNE_PUSH__BACKEND": "reference",
            "REGIMETUNE_PUSH__URL": burl,
            "REGIMETUNE_PUSH__TOKEN": backend_token,
            "REGIMETUNE_PUSH__POLL_INTERVAL_S": "0.1",
        }
        service = spawn(
            ["serve", "--host", "127.0.0.1", "--port", str(sport)], service_env, root / "service.log"
        )
        with console.status("starting the reference backend and the service..."):
            wait_ready(f"{burl}/healthz", backend, root / "backend.log")
            wait_ready(f"{base}/readyz", service, root / "service.log")
        console.print(f"reference backend  {burl}   (log {root / 'backend.log'})")
        console.print(f"service            {base}   dashboard [link={base}/dashboard]{base}/dashboard[/link]")
        with console.status("generating a ParSplice-like run (four regimes)..."):
            cfg = GeneratorConfig(duration_s=9000, workers=workers, seed=seed)
            windows = list(count_windows(generate(cfg), window_s))
        console.print(
            f"replaying {len(windows)} windows of {window_s:g} s ({cfg.duration_s / 3600:.1f} h of workload) "
            f"in about {seconds:g} s through POST /v1/ingest/counts"
        )
        headers = {"Authorization": f"Bearer {token}"}
        bheaders = {"Authorization": f"Bearer {backend_token}"}
        job_id = _start_tuning(root, base, headers, cfg, window_s) if tune else None
        seen_decisions: set[int] = set()
        seen_versions: set[int] = set()
        pace = seconds / max(len(windows), 1)
        with (
            IngestClient(base, token=token) as client,
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
            t0 = time.monotonic()
            for i, wc in enumerate(windows):
                client.send(wc)
                _report(http, base, burl, headers, bheaders, seen_decisions, seen_versions, wc.label)
                job_id = _job_report(http, base, headers, job_id)
                progress.advance(task)
                time.sleep(max(0.0, t0 + (i + 1) * pace - time.monotonic()))
            end = time.monotonic() + 20
            while time.monotonic() < end:  # let the engine apply and the outbox deliver the rest
                _report(http, base, burl, headers, bheaders, seen_decisions, seen_versions, -1)
                st = http.get(f"{base}/v1/engine", headers=headers).json()
                if not st["outbox_pending"] and st["applied_seq"] == st["last_seq"]:
                    break
                time.sleep(0.2)
            _summary(http, base, burl, headers, bheaders)
        if keep_running:
            console.print(f"[bold]still serving[/] at {base}/dashboard; Ctrl-C stops both processes")
            try:
                while service.poll() is None and backend.poll() is None:
                    time.sleep(0.5)
            except KeyboardInterrupt:
                pass
    finally:
        stop(service)
        stop(backend)
        if own_dir and not keep_running:
            shutil.rmtree(root, ignore_errors=True)


def _start_tuning(root: Path, base: str, headers: dict[str, str], cfg: Any, window_s: float) -> str:
    """Upload yesterday's run (same workload, another seed) as a tuning job that applies
    its per-regime policies."""
    import dataclasses

    import httpx

    from regimetune.collectors import generate, write_events

    trace = root / "recorded-run.csv"
    write_events(generate(dataclasses.replace(cfg, seed=cfg.seed + 100)), trace)
    r = httpx.post(
        f"{base}/v1/tuning-jobs/upload",
        params={"filename": trace.name, "apply": "true", "budget": 12},
        content=trace.read_bytes(),
        headers={**headers, "Content-Type": "application/octet-stream"},
        timeout=60.0,
    )
    r.raise_for_status()
    job = r.json()
    console.print(
        f"[magenta]tuning job[/] {job['id'][:8]} started on a recorded run ({trace.stat().st_size >> 20} MiB): "
        "regimes without a tuned policy get the safe default until it is done"
    )
    return str(job["id"])


def _job_report(http: Any, base: str, headers: dict[str, str], job_id: str | None) -> str | None:
    if job_id is None:
        return None
    job = http.get(f"{base}/v1/tuning-jobs/{job_id}", headers=headers).json()
    if job["status"] in ("pending", "running"):
        return job_id
    if job["status"] == "succeeded":
        tuned = ", ".join(
            f"regime {rid}: {p['cache']['mode']} n={p['cache'].get('limit_keys')}"
            for rid, p in job["policies"].items()
        )
        console.print(f"[magenta]tuning job done[/]: {tuned}")
    else:
        console.print(f"[magenta]tuning job failed[/]: {job['error']}")
    return None


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
        c = d["policy"]["cache"] if d.get("policy") else {}
        cache = f"cache {c.get('mode', '?')}" + ("" if not c.get("limit_keys") else f" n={c['limit_keys']}")
        if d["regime_from"] == d["regime_to"]:
            console.print(
                f"[bold cyan]policy update[/] for regime [bold]{d['regime_to']}[/] "
                f"({d['detail'].split(':')[0]}) -> policy v{d['policy_version']} ({cache})"
            )
            continue
        console.print(
            f"[bold cyan]regime change[/] {d['regime_from']} -> [bold]{d['regime_to']}[/] at window "
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
    for col in ("regime", "windows", "start (s)", "end (s)", "requests/s"):
        t.add_column(col, justify="right")
    for s in segs:
        t.add_row(
            str(s["regime_id"]),
            str(s["end_window"] - s["start_window"]),
            f"{s['start']:.0f}",
            f"{s['end']:.0f}",
            f"{s['summary'].get('requests_per_s', 0):.1f}",
        )
    console.print(t)
    decisions = http.get(f"{base}/v1/decisions", params={"limit": 1000}, headers=headers).json()["items"]
    d = Table(title="Decisions")
    for col in ("version", "from", "to", "outcome", "detail"):
        d.add_column(col)
    for x in reversed(decisions):
        d.add_row(
            str(x["policy_version"]),
            str(x["regime_from"]),
            str(x["regime_to"]),
            x["outcome"],
            x["detail"],
        )
    console.print(d)
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
