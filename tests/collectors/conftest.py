"""Real servers on 127.0.0.1 for the network collectors: a prometheus-client exposition server
(a storage daemon's /metrics), an HTTP server speaking Prometheus's query_range JSON, and the
NATS JetStream server when one runs."""

from __future__ import annotations

import json
import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

NATS_URL = "nats://127.0.0.1:4222"


class Daemon:
    """A storage daemon's metrics on a prometheus-client exposition server (own registry)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "storage_bucket_requests", "requests per bucket", ["bucket", "op"], registry=self.registry
        )
        self.hot = Counter("storage_hot_key_requests", "hot keys", ["key", "op"], registry=self.registry)
        self.bytes = Gauge("storage_bucket_bytes", "bytes per bucket", ["bucket"], registry=self.registry)
        self.server, self.thread = start_http_server(0, addr="127.0.0.1", registry=self.registry)
        self.url = f"http://127.0.0.1:{self.server.server_port}/metrics"

    def restart(self) -> None:
        """What a daemon restart looks like to a scraper: every counter starts again from 0."""
        self.requests.clear()
        self.hot.clear()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


@pytest.fixture
def daemon() -> Iterator[Daemon]:
    d = Daemon()
    yield d
    d.stop()


@pytest.fixture
def make_daemon() -> Iterator[Callable[[], Daemon]]:
    made: list[Daemon] = []

    def make() -> Daemon:
        made.append(Daemon())
        return made[-1]

    yield make
    for d in made:
        d.stop()


class PromAPI:
    """An HTTP server answering ``/api/v1/query_range`` from canned series: ``series[what]``
    maps a label dict (as a tuple of pairs) to ``{t: value}``; ``what`` is picked by the
    query (``hot`` when it names the hot-key metric, else ``buckets``). It checks the
    parameters as Prometheus does and records every query."""

    def __init__(self) -> None:
        self.series: dict[str, dict[tuple[tuple[str, str], ...], dict[float, float]]] = {
            "buckets": {},
            "hot": {},
        }
        self.queries: list[dict[str, str]] = []
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                u = urlparse(self.path)
                q = {k: v[0] for k, v in parse_qs(u.query).items()}
                if u.path != "/api/v1/query_range":
                    return self._send(404, {"status": "error", "errorType": "not_found", "error": u.path})
                try:
                    start, end, step = float(q["start"]), float(q["end"]), float(q["step"])
                    query = q["query"]
                except (KeyError, ValueError) as exc:
                    return self._send(400, {"status": "error", "errorType": "bad_data", "error": str(exc)})
                if (end - start) / step + 1 > 11_000:
                    return self._send(
                        400,
                        {"status": "error", "errorType": "bad_data", "error": "exceeded maximum resolution"},
                    )
                if "(" not in query:
                    return self._send(
                        400, {"status": "error", "errorType": "bad_data", "error": "parse error"}
                    )
                api.queries.append(q)
                what = "hot" if "hot_key" in query else "buckets"
                result = []
                for labels, points in api.series[what].items():
                    vals = [[t, str(v)] for t, v in sorted(points.items()) if start <= t <= end]
                    if vals:
                        result.append({"metric": dict(labels), "values": vals})
                self._send(200, {"status": "success", "data": {"resultType": "matrix", "result": result}})

            def _send(self, code: int, body: dict[str, Any]) -> None:
                raw = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_port}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


@pytest.fixture
def prom_api() -> Iterator[PromAPI]:
    api = PromAPI()
    yield api
    api.stop()


def _nats_up() -> bool:
    try:
        with socket.create_connection(("127.0.0.1", 4222), timeout=0.5) as s:
            return s.recv(4096).startswith(b"INFO")
    except OSError:
        return False


@pytest.fixture(scope="session")
def nats_url() -> str:
    pytest.importorskip("nats", reason="nats-py is not installed (the 'nats' extra)")
    if not _nats_up():
        pytest.skip("no NATS server at 127.0.0.1:4222")
    return NATS_URL


class JetStreamFixture:
    """A fresh stream and subject on the real server; ``publish`` sends ingest JSON bodies."""

    def __init__(self, url: str) -> None:
        import asyncio

        self.url = url
        tag = uuid.uuid4().hex[:10]
        self.stream = f"RT_TEST_{tag}"
        self.subject = f"regimetune.test.{tag}"
        self.loop = asyncio.new_event_loop()
        self.loop.run_until_complete(self._setup())

    async def _setup(self) -> None:
        import nats

        self.nc = await nats.connect(self.url)
        self.js = self.nc.jetstream()
        await self.js.add_stream(name=self.stream, subjects=[self.subject], duplicate_window=0.5)

    def publish(self, body: Any, *, msg_id: str | None = None, raw: bytes | None = None) -> None:
        data = raw if raw is not None else json.dumps(body).encode()
        headers = {"Nats-Msg-Id": msg_id} if msg_id else None
        self.loop.run_until_complete(self.js.publish(self.subject, data, headers=headers))

    def pending(self, durable: str) -> int:
        info = self.loop.run_until_complete(self.js.consumer_info(self.stream, durable))
        return int(info.num_pending + info.num_ack_pending)

    def close(self) -> None:
        async def down() -> None:
            try:
                await self.js.delete_stream(self.stream)
            finally:
                await self.nc.close()

        self.loop.run_until_complete(down())
        self.loop.close()


@pytest.fixture
def jetstream(nats_url: str) -> Iterator[JetStreamFixture]:
    js = JetStreamFixture(nats_url)
    yield js
    js.close()
