"""``regimetune collect SOURCE ARGS --url URL``: run a live collector (a daemon's Prometheus
``/metrics``, a Prometheus server's range queries, a NATS JetStream subject; any collector in
:mod:`regimetune.collectors.registry` that yields windows) and push each window to the
service's ``POST /v1/ingest``.

Nothing is dropped on the way. A batch is sent again, with backoff, while the service is
unreachable or answers 5xx/429, under an Idempotency-Key derived from the source (the NATS
message id; otherwise the source's name and arguments and the window's start), so a batch the
service already holds is acknowledged, not counted twice. A collector that pulls (NATS) is
asked for its next batch only once the service acknowledged this one, which is when it
acknowledges the message to NATS; a collector on its own clock (a scraper) runs in a thread
and its windows wait in a bounded queue while the service is away.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

import httpx
import typer
from rich.console import Console

from regimetune.cli.traces import ServiceWindowOpt
from regimetune.client.ingest import IngestClient
from regimetune.collectors.base import WindowBatch
from regimetune.models import DEFAULT_WINDOW_S, ConfigError, InputError
from regimetune.models.errors import ConflictError

REST_KEY = 2**64 - 1
"""The key that carries a window's requests not listed per key (a scrape lists only the
daemon's hot keys), so the service's reads/s and writes/s match the daemon's counters."""
_U32 = 2**32 - 1
_MAX_KEY = 128  # the service's limit on an Idempotency-Key


@dataclass(frozen=True, slots=True)
class CollectStats:
    """What a run pushed: windows acknowledged, their requests, those the service already
    held, resends after a failure, batches refused and skipped, the source's retried
    errors, and the wall time."""

    windows: int
    requests: int
    duplicates: int
    retries: int
    refused: int
    source_errors: int
    wall_s: float


def ingest_body(
    window: WindowBatch, *, rest_key: int | None = REST_KEY, buckets: bool = False
) -> dict[str, Any]:
    """The ``POST /v1/ingest`` JSON of ``window``. With ``rest_key``, the requests that the
    per-key counts do not cover go on that key (split over ``rest_key - i`` when beyond a
    32-bit count); per-bucket figures are sent only with ``buckets``."""
    body = window.to_ingest()
    if not buckets:
        body.pop("buckets", None)
    if rest_key is None or window.events is not None:
        return body
    rest_r = window.reads_total - int(window.reads.sum())
    rest_w = window.writes_total - int(window.writes.sum())
    counts = body["counts"]
    i = 0
    while rest_r > 0 or rest_w > 0:
        r, w = min(rest_r, _U32), min(rest_w, _U32)
        counts["keys"].append(rest_key - i)
        counts["reads"].append(r)
        counts["writes"].append(w)
        rest_r, rest_w, i = rest_r - r, rest_w - w, i + 1
    return body


def batch_key(source: str, identity: str, window: WindowBatch) -> str:
    """The Idempotency-Key of a window: ``source:id`` when the source names its batches (a
    NATS message id), else ``source:digest-of-identity:w<start>`` (the same window of the
    same source gets the same key on a rerun); hashed when longer than the service takes."""
    key = (
        f"{source}:{window.source_id}"
        if window.source_id
        else f"{source}:{hashlib.sha256(identity.encode()).hexdigest()[:16]}:w{window.window_start!r}"
    )
    return key if len(key) <= _MAX_KEY else f"{source}:sha256:{hashlib.sha256(key.encode()).hexdigest()}"


