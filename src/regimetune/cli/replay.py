"""``regimetune replay TRACE --url URL``: the storage daemon simulator. It turns a recorded or
generated trace into per-window per-key counts (:func:`regimetune.client.ingest.count_windows`)
and sends them through the service's ingest endpoints (:class:`IngestClient`), paced on the
trace's clock or as fast as possible, from one or several daemons. ``regimetune demo`` and
the compose file's ``demo`` profile drive the service with it."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import typer
from rich.console import Console

from regimetune.cli.traces import (
    ColumnsOpt,
    DelimiterOpt,
    FormatOpt,
    NoHeaderOpt,
    ReadOpOpt,
    ServiceWindowOpt,
    SkipBadOpt,
    TimeUnitOpt,
    WriteOpOpt,
    fail_cleanly,
    report_reading,
    trace_options,
)
from regimetune.client.ingest import IngestClient, WindowCounts
from regimetune.models import DEFAULT_WINDOW_S, ConfigError, InputError

BODIES = ("binary", "json")
"""Request bodies of ``--body``: the compact counts (POST /v1/ingest/counts) or JSON (POST /v1/ingest)."""


@dataclass(frozen=True, slots=True)
class ReplayStats:
    """What a replay sent: windows, requests (batches), per-key rows, the trace's requests,
    batches the service already held (resends), and the wall time."""

    windows: int
    batches: int
    keys: int
    requests: int
    duplicates: int
    wall_s: float


def paced(
    windows: Iterable[WindowCounts],
    *,
    speed: float | None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[WindowCounts]:
    """Yield each window once it has closed on the trace's clock, ``speed`` trace seconds per
    wall second (1: real time); ``None`` yields them as fast as they are consumed."""
    t0: float | None = None
    first = 0.0
    for wc in windows:
        if speed is not None:
            if t0 is None:
                t0, first = clock(), wc.start
            due = t0 + (wc.start + wc.length - first) / speed
            wait = due - clock()
            if wait > 0:
                sleep(wait)
        yield wc


def split(wc: WindowCounts, parts: int) -> list[WindowCounts]:
    """The share of each of ``parts`` daemons: a key belongs to daemon ``key % parts``, as a
    storage service shards its keys over its servers."""
    if parts == 1:
        return [wc]
    owner = wc.keys % np.uint64(parts)
    out = []
    for i in range(parts):
        sel = owner == np.uint64(i)
        out.append(WindowCounts(wc.start, wc.length, wc.keys[sel], wc.reads[sel], wc.writes[sel], wc.label))
    return out


class Replayer:
    """Several daemons (one :class:`IngestClient` each) sending every window in lock step:
    the service refuses a window once a later one has opened, so the next window starts
    when every daemon has sent its share of this one.

    Each batch's Idempotency-Key is ``{run_id}/d{daemon}/w{start}/{offset}``: a replay that
    is restarted (or a batch resent after a lost answer) is acknowledged, not counted twice.
    Connection errors and 5xx answers are retried ``retries`` times with backoff; a 4xx
    answer raises :class:`InputError` with the service's reason."""

    def __init__(
        self,
        clients: Sequence[IngestClient],
        *,
        run_id: str = "replay",
        chunk: int = 0,
        retries: int = 5,
        backoff_s: float = 0.5,
    ) -> None:
        self.clients = list(clients)
        self.run_id = run_id
        self.chunk = chunk
        self.retries = retries
        self.backoff_s = backoff_s
        self._pool = ThreadPoolExecutor(max_workers=len(self.clients), thread_name_prefix="daemon")
        self._counts = {"windows": 0, "batches": 0, "keys": 0, "requests": 0, "duplicates": 0}
        self._t0 = time.monotonic()

    def send(self, wc: WindowCounts) -> None:
        """Send one window, each daemon its share, and wait for every acknowledgement."""
        parts = split(wc, len(self.clients))
        for acks in self._pool.map(self._send_part, range(len(parts)), parts):
            self._counts["batches"] += len(acks)
            self._counts["duplicates"] += sum(1 for a in acks if a.get("duplicate"))
        self._counts["windows"] += 1
        self._counts["keys"] += len(wc.keys)
        self._counts["requests"] += wc.requests

    def _send_part(self, daemon: int, wc: WindowCounts) -> list[dict[str, Any]]:
        client = self.clients[daemon]
        n = len(wc.keys)
        if not n:  # no key of this window is this daemon's
            return []
        step = self.chunk or n
        acks = []
        for s in range(0, n, step):
            e = min(s + step, n)
            key = f"{self.run_id}/d{daemon}/w{wc.start!r}/{s}"
            acks.append(self._post(client, wc, s, e, key))
        return acks

    def _post(self, client: IngestClient, wc: WindowCounts, s: int, e: int, key: str) -> dict[str, Any]:
        for attempt in range(self.retries + 1):
            try:
                return client.post_counts(wc.start, wc.keys[s:e], wc.reads[s:e], wc.writes[s:e], key=key)
            except httpx.HTTPStatusError as exc:
                r = exc.response
                if r.status_code < 500 and r.status_code != 429:
                    raise InputError(
                        f"the service refused the batch of window {wc.start:g}: {r.status_code} {_detail(r)}"
                    ) from None
                error = f"{r.status_code} {_detail(r)}"
            except httpx.TransportError as exc:
                error = f"{type(exc).__name__}: {exc}"
            if attempt < self.retries:
                time.sleep(min(self.backoff_s * 2**attempt, 10.0))
        raise ConfigError(
            f"cannot deliver the batch of window {wc.start:g} to {client.base_url} "
            f"after {self.retries + 1} attempts: {error}"
        )

    def stats(self) -> ReplayStats:
        return ReplayStats(**self._counts, wall_s=round(time.monotonic() - self._t0, 3))

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        for c in self.clients:
            c.close()

    def __enter__(self) -> Replayer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _detail(r: httpx.Response) -> str:
    try:
        body = r.json()
    except ValueError:
        return r.text[:200]
    return str(body.get("detail", body)) if isinstance(body, dict) else str(body)[:200]


