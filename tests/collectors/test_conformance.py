"""One conformance suite run against every registered collector (river's ``checks`` style):
each trace format over a written fixture, the Prometheus collectors against real HTTP servers
on 127.0.0.1, the NATS collector against the real JetStream server (skipped without it)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from regimetune.collectors import write_events
from regimetune.collectors.base import BaseCollector, WindowBatch
from regimetune.collectors.checks import (
    COLLECTOR_CHECKS,
    CollectorCase,
    check_counts_every_request,
    check_registered_under_its_name,
    check_yields_telemetry_in_time_order,
)
from regimetune.collectors.registry import COLLECTORS, build_collector, register_collector
from regimetune.models import ConfigError, EventBatch

N = 3000


def _events() -> EventBatch:
    rng = np.random.default_rng(7)
    return EventBatch.from_columns(
        ts=np.sort(rng.random(N) * 100.0),
        key=rng.integers(0, 500, N),
        op=(rng.random(N) < 0.3).astype(np.uint8),
        size=rng.integers(1, 4096, N),
    )


def _file_case(name: str, tmp: Path) -> CollectorCase:
    ext = {"csv": "csv.gz", "tsv": "tsv", "jsonl": "jsonl", "parquet": "parquet", "oracle": "oracle"}[name]
    good, bad = tmp / f"good.{ext}", tmp / f"bad.{ext}"
    write_events([_events()], good)
    if name == "parquet":
        write_events([EventBatch.from_columns(ts=[1.0, 0.0], key=[1, 2])], bad)  # goes back 1 s: ok
        bad.write_bytes(b"PAR1 not really")
    elif name == "oracle":
        bad.write_bytes(good.read_bytes()[:100])  # not a multiple of 24 bytes
    elif name == "jsonl":
        bad.write_text('{"ts": 1, "key": 2, "op": "get"}\n{"ts": 2, "key": "x"}\n')
    else:
        d = "\t" if name == "tsv" else ","
        bad.write_text(f"ts{d}key{d}op\n1{d}2{d}get\n2{d}3{d}frobnicate\n")
    return CollectorCase(
        name, lambda: build_collector(name, good, chunk_rows=700), N, lambda: build_collector(name, bad)
    )


def _twitter_case(tmp: Path) -> CollectorCase:
    ops = ["get", "gets", "set", "add", "replace", "cas", "append", "prepend", "incr", "decr", "delete"]
    lines = [f"{i // 10},ns:u:{i % 37:x}key,9,{i},3,{ops[i % len(ops)]},0" for i in range(1100)]
    good, bad = tmp / "tw.0", tmp / "tw.bad"
    good.write_text("\n".join(lines) + "\n")
    bad.write_text("0,a,1,1,1,get,0\n1,b,1,1,1,touch,0\n")
    kept = sum(1 for i in range(1100) if ops[i % len(ops)] != "delete")
    return CollectorCase(
        "twitter",
        lambda: build_collector("twitter", good, chunk_rows=128),
        kept,
        lambda: build_collector("twitter", bad),
    )


def _cachelib_case(tmp: Path) -> CollectorCase:
    rows = ["op_time,key,key_size,op,op_count,size,cache_hits,ttl"]
    total = 0
    for i in range(900):
        op = ("GET", "SET", "GET_LEASE", "DELETE", "SET_LEASE")[i % 5]
        count = 1 + i % 3
        total += 0 if op == "DELETE" else count
        rows.append(f"{1000 + 10 * i},{i % 50:08d}-k,12,{op},{count},{i},0,60")
    good, bad = tmp / "kv.csv", tmp / "kv_bad.csv"
    good.write_text("\n".join(rows) + "\n")
    bad.write_text(rows[0] + "\n1000,a,1,GET,0,10,0,0\n")  # op_count 0: cachebench refuses it too
    return CollectorCase(
        "cachelib",
        lambda: build_collector("cachelib", good, chunk_rows=128),
        total,
        lambda: build_collector("cachelib", bad),
    )


def _scrape_case(make_daemon: Callable[[], Any]) -> CollectorCase:
    def make() -> Any:
        d = make_daemon()
        d.requests.labels("0", "read").inc(3)
        steps = iter(range(1, 4))

        def sleep(_: float) -> None:
            i = next(steps)
            d.requests.labels(str(i % 2), "read").inc(10 * i)
            d.requests.labels("1", "write").inc(i)
            d.hot.labels(f"k{i}", "read").inc(i)
            if i == 2:
                d.restart()
                d.requests.labels("0", "read").inc(5)

        return build_collector("prometheus-scrape", d.url, interval_s=0.01, windows=3, sleep=sleep)

    def make_bad() -> Any:
        d = make_daemon()
        d.stop()
        return build_collector("prometheus-scrape", d.url, windows=1)

    # window 1: 10 reads + 1 write; window 2: restart then 5 reads; window 3: 30 reads + 3 writes
    return CollectorCase("prometheus-scrape", make, 11 + 5 + 33, make_bad)


def _range_case(api: Any) -> CollectorCase:
    for b in range(4):
        api.series["buckets"][(("bucket", str(b)), ("op", "read"))] = {
            60.0 * t: 2.0 * b for t in range(1, 31)
        }
        api.series["buckets"][(("bucket", str(b)), ("op", "write"))] = {60.0 * t: 1.0 for t in range(1, 31)}
    api.series["hot"][(("key", "7"), ("op", "read"))] = {60.0 * t: 4.0 for t in range(1, 31)}
    return CollectorCase(
        "prometheus-range",
        lambda: build_collector("prometheus-range", api.url, start=60, end=1800, step_s=60, max_points=7),
        30 * (0 + 2 + 4 + 6 + 4),
        lambda: build_collector("prometheus-range", api.url, start=0, end=1e9, step_s=1, max_points=20_000),
    )


def _nats_case(js: Any) -> CollectorCase:
    for i in range(6):
        js.publish(
            {"window_start": 10 * i, "counts": {"keys": [1, 2, 3], "reads": [i, 1, 1]}}, msg_id=f"m{i}"
        )
    js.publish({"window_start": 0, "counts": {"keys": [1], "reads": [1]}}, msg_id="m0")  # a resend

    def make() -> Any:
        durable = f"c{uuid.uuid4().hex[:8]}"  # a fresh consumer reads the stream from the start
        return build_collector(
            "nats",
            js.subject,
            url=js.url,
            stream=js.stream,
            durable=durable,
            max_idle_s=0.4,
            fetch_timeout_s=0.2,
        )

    def make_bad() -> Any:
        return build_collector("nats", "no.such.subject", url=js.url, stream="NO_SUCH_STREAM", max_idle_s=0.2)

    return CollectorCase("nats", make, sum(range(6)) + 12, make_bad)


@pytest.fixture
def case(request: pytest.FixtureRequest, tmp_path: Path) -> CollectorCase:
    name: str = request.param
    if name in ("csv", "tsv", "jsonl", "parquet", "oracle"):
        return _file_case(name, tmp_path)
    if name == "twitter":
        return _twitter_case(tmp_path)
    if name == "cachelib":
        return _cachelib_case(tmp_path)
    if name == "prometheus-scrape":
        return _scrape_case(request.getfixturevalue("make_daemon"))
    if name == "prometheus-range":
        return _range_case(request.getfixturevalue("prom_api"))
    if name == "nats":
        return _nats_case(request.getfixturevalue("jetstream"))
    if name == "redis":
        from .test_redis_collector import redis_case, started_server

        server = started_server(tmp_path)
        request.addfinalizer(server.stop)
        return redis_case(server)
    raise AssertionError(f"no conformance fixture for collector {name!r}")


def test_every_registered_collector_has_a_conformance_fixture() -> None:
    assert set(COLLECTORS) == {
        "csv", "tsv", "jsonl", "parquet", "oracle", "twitter", "cachelib",
        "prometheus-scrape", "prometheus-range", "nats", "redis",
    }  # fmt: skip


@pytest.mark.parametrize("case", sorted(COLLECTORS), indirect=True)
@pytest.mark.parametrize("check", COLLECTOR_CHECKS, ids=lambda c: c.__name__)
def test_collector_conformance(case: CollectorCase, check: Callable[[CollectorCase], None]) -> None:
    check(case)


class _Backwards(BaseCollector):
    """A broken collector: windows out of order, and one request fewer than it claims."""

    name = "backwards"

    def collect(self) -> Iterator[WindowBatch]:
        yield WindowBatch(window_start=10.0, reads_total=1)
        yield WindowBatch(window_start=0.0, reads_total=1)


def test_the_checks_catch_a_broken_collector() -> None:
    case = CollectorCase("backwards", _Backwards, requests=3)
    with pytest.raises(AssertionError, match="out of order"):
        check_yields_telemetry_in_time_order(case)
    with pytest.raises(AssertionError, match="counted 2 requests"):
        check_counts_every_request(case)
    with pytest.raises(ConfigError, match="unknown collector 'backwards'"):
        check_registered_under_its_name(case)
    with pytest.raises(ConfigError, match="already registered"):
        register_collector("csv", _Backwards)