class Pusher:
    """Send windows through an :class:`IngestClient` until the service acknowledges each.

    Connection errors, 5xx and 429 answers are retried with exponential backoff
    (``backoff_s`` doubling up to ``backoff_max_s``) for up to ``give_up_s`` seconds per
    batch (``None``: for ever). A 409 (the key was used for another batch) raises
    :class:`ConflictError`; another 4xx raises :class:`InputError` with the service's reason,
    unless ``skip_refused`` allows skipping that many refused batches."""

    def __init__(
        self,
        client: IngestClient,
        *,
        backoff_s: float = 0.2,
        backoff_max_s: float = 5.0,
        give_up_s: float | None = None,
        skip_refused: int = 0,
        on_retry: Callable[[str], None] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.client = client
        self.backoff_s = backoff_s
        self.backoff_max_s = backoff_max_s
        self.give_up_s = give_up_s
        self.skip_refused = skip_refused
        self.on_retry = on_retry
        self.sleep = sleep
        self.retries = 0
        self.refused = 0

    def push(self, body: dict[str, Any], key: str) -> dict[str, Any] | None:
        """The service's acknowledgement, or ``None`` for a refused batch that was skipped."""
        began = time.monotonic()
        attempt = 0
        while True:
            try:
                return self.client.post_body(body, key=key)
            except httpx.HTTPStatusError as exc:
                r = exc.response
                if r.status_code < 500 and r.status_code != 429:
                    self._refused(r, body)
                    return None
                error = f"{r.status_code} {_detail(r)}"
            except httpx.TransportError as exc:
                error = f"{type(exc).__name__}: {exc}"
            if self.give_up_s is not None and time.monotonic() - began >= self.give_up_s:
                raise ConfigError(
                    f"cannot deliver the batch of window {body['window_start']:g} to "
                    f"{self.client.base_url} within {self.give_up_s:g} s: {error}"
                )
            self.retries += 1
            if self.on_retry is not None:
                self.on_retry(error)
            self.sleep(min(self.backoff_s * 2**attempt, self.backoff_max_s))
            attempt += 1

    def _refused(self, r: httpx.Response, body: dict[str, Any]) -> None:
        why = (
            f"the service refused the batch of window {body['window_start']:g}: {r.status_code} {_detail(r)}"
        )
        if r.status_code == 409:
            raise ConflictError(why)
        self.refused += 1
        if self.refused > self.skip_refused:
            raise InputError(why)


def _detail(r: httpx.Response) -> str:
    try:
        body = r.json()
    except ValueError:
        return r.text[:200]
    return str(body.get("detail", body)) if isinstance(body, dict) else str(body)[:200]


_DONE = object()


def in_thread(windows: Iterator[Any], *, stop: threading.Event, buffer: int = 10_000) -> Iterator[Any]:
    """Read ``windows`` in a thread through a queue of at most ``buffer`` items, so a slow
    consumer does not hold up a collector on its own clock; an error of the reader is raised
    here. Set ``stop`` (and make the collector's sleeps wait on it) to end the reader."""
    q: queue.Queue[Any] = queue.Queue(maxsize=buffer)

    def put(item: Any) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.2)
                return True
            except queue.Full:
                continue
        return False

    def read() -> None:
        try:
            for w in windows:
                if not put(w):
                    break
        except BaseException as exc:  # handed to the consumer, which raises it
            put(exc)
        finally:
            close = getattr(windows, "close", None)
            if close is not None:
                close()
            put(_DONE)

    reader = threading.Thread(target=read, name="collector", daemon=True)
    reader.start()
    try:
        while True:
            item = q.get()
            if item is _DONE:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        reader.join(timeout=10)


def parse_options(pairs: list[str]) -> dict[str, Any]:
    """``["interval_s=5", "stream=TELEMETRY"]`` -> keyword arguments (values read as JSON
    where they parse, else as strings)."""
    out: dict[str, Any] = {}
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        if not sep or not name.isidentifier():
            raise ConfigError(f"--option takes NAME=VALUE, got {pair!r}")
        try:
            out[name] = json.loads(raw)
        except ValueError:
            out[name] = raw
    return out


def build_live(
    name: str, args: list[str], options: dict[str, Any], *, window_s: float, stop: threading.Event
) -> Any:
    """The collector ``name`` set up for a long run: its window length from ``--window``,
    scrapes aligned to window boundaries and retried (not fatal), sleeps that ``stop`` ends."""
    from regimetune.collectors.registry import TRACE_FORMATS, build_collector, collector_class

    if name in TRACE_FORMATS:
        raise ConfigError(f"{name!r} reads a trace file: send it with 'regimetune replay TRACE --url URL'")
    cls = collector_class(name)
    accepted = inspect.signature(cls).parameters
    defaults: dict[str, Any] = {}
    if cls.window_option:
        defaults[cls.window_option] = window_s
    for option, value in (("align", True), ("max_errors", None), ("sleep", stop.wait)):
        if option in accepted:
            defaults[option] = value
    return build_collector(name, *args, **(defaults | options))


def run(
    collector: Any,
    pusher: Pusher,
    *,
    identity: str,
    stop: threading.Event,
    rest_key: int | None = REST_KEY,
    buckets: bool = False,
    max_windows: int | None = None,
    on_window: Callable[[WindowBatch, dict[str, Any] | None], None] | None = None,
) -> CollectStats:
    """Push every window ``collector`` yields (up to ``max_windows``) and count them."""
    t0 = time.monotonic()
    counts = {"windows": 0, "requests": 0, "duplicates": 0}
    items: Iterator[Any] = collector.collect()
    if getattr(collector, "live", False):
        items = in_thread(items, stop=stop)
    try:
        for item in items:
            if not isinstance(item, WindowBatch):
                raise ConfigError(f"{collector.name!r} yields raw events: use 'regimetune replay'")
            ack = pusher.push(
                ingest_body(item, rest_key=rest_key, buckets=buckets),
                batch_key(collector.name, identity, item),
            )
            if ack is not None:
                counts["windows"] += 1
                counts["requests"] += item.requests
                counts["duplicates"] += bool(ack.get("duplicate"))
            if on_window is not None:
                on_window(item, ack)
            if max_windows is not None and counts["windows"] >= max_windows:
                break
    finally:
        stop.set()
        close = getattr(items, "close", None)
        if close is not None:
            close()
    return CollectStats(
        **counts,
        retries=pusher.retries,
        refused=pusher.refused,
        source_errors=int(getattr(collector, "errors", 0)),
        wall_s=round(time.monotonic() - t0, 3),
    )


