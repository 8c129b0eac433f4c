"""``regimetune collect``: live collectors pushed into a real ``regimetune serve`` on 127.0.0.1.

The parts (the ingest body, the keys, the resending pusher, scrape errors) against in-process
fakes; then real processes: a prometheus-client exposition server -> ``collect`` -> the
service, also while the service is down for a few seconds; a NATS JetStream subject whose
redelivered batches the service does not count twice."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily
from typer.testing import CliRunner

from regimetune.cli.collect import REST_KEY, Pusher, batch_key, build_live, ingest_body, parse_options
from regimetune.cli.demo import free_port, spawn, stop, wait_ready
from regimetune.cli.main import app
from regimetune.client.ingest import IngestClient
from regimetune.collectors.base import WindowBatch
from regimetune.collectors.prometheus import PrometheusScrapeCollector
from regimetune.models import ConfigError, InputError
from regimetune.models.errors import ConflictError, SourceError

TOKEN = "collect-token"


def _window(**kw: Any) -> WindowBatch:
    base: dict[str, Any] = {
        "window_start": 120.0,
        "length": 60.0,
        "keys": np.array([7], np.uint64),
        "reads": np.array([5], np.uint32),
        "writes": np.array([1], np.uint32),
        "reads_total": 5,
        "writes_total": 1,
    }
    return WindowBatch(**(base | kw))


# -- the parts ------------------------------------------------------------------------------------
def test_ingest_body_puts_the_unlisted_requests_on_the_rest_key_and_buckets_only_on_request() -> None:
    w = _window(
        reads_total=2**32 + 9,
        writes_total=4,
        bucket_ids=np.array([3], np.int32),
        bucket_load=np.array([9.0]),
        bucket_bytes=np.array([1.0]),
    )
    body = ingest_body(w)
    c = body["counts"]
    assert c["keys"] == [7, REST_KEY, REST_KEY - 1]
    assert sum(c["reads"]) == 2**32 + 9 and sum(c["writes"]) == 4  # a 32-bit count is split
    assert max(c["reads"]) <= 2**32 - 1 and "buckets" not in body
    assert ingest_body(w, rest_key=None)["counts"]["keys"] == [7]
    assert ingest_body(w, buckets=True)["buckets"] == {"ids": [3], "load": [9.0], "bytes": [1.0]}
    assert ingest_body(_window())["counts"]["keys"] == [7]  # nothing unlisted: no rest row


def test_batch_key_is_the_message_id_or_the_source_and_window() -> None:
    assert batch_key("nats", "x", _window(source_id="d1-w0")) == "nats:d1-w0"
    k1 = batch_key("prometheus-scrape", "http://a/metrics", _window())
    assert k1 == batch_key("prometheus-scrape", "http://a/metrics", _window())  # a rerun: same key
    assert k1 != batch_key("prometheus-scrape", "http://b/metrics", _window())
    assert k1 != batch_key("prometheus-scrape", "http://a/metrics", _window(window_start=180.0))
    long = batch_key("nats", "x", _window(source_id="m" * 300))
    assert len(long) <= 128 and long != batch_key("nats", "x", _window(source_id="m" * 299))


def _client(handler: Any) -> IngestClient:
    return IngestClient(
        "http://service", token="t", client=httpx.Client(transport=httpx.MockTransport(handler))
    )


def test_pusher_resends_until_acknowledged_with_the_same_key() -> None:
    seen: list[tuple[str | None, str | None]] = []
    answers = iter([httpx.ConnectError("refused"), 503, 429, 200])

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append((request.headers.get("Idempotency-Key"), request.headers.get("Authorization")))
        a = next(answers)
        if isinstance(a, Exception):
            raise a
        return httpx.Response(
            a, json={"seq": 4, "rows": 1, "windows_closed": 0} if a == 200 else {"detail": "x"}
        )

    sleeps: list[float] = []
    p = Pusher(_client(handler), backoff_s=0.1, backoff_max_s=0.25, sleep=sleeps.append)
    assert p.push({"window_start": 0.0}, "k1") == {"seq": 4, "rows": 1, "windows_closed": 0}
    assert seen == [("k1", "Bearer t")] * 4 and p.retries == 3
    assert sleeps == [0.1, 0.2, 0.25]  # doubling, capped


def test_pusher_refusals_are_errors_with_the_reason_or_skipped_within_budget() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        return httpx.Response(422, json={"detail": "window starting at 0 is already closed"})

    with pytest.raises(InputError, match="refused the batch of window 0: 422 window starting at 0"):
        Pusher(_client(refuse)).push({"window_start": 0.0}, "k")
    skipping = Pusher(_client(refuse), skip_refused=1)
    assert skipping.push({"window_start": 0.0}, "k") is None and skipping.refused == 1
    with pytest.raises(InputError):
        skipping.push({"window_start": 1.0}, "k2")
    with pytest.raises(ConflictError, match="409"):
        Pusher(_client(lambda r: httpx.Response(409, json={"detail": "key used"}))).push(
            {"window_start": 0.0}, "k"
        )

    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused")

    with pytest.raises(ConfigError, match="within 0 s"):
        Pusher(_client(down), give_up_s=0.0, sleep=lambda s: None).push({"window_start": 0.0}, "k")


def test_options_and_sources_are_checked() -> None:
    assert parse_options(["interval_s=5", "stream=T", "hot_keys_metric=null"]) == {
        "interval_s": 5,
        "stream": "T",
        "hot_keys_metric": None,
    }
    with pytest.raises(ConfigError, match="NAME=VALUE"):
        parse_options(["interval_s"])
    stop = threading.Event()
    with pytest.raises(ConfigError, match="regimetune replay"):
        build_live("csv", ["t.csv"], {}, window_s=1.0, stop=stop)
    with pytest.raises(ConfigError, match="unknown collector"):
        build_live("carrier-pigeon", [], {}, window_s=1.0, stop=stop)
    c = build_live("prometheus-scrape", ["http://x/metrics"], {"top_k": 3}, window_s=5.0, stop=stop)
    assert (c.interval_s, c.align, c.max_errors, c.top_k) == (5.0, True, None, 3)


def test_a_failed_scrape_is_retried_and_the_next_window_covers_the_gap() -> None:
    values = iter([10, None, None, 25, 40])
    clock = iter(float(t) for t in range(100))

    def handler(request: httpx.Request) -> httpx.Response:
        v = next(values)
        if v is None:
            return httpx.Response(503, text="restarting")
        return httpx.Response(200, text=f'storage_bucket_requests_total{{bucket="0",op="read"}} {v}\n')

    http = httpx.Client(transport=httpx.MockTransport(handler))
    c = PrometheusScrapeCollector(
        "http://d/metrics",
        windows=2,
        max_errors=2,
        client=http,
        clock=lambda: next(clock),
        sleep=lambda s: None,
    )
    w1, w2 = list(c.collect())
    assert (w1.reads_total, w2.reads_total) == (15, 15) and c.errors == 2
    assert w1.length > w2.length  # the window after the failures spans them
    values = iter([10, None, None])
    strict = PrometheusScrapeCollector("http://d/metrics", max_errors=1, client=http, sleep=lambda s: None)
    with pytest.raises(SourceError, match="503"):
        list(strict.collect())


# -- real processes -------------------------------------------------------------------------------
class ScriptedDaemon:
    """A daemon's /metrics on a real prometheus-client server: one bucket counter and a hot
    key; every scrape's value is recorded, so a test knows what a scraper saw."""

    def __init__(self) -> None:
        self.total = 0
        self.scraped: list[int] = []
        self._lock = threading.Lock()
        registry = CollectorRegistry()
        registry.register(self)  # type: ignore[arg-type]
        self.server, self.thread = start_http_server(0, addr="127.0.0.1", registry=registry)
        self.url = f"http://127.0.0.1:{self.server.server_port}/metrics"
        self._stop = threading.Event()
        self._load = threading.Thread(target=self._run, daemon=True)
        self._load.start()

    def collect(self) -> Iterator[CounterMetricFamily]:
        with self._lock:
            v = self.total
            self.scraped.append(v)
        buckets = CounterMetricFamily("storage_bucket_requests", "requests", labels=["bucket", "op"])
        buckets.add_metric(["0", "read"], v)
        hot = CounterMetricFamily("storage_hot_key_requests", "hot keys", labels=["key", "op"])
        hot.add_metric(["hot-1", "read"], v // 3)
        yield buckets
        yield hot

    def _run(self) -> None:
        rng = np.random.default_rng(1)
        while not self._stop.wait(0.02):
            with self._lock:
                self.total += int(rng.integers(5, 50))

    def close(self) -> None:
        self._stop.set()
        self._load.join(5)
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def scripted_daemon() -> Iterator[ScriptedDaemon]:
    d = ScriptedDaemon()
    yield d
    d.close()


def start_service(tmp: Path, port: int, window_s: float) -> Any:
    env = {
        "REGIMETUNE_STORE__URL": f"sqlite:///{tmp / 'service.db'}",
        "REGIMETUNE_AUTH__WRITE_TOKENS": json.dumps([TOKEN]),
        "REGIMETUNE_ENGINE__WINDOW_S": str(window_s),
        "REGIMETUNE_ENGINE__DETECTOR": json.dumps({}),
        "REGIMETUNE_INGEST__ALLOWED_LATENESS_WINDOWS": "0",
    }
    log = tmp / f"service-{time.monotonic_ns()}.log"
    p = spawn(["serve", "--host", "127.0.0.1", "--port", str(port)], env, log)
    wait_ready(f"http://127.0.0.1:{port}/readyz", p, log)
    return p


def closed_windows(base: str, after_start: float) -> dict[float, int]:
    """Close the open window with one later batch, wait until applied, read every window."""
    r = httpx.post(
        f"{base}/v1/ingest",
        json={"window_start": after_start, "counts": {"keys": [1], "reads": [1]}},
        headers={"Authorization": f"Bearer {TOKEN}"},
    )
    r.raise_for_status()
    end = time.monotonic() + 120  # the first window compiles the aggregator's kernels: slow on a busy machine
    while (s := httpx.get(f"{base}/v1/engine").json())["applied_seq"] != s["last_seq"]:
        assert time.monotonic() < end, "the service did not apply its batches"
        time.sleep(0.1)
    return {w["start"]: w["requests"] for w in httpx.get(f"{base}/v1/windows").json()}


def _summary(log: Path) -> dict[str, Any]:
    return json.loads(log.read_text().strip().splitlines()[-1])


def _collect_process(tmp: Path, daemon_url: str, base: str, windows: int) -> tuple[Any, Path]:
    log = tmp / "collect.log"
    args = ["collect", "prometheus-scrape", daemon_url, "--url", base, "--token", TOKEN]
    p = spawn([*args, "--window", "1", "--windows", str(windows), "--json"], {}, log)
    return p, log


@pytest.mark.slow
def test_scraped_windows_arrive_in_the_service_with_every_request(tmp_path: Path, scripted_daemon) -> None:  # type: ignore[no-untyped-def]
    port = free_port()
    service = start_service(tmp_path, port, 1.0)
    base = f"http://127.0.0.1:{port}"
    try:
        proc, log = _collect_process(tmp_path, scripted_daemon.url, base, 4)
        assert proc.wait(60) == 0, log.read_text()
        stats = _summary(log)
        seen = scripted_daemon.scraped
        assert stats["windows"] == 4 and stats["requests"] == seen[4] - seen[0] > 0
        got = closed_windows(base, float(int(time.time()) + 5))
        starts = sorted(got)  # the closing batch's window stays open
        assert len(starts) == 4 and np.allclose(np.diff(starts), 1.0)  # aligned, one per second
        assert sum(got[s] for s in starts) == stats["requests"]  # hot key + the rest: every request
    finally:
        stop(service)


@pytest.mark.slow
def test_the_service_down_for_seconds_loses_no_window(tmp_path: Path, scripted_daemon) -> None:  # type: ignore[no-untyped-def]
    port = free_port()
    service = start_service(tmp_path, port, 1.0)
    base = f"http://127.0.0.1:{port}"
    n = 10
    proc, log = _collect_process(tmp_path, scripted_daemon.url, base, n)
    try:
        end = time.monotonic() + 30
        while httpx.get(f"{base}/v1/engine").json()["last_seq"] < 2:
            assert time.monotonic() < end and proc.poll() is None, log.read_text()
            time.sleep(0.1)
        stop(service)
        time.sleep(3.0)  # scrapes go on; their windows wait in the collector
        service = start_service(tmp_path, port, 1.0)
        assert proc.wait(60) == 0, log.read_text()
        stats = _summary(log)
        seen = scripted_daemon.scraped
        assert stats["windows"] == n and stats["retries"] > 0
        assert stats["requests"] == seen[n] - seen[0]
        got = closed_windows(base, float(int(time.time()) + 5))
        starts = sorted(got)
        assert len(starts) == n and np.allclose(np.diff(starts), 1.0)  # no window missing
        assert sum(got[s] for s in starts) == stats["requests"]
    finally:
        stop(proc)
        stop(service)


def _batch(start: float, reads: list[int]) -> dict[str, Any]:
    return {"window_start": start, "counts": {"keys": list(range(len(reads))), "reads": reads}}


@pytest.mark.slow
def test_a_redelivered_nats_batch_is_not_counted_twice(tmp_path: Path, jetstream) -> None:  # type: ignore[no-untyped-def]
    port = free_port()
    service = start_service(tmp_path, port, 60.0)
    base = f"http://127.0.0.1:{port}"
    sent = {0.0: [5, 1], 60.0: [3], 120.0: [2, 2, 2]}
    for i, (start, reads) in enumerate(sent.items()):
        jetstream.publish(_batch(start, reads), msg_id=f"d1-w{i}")
    args = ["collect", "nats", jetstream.subject, "--url", base, "--token", TOKEN, "--window", "60", "--json"]
    opts = ["-o", f"url={jetstream.url}", "-o", f"stream={jetstream.stream}", "-o", "durable=rt"]
    opts += ["-o", "max_idle_s=1", "-o", "fetch_timeout_s=0.2"]
    runner = CliRunner()
    try:
        first = runner.invoke(app, [*args, *opts, "--windows", "2"])
        assert first.exit_code == 0, first.output
        assert json.loads(first.stdout.splitlines()[-1])["duplicates"] == 0
        # the second batch was pushed but the run stopped before acknowledging it to NATS;
        # the first is published again (past JetStream's duplicate window, so it is stored twice)
        time.sleep(0.7)
        jetstream.publish(_batch(0.0, sent[0.0]), msg_id="d1-w0")
        second = runner.invoke(app, [*args, *opts])
        assert second.exit_code == 0, second.output
        stats = json.loads(second.stdout.splitlines()[-1])
        assert (stats["windows"], stats["duplicates"]) == (3, 2)  # d1-w1 again, d1-w2, d1-w0 again
        assert jetstream.pending("rt") == 0
        got = closed_windows(base, 600.0)
        assert {s: got[s] for s in sent} == {s: sum(r) for s, r in sent.items()}
    finally:
        stop(service)


@pytest.mark.slow
def test_a_range_collected_twice_is_acknowledged_not_counted_twice(tmp_path: Path, prom_api) -> None:  # type: ignore[no-untyped-def]
    times = [60.0 * (20 + i) for i in range(10)]  # on the service's window grid
    for b in range(2):
        prom_api.series["buckets"][(("bucket", str(b)), ("op", "read"))] = {
            t: 10.0 * (b + 1) + t / 60 for t in times
        }
    prom_api.series["hot"][(("key", "k1"), ("op", "read"))] = {t: 4.0 for t in times}
    port = free_port()
    service = start_service(tmp_path, port, 60.0)
    base = f"http://127.0.0.1:{port}"
    args = ["collect", "prometheus-range", prom_api.url, "--url", base, "--token", TOKEN, "--window", "60"]
    args += ["-o", "start=1200", "-o", "end=1740", "--json"]
    runner = CliRunner()
    try:
        runs = [runner.invoke(app, args) for _ in range(2)]
        assert all(r.exit_code == 0 for r in runs), [r.output for r in runs]
        first, again = (json.loads(r.stdout.splitlines()[-1]) for r in runs)
        assert (first["windows"], first["duplicates"], again["duplicates"]) == (10, 0, 10)
        got = closed_windows(base, 6000.0)
        expected = {t - 60: round(30 + 2 * t / 60) for t in times}  # two buckets; the hot key within them
        assert got == expected and first["requests"] == sum(expected.values())
    finally:
        stop(service)
