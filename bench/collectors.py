"""Collector throughput: the Prometheus scrape path and the string-key CSV path, in keys/s.

**Scrape**: a prometheus-client exposition server on 127.0.0.1 exposes ``--buckets`` buckets x
2 ops of request counters, a top-``--hot`` of string hot keys (x 2 ops) and a bytes gauge per
bucket, as a storage daemon would; between scrapes every series is incremented. Timed:
``PrometheusScrapeCollector.scrape()`` (HTTP GET, ``prometheus_client.parser``) plus the rate
computation, ``--scrapes`` times; also the parse + rates alone on the same text. keys/s counts
the series (bucket counters and hot keys) turned into window figures per second.

**String keys**: a Twitter-format CSV of ``--rows`` requests on Zipf-distributed string keys
is read with ``--format twitter`` (XXH3-64 of each distinct key per chunk) and, for
comparison, the same requests with the integer keys in a plain CSV; keys/s is records read per
second (median of ``--runs``).

The last line printed is one JSON object with every figure.

    nice .venv/bin/python bench/collectors.py            # full size
    nice .venv/bin/python bench/collectors.py --quick    # a smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest, start_http_server

from regimetune.collectors import read_trace
from regimetune.collectors.prometheus import PrometheusScrapeCollector, RateTracker, parse_exposition


def _daemon(buckets: int, hot: int) -> tuple[CollectorRegistry, list[object], object, object]:
    reg = CollectorRegistry()
    req = Counter("storage_bucket_requests", "requests", ["bucket", "op"], registry=reg)
    hk = Counter("storage_hot_key_requests", "hot keys", ["key", "op"], registry=reg)
    size = Gauge("storage_bucket_bytes", "bytes", ["bucket"], registry=reg)
    children: list[object] = []
    for b in range(buckets):
        children += [req.labels(str(b), "read"), req.labels(str(b), "write")]
        size.labels(str(b)).set(1e6 * b)
    for k in range(hot):
        children += [hk.labels(f"tw:{k:08x}:{k * 7919 % 1000}", "read"), hk.labels(f"tw:{k:08x}", "write")]
    server, thread = start_http_server(0, addr="127.0.0.1", registry=reg)
    return reg, children, server, thread


def bench_scrape(buckets: int, hot: int, scrapes: int) -> dict[str, float]:
    reg, children, server, thread = _daemon(buckets, hot)
    url = f"http://127.0.0.1:{server.server_port}/metrics"  # type: ignore[attr-defined]
    series = 2 * buckets + 2 * hot
    rng = np.random.default_rng(0)
    try:
        coll = PrometheusScrapeCollector(url, top_k=hot)
        tracker = RateTracker(top_k=hot)
        walls: list[float] = []
        cpus: list[float] = []
        for _ in range(scrapes + 1):
            for c, n in zip(children, rng.integers(1, 100, len(children)).tolist(), strict=True):
                c.inc(n)  # type: ignore[attr-defined]
            w0, c0 = time.perf_counter(), time.process_time()
            window = tracker.update(coll.scrape())
            walls.append(time.perf_counter() - w0)
            cpus.append(time.process_time() - c0)
            assert window is None or window.requests > 0
        coll.close()
        text = generate_latest(reg).decode()
        t0 = time.perf_counter()
        t = RateTracker(top_k=hot)
        for i in range(scrapes):
            t.update(parse_exposition(text, at=float(i)))
        parse_wall = (time.perf_counter() - t0) / scrapes
    finally:
        server.shutdown()  # type: ignore[attr-defined]
        server.server_close()  # type: ignore[attr-defined]
        thread.join(timeout=5)  # type: ignore[attr-defined]
    wall, cpu = statistics.median(walls[1:]), statistics.median(cpus[1:])
    print(
        f"scrape  {series:,} series ({buckets} buckets x 2 ops, {hot} hot keys x 2 ops), "
        f"{len(text) / 1024:.0f} KiB: {wall * 1e3:.1f} ms per scrape+rates -> {series / wall:,.0f} keys/s wall, "
        f"{series / cpu:,.0f} keys per CPU-s; parse+rates alone {series / parse_wall:,.0f} keys/s"
    )
    return {
        "scrape_series": series,
        "scrape_ms": wall * 1e3,
        "scrape_keys_per_s": series / wall,
        "scrape_keys_per_cpu_s": series / cpu,
        "parse_keys_per_s": series / parse_wall,
        "exposition_bytes": len(text),
    }


def _write_traces(tmp: Path, rows: int) -> tuple[Path, Path, int]:
    rng = np.random.default_rng(1)
    ids = rng.zipf(1.2, rows) % 2_000_000
    ts = np.sort(rng.integers(0, 3600, rows))
    ops = np.where(rng.random(rows) < 0.85, "get", "set")
    distinct = len(np.unique(ids))
    tw, ints = tmp / "cluster.0", tmp / "ints.csv"
    chunk = 200_000
    with tw.open("w") as f, ints.open("w") as g:
        g.write("ts,key,op\n")
        for s in range(0, rows, chunk):
            sl = slice(s, s + chunk)
            f.writelines(
                f"{t},ns:u:{k:012x}q,20,100,7,{o},0\n"
                for t, k, o in zip(ts[sl], ids[sl], ops[sl], strict=True)
            )
            g.writelines(f"{t},{k},{o}\n" for t, k, o in zip(ts[sl], ids[sl], ops[sl], strict=True))
    return tw, ints, distinct


def _time_read(path: Path, fmt: str | None, runs: int) -> tuple[float, int]:
    walls = []
    n = sum(len(b) for b in read_trace(path, fmt=fmt))  # warm-up: imports, page cache
    for _ in range(runs):
        t0 = time.perf_counter()
        reader = read_trace(path, fmt=fmt)
        n = sum(len(b) for b in reader)
        walls.append(time.perf_counter() - t0)
    return statistics.median(walls), n


def bench_string_keys(rows: int, runs: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as d:
        tw, ints, distinct = _write_traces(Path(d), rows)
        s_wall, n = _time_read(tw, "twitter", runs)
        i_wall, m = _time_read(ints, None, runs)
    assert n == m == rows
    print(
        f"csv     {rows:,} requests, {distinct:,} distinct keys: string keys (twitter) "
        f"{rows / s_wall:,.0f} keys/s, integer keys {rows / i_wall:,.0f} keys/s "
        f"(string/int time x{s_wall / i_wall:.2f})"
    )
    return {
        "csv_rows": rows,
        "csv_distinct_keys": distinct,
        "csv_string_keys_per_s": rows / s_wall,
        "csv_int_keys_per_s": rows / i_wall,
        "csv_string_over_int_time": s_wall / i_wall,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--buckets", type=int, default=1024)
    ap.add_argument("--hot", type=int, default=1000)
    ap.add_argument("--scrapes", type=int, default=20)
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="a smoke run: 256 buckets, 100 hot keys, 200K rows")
    a = ap.parse_args()
    if a.quick:
        a.buckets, a.hot, a.scrapes, a.rows, a.runs = 256, 100, 5, 200_000, 1
    result: dict[str, float] = {}
    result |= bench_scrape(a.buckets, a.hot, a.scrapes)
    result |= bench_string_keys(a.rows, a.runs)
    result["load_average_1m"] = os.getloadavg()[0]
    print(json.dumps(result))


if __name__ == "__main__":
    main()