def collect(
    source: str = typer.Argument(
        ..., help="A registered live collector: prometheus-scrape, prometheus-range or nats."
    ),
    args: list[str] = typer.Argument(
        None,
        help="The collector's arguments: the daemon's /metrics URL, the Prometheus server's URL, "
        "or the NATS subject.",
    ),
    url: str = typer.Option(..., "--url", help="Base URL of the service, e.g. http://127.0.0.1:8080."),
    token: str | None = typer.Option(
        None, envvar="REGIMETUNE_COLLECT_TOKEN", help="Write token of the service (bearer)."
    ),
    window: ServiceWindowOpt = DEFAULT_WINDOW_S,
    option: list[str] = typer.Option(
        [],
        "--option",
        "-o",
        help="A collector option NAME=VALUE (repeatable), e.g. -o url=nats://host:4222 -o stream=T, "
        "-o start=1700000000 -o end=1700003600, -o top_k=50.",
    ),
    max_windows: int | None = typer.Option(None, "--windows", min=1, help="Stop after this many windows."),
    run_id: str | None = typer.Option(
        None,
        help="Names the source in the Idempotency-Keys of windows without their own id "
        "(default: the source and its arguments).",
    ),
    buckets: bool = typer.Option(
        False, "--buckets", help="Send per-bucket load and bytes (the service needs engine.n_buckets)."
    ),
    rest: bool = typer.Option(
        True,
        "--rest/--no-rest",
        help="Send the requests not listed per key (beyond a scrape's hot keys) on one reserved key, "
        "so the service's rates are the daemon's.",
    ),
    give_up: float | None = typer.Option(
        None, "--give-up", min=0, help="Seconds to keep resending one batch (default: for ever)."
    ),
    skip_refused: int = typer.Option(
        0, min=0, help="Batches the service may refuse (4xx) before the run stops; they are skipped."
    ),
    wait: float = typer.Option(30.0, min=0, help="Seconds to wait for the service's /readyz first."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as one JSON object."),
) -> None:
    """Run a live collector and push each window to the service's POST /v1/ingest, resending
    (with backoff) while the service is away; nothing is dropped or counted twice."""
    from regimetune.cli.replay import wait_until_ready

    console = Console(stderr=True, soft_wrap=True, highlight=False)
    stop = threading.Event()
    options = parse_options(option)
    positional = list(args or [])
    identity = run_id or json.dumps([source, positional, options], sort_keys=True, default=str)
    collector = build_live(source, positional, options, window_s=window, stop=stop)
    wait_until_ready(url, wait)

    def on_retry(error: str) -> None:
        console.print(f"  service unavailable ({error}); resending")

    def on_window(w: WindowBatch, ack: dict[str, Any] | None) -> None:
        if as_json:
            return
        what = (
            "refused, skipped"
            if ack is None
            else "already held"
            if ack.get("duplicate")
            else f"seq {ack['seq']}"
        )
        console.print(f"  window {w.window_start:.3f} ({w.length:g} s): {w.requests} requests -> {what}")

    console.print(f"collecting {source} {' '.join(positional)} into {url} ({window:g} s windows)")
    with IngestClient(url, token=token) as client, collector:
        pusher = Pusher(client, give_up_s=give_up, skip_refused=skip_refused, on_retry=on_retry)
        try:
            stats = run(
                collector,
                pusher,
                identity=identity,
                stop=stop,
                rest_key=REST_KEY if rest else None,
                buckets=buckets,
                max_windows=max_windows,
                on_window=on_window,
            )
        except KeyboardInterrupt:
            console.print("interrupted")
            raise typer.Exit(130) from None
    if as_json:
        typer.echo(json.dumps(asdict(stats)))
        return
    console.print(
        f"pushed {stats.windows} windows ({stats.requests} requests, {stats.duplicates} already held, "
        f"{stats.retries} resends, {stats.source_errors} source errors retried) in {stats.wall_s:.1f} s"
    )


def register(app: typer.Typer) -> None:
    """Add this module's commands to ``app``."""
    app.command(name="collect")(collect)


__all__ = ["REST_KEY", "CollectStats", "Pusher", "batch_key", "build_live", "in_thread", "ingest_body", "run"]