def wait_until_ready(url: str, timeout_s: float, *, sleep: Callable[[float], None] = time.sleep) -> None:
    """Wait until ``GET {url}/readyz`` answers 200 (the service may still be starting)."""
    end = time.monotonic() + timeout_s
    last = "no answer"
    while True:
        try:
            r = httpx.get(f"{url.rstrip('/')}/readyz", timeout=2.0)
            if r.status_code == 200:
                return
            last = f"{r.status_code} {_detail(r)}"
        except httpx.HTTPError as exc:
            last = f"{type(exc).__name__}: {exc}"
        if time.monotonic() >= end:
            raise ConfigError(f"the service at {url} is not ready after {timeout_s:g} s ({last})")
        sleep(0.5)


def replay(
    trace: Path = typer.Argument(..., help="Trace file, any format 'regimetune detect' reads."),
    url: str = typer.Option(..., "--url", help="Base URL of the service, e.g. http://127.0.0.1:8080."),
    token: str | None = typer.Option(
        None, envvar="REGIMETUNE_REPLAY_TOKEN", help="Write token of the service (bearer)."
    ),
    window: ServiceWindowOpt = DEFAULT_WINDOW_S,
    speed: float = typer.Option(
        1.0, min=1e-9, help="Trace seconds replayed per wall-clock second (1: real time)."
    ),
    fast: bool = typer.Option(False, "--fast", help="As fast as the service acknowledges (ignores --speed)."),
    body: str = typer.Option("binary", "--body", help="Request body: binary (compact counts) or json."),
    daemons: int = typer.Option(
        1, min=1, max=256, help="Daemons sending in parallel, keys split by key modulo."
    ),
    chunk: int = typer.Option(0, min=0, help="Keys per request (0: a daemon's share of a window in one)."),
    run_id: str = typer.Option(
        "replay",
        help="Prefix of the Idempotency-Keys: re-running a replay with the same id is harmless; "
        "another id sends the same windows as new batches.",
    ),
    max_windows: int | None = typer.Option(None, "--windows", min=1, help="Stop after this many windows."),
    wait: float = typer.Option(30.0, min=0, help="Seconds to wait for the service's /readyz first."),
    retries: int = typer.Option(5, min=0, help="Resends of a batch after a connection error or a 5xx."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as one JSON object."),
    fmt: FormatOpt = None,
    columns: ColumnsOpt = None,
    read_op: ReadOpOpt = None,
    write_op: WriteOpOpt = None,
    time_unit: TimeUnitOpt = "s",
    skip_bad: SkipBadOpt = 0,
    delimiter: DelimiterOpt = None,
    no_header: NoHeaderOpt = False,
) -> None:
    """Replay a trace into the service as storage daemons would: per-window per-key counts
    through POST /v1/ingest/counts (or /v1/ingest with --body json), paced on the trace's
    clock (--speed) or as fast as possible (--fast). The trace options are detect's."""
    from itertools import islice

    from regimetune.client.ingest import count_windows

    if body not in BODIES:
        raise typer.BadParameter(f"one of {', '.join(BODIES)}", param_hint="--body")
    with fail_cleanly():
        if fmt in BODIES:
            raise ConfigError(
                f"--format is the trace's format (csv, jsonl, parquet, ...); the request body is --body {fmt}"
            )
        opts = trace_options(
            fmt=fmt, columns=columns, read_op=read_op, write_op=write_op, time_unit=time_unit,
            skip_bad=skip_bad, delimiter=delimiter, no_header=no_header,
        )  # fmt: skip
        if not trace.is_file():
            raise InputError(f"no such trace file: {trace}")
        reader = opts.open(trace)
        console = Console(stderr=True, soft_wrap=True)
        wait_until_ready(url, wait)
        windows: Iterable[WindowCounts] = count_windows(reader, window)
        if max_windows is not None:
            windows = islice(windows, max_windows)
        clients = [IngestClient(url, token=token, binary=body == "binary") for _ in range(daemons)]
        pace = "as fast as possible" if fast else f"at {speed:g}x the trace's clock"
        console.print(f"replaying {trace} into {url}: {daemons} daemon(s), {window:g} s windows, {pace}")
        with Replayer(clients, run_id=run_id, chunk=chunk, retries=retries) as rep:
            for i, wc in enumerate(paced(windows, speed=None if fast else speed)):
                rep.send(wc)
                if not as_json and (i + 1) % 50 == 0:
                    console.print(f"  {i + 1} windows sent (trace time {wc.start + wc.length:g} s)")
            stats = rep.stats()
        report_reading(reader)
    if as_json:
        typer.echo(json.dumps(asdict(stats)))
        return
    console.print(
        f"sent {stats.windows} windows in {stats.batches} batches ({stats.keys} keys, "
        f"{stats.requests} requests, {stats.duplicates} already held) in {stats.wall_s:.1f} s",
        highlight=False,
    )


def register(app: typer.Typer) -> None:
    """Add this module's commands to ``app``."""
    app.command(name="replay")(replay)


__all__ = ["ReplayStats", "Replayer", "paced", "split", "wait_until_ready"]
