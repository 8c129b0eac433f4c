"""Service benchmark: ingest throughput, GET /v1/policy latency under load, RSS.

The service runs under uvicorn in its own process (SQLite WAL store in a temp dir, push
none); each client runs in a second process. Targets (the anchor): >= 1M per-key counts/s
ingested, GET /v1/policy p99 <= 5 ms at 1k requests/s, RSS < 1 GiB after 10M distinct keys.
The last line of output is JSON.

    nice .venv/bin/python bench/service.py                # full size (10M keys)
    nice .venv/bin/python bench/service.py --keys 1000000 # quick
"""

from __future__ import annotations

import argparse
import http.client
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

TOKEN = "bench-token"
WINDOW_S = 60.0
COUNTS = "application/x-regimetune-counts"


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (with its threads)."""
    import os

    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _wait_applied(port: int, timeout: float = 1800.0) -> float:
    """Seconds until the service applied every acknowledged batch."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        conn = http.client.HTTPConnection("127.0.0.1", port)
        conn.request("GET", "/v1/engine")
        st = json.loads(conn.getresponse().read())
        conn.close()
        if st["applied_seq"] == st["last_seq"]:
            return time.perf_counter() - t0
        time.sleep(0.1)
    raise SystemExit("the service did not catch up")


def _rss_bytes(pid: int) -> tuple[int, int]:
    rss = hwm = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1]) * 1024
        elif line.startswith("VmHWM:"):
            hwm = int(line.split()[1]) * 1024
    return rss, hwm


# -- clients (run in a second process) --------------------------------------------------------
def client_ingest(port: int, keys: int, batch: int, per_window: int, start_window: float, fmt: str) -> dict:
    """Send ``keys`` distinct keys in batches of ``batch`` keys, ``per_window`` keys a window."""
    from regimetune.api.replay import encode_counts

    conn = http.client.HTTPConnection("127.0.0.1", port)
    rng = np.random.default_rng(0)
    base = np.uint64(1) << np.uint64(40)
    t0 = time.perf_counter()
    lat = []
    sent = 0
    w = start_window
    in_window = 0
    while sent < keys:
        n = min(batch, keys - sent)
        k = base + np.arange(sent, sent + n, dtype=np.uint64)
        r = rng.integers(1, 20, n, dtype=np.uint32)
        wr = (r // 10).astype(np.uint32)
        t1 = time.perf_counter()
        if fmt == "binary":
            conn.request(
                "POST",
                f"/v1/ingest/counts?window_start={w!r}",
                body=encode_counts(k, r, wr),
                headers={"Content-Type": COUNTS, "Authorization": f"Bearer {TOKEN}"},
            )
        else:
            body = json.dumps(
                {
                    "window_start": w,
                    "counts": {"keys": k.tolist(), "reads": r.tolist(), "writes": wr.tolist()},
                }
            )
            conn.request(
                "POST",
                "/v1/ingest",
                body=body,
                headers={"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"},
            )
        resp = conn.getresponse()
        data = resp.read()
        if resp.status != 200:
            raise SystemExit(f"ingest failed: {resp.status} {data[:200]!r}")
        lat.append(time.perf_counter() - t1)
        sent += n
        in_window += n
        if in_window >= per_window:
            w += WINDOW_S
            in_window = 0
    dt = time.perf_counter() - t0
    return {
        "keys": sent,
        "seconds": dt,
        "keys_per_s": sent / dt,
        "batch": batch,
        "format": fmt,
        "batch_p50_ms": 1e3 * float(np.median(lat)),
        "next_window": w + WINDOW_S,
    }


def client_policy(port: int, rate: float, seconds: float) -> dict:
    """Open-loop GET /v1/policy at ``rate`` requests/s over one keep-alive connection."""
    conn = http.client.HTTPConnection("127.0.0.1", port)
    n = int(rate * seconds)
    lat = np.empty(n)
    rtt = np.empty(n)
    statuses: dict[int, int] = {}
    etag = None
    t0 = time.perf_counter()
    for i in range(n):
        due = t0 + i / rate
        now = time.perf_counter()
        if due > now:
            time.sleep(due - now)
        headers = {"If-None-Match": etag} if (etag and i % 2) else {}
        sent = time.perf_counter()
        conn.request("GET", "/v1/policy", headers=headers)
        resp = conn.getresponse()
        resp.read()
        rtt[i] = time.perf_counter() - sent
        etag = resp.getheader("ETag") or etag
        lat[i] = time.perf_counter() - due  # from the scheduled time: no coordinated omission
        statuses[resp.status] = statuses.get(resp.status, 0) + 1
    achieved = n / (time.perf_counter() - t0)
    return {
        "requests": n,
        "achieved_rps": achieved,
        "p50_ms": 1e3 * float(np.percentile(lat, 50)),
        "p99_ms": 1e3 * float(np.percentile(lat, 99)),
        "max_ms": 1e3 * float(lat.max()),
        "rtt_p50_ms": 1e3 * float(np.percentile(rtt, 50)),
        "rtt_p99_ms": 1e3 * float(np.percentile(rtt, 99)),
        "statuses": statuses,
    }


def run_client(*args: str) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--client", *args], capture_output=True, text=True, check=False
    )
    if out.returncode:
        raise SystemExit(f"client {args[0]} failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


# -- orchestration ---------------------------------------------------------------------------
def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--client", nargs="*")
    ap.add_argument("--keys", type=int, default=10_000_000)
    ap.add_argument("--batch", type=int, default=10_000)
    ap.add_argument("--per-window", type=int, default=200_000)
    ap.add_argument("--rate", type=float, default=1000.0)
    ap.add_argument("--seconds", type=float, default=10.0)
    a = ap.parse_args()
    if a.client:
        role, *rest = a.client
        if role == "ingest":
            port, keys, batch, per_window, start, fmt = rest
            res = client_ingest(int(port), int(keys), int(batch), int(per_window), float(start), fmt)
        else:
            port, rate, seconds = rest
            res = client_policy(int(port), float(rate), float(seconds))
        print(json.dumps(res))
        return

    import os

    from regimetune.api.replay import IngestClient, count_windows
    from regimetune.cli.demo import free_port, spawn, stop, wait_ready
    from regimetune.collectors import GeneratorConfig, generate

    tmp = Path(tempfile.mkdtemp(prefix="regimetune-bench-"))
    port = free_port()
    env = {
        "REGIMETUNE_STORE__URL": f"sqlite:///{tmp / 'bench.db'}",
        "REGIMETUNE_AUTH__WRITE_TOKENS": json.dumps([TOKEN]),
        "REGIMETUNE_ENGINE__WINDOW_S": str(WINDOW_S),
        "REGIMETUNE_ENGINE__DETECTOR": json.dumps({"warmup": 10}),
        "REGIMETUNE_INGEST__MAX_BODY_BYTES": str(256 << 20),
    }
    svc = spawn(["serve", "--host", "127.0.0.1", "--port", str(port)], env, tmp / "service.log")
    try:
        wait_ready(f"http://127.0.0.1:{port}/readyz", svc, tmp / "service.log")
        # 1. a generated run first, so regimes and policy versions exist
        windows = list(count_windows(generate(GeneratorConfig(duration_s=9000, workers=64, seed=1)), 60.0))
        with IngestClient(f"http://127.0.0.1:{port}", token=TOKEN) as c:
            for wc in windows:
                c.send(wc)
        _wait_applied(port)
        start = windows[-1].start + 60.0
        rss0, _ = _rss_bytes(svc.pid)
        # 2. JSON ingest (smaller), then binary ingest of the distinct keys; a new window
        # every per_window keys
        cpu = _cpu_s(svc.pid)
        js = run_client(
            "ingest",
            str(port),
            str(min(a.keys, 1_000_000)),
            str(a.batch),
            str(a.per_window),
            str(start),
            "json",
        )
        js_catch_up = _wait_applied(port)
        js_cpu = _cpu_s(svc.pid) - cpu
        cpu = _cpu_s(svc.pid)
        binary = run_client(
            "ingest",
            str(port),
            str(a.keys),
            str(a.batch),
            str(a.per_window),
            str(js["next_window"]),
            "binary",
        )
        bin_catch_up = _wait_applied(port)
        bin_cpu = _cpu_s(svc.pid) - cpu
        rss, hwm = _rss_bytes(svc.pid)
        # 3. policy latency under load (engine idle)
        cpu = _cpu_s(svc.pid)
        pol = run_client("policy", str(port), str(a.rate), str(a.seconds))
        pol_cpu = _cpu_s(svc.pid) - cpu
        load = os.getloadavg()[0]
    finally:
        stop(svc)
    db_bytes = sum(p.stat().st_size for p in tmp.glob("bench.db*"))
    result = {
        "ingest_binary_keys_per_s": round(binary["keys_per_s"]),
        "ingest_binary_ratio_to_target_1M": round(binary["keys_per_s"] / 1e6, 3),
        "ingest_binary_batch_p50_ms": round(binary["batch_p50_ms"], 2),
        "ingest_binary_applied_keys_per_s": round(binary["keys"] / (binary["seconds"] + bin_catch_up)),
        "ingest_binary_keys_per_service_cpu_s": round(binary["keys"] / bin_cpu),
        "ingest_json_keys_per_service_cpu_s": round(js["keys"] / js_cpu),
        "ingest_json_applied_keys_per_s": round(js["keys"] / (js["seconds"] + js_catch_up)),
        "ingest_json_keys_per_s": round(js["keys_per_s"]),
        "ingest_json_ratio_to_target_1M": round(js["keys_per_s"] / 1e6, 3),
        "batch_keys": a.batch,
        "distinct_keys_ingested": binary["keys"] + js["keys"],
        "policy_rate_target_rps": a.rate,
        "policy_achieved_rps": round(pol["achieved_rps"], 1),
        "policy_p50_ms": round(pol["p50_ms"], 3),
        "policy_p99_ms": round(pol["p99_ms"], 3),
        "policy_p99_ratio_to_target_5ms": round(pol["p99_ms"] / 5.0, 3),
        "policy_round_trip_p50_ms": round(pol["rtt_p50_ms"], 3),
        "policy_round_trip_p99_ms": round(pol["rtt_p99_ms"], 3),
        "policy_service_cpu_ms_per_request": round(1e3 * pol_cpu / pol["requests"], 3),
        "policy_statuses": pol["statuses"],
        "rss_before_bytes": rss0,
        "rss_after_bytes": rss,
        "rss_peak_bytes": hwm,
        "rss_ratio_to_target_1GiB": round(rss / 2**30, 3),
        "store_bytes": db_bytes,
        "cpus": os.cpu_count(),
        "load_average_1m": round(load, 2),
    }
    for k, v in result.items():
        print(f"{k:36s} {v}", file=sys.stderr)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
