"""Service benchmark: ingest throughput, GET /v1/policy latency under load, RSS.

The service runs under uvicorn in its own process (SQLite WAL store in a temp dir, push
none); each client runs in a second process. Targets (the anchor): >= 1M per-key counts/s
ingested, GET /v1/policy p99 <= 5 ms at 1k requests/s with ingest running, RSS < 1 GiB after
10M distinct keys. The last line of output is JSON.

GET /v1/policy is measured open loop: request i is due at ``t0 + i / rate`` whatever happened
to the ones before it, and its latency counts from that time (no coordinated omission), over
``--connections`` keep-alive connections (pollers). The load generator is wrk with the Lua
script below when ``wrk`` is on PATH (``apt-get install wrk``), else a Python one (raw
sockets, one thread); ``policy_generator`` says which. A probe process that sleeps 1 ms at a
time runs beside it: its late wake-ups (``sched_wakeup_p99_ms``) are what the shared machine
adds to any process, the floor under the service's latency.

    nice .venv/bin/python bench/service.py                # full size (10M keys)
    nice .venv/bin/python bench/service.py --keys 1000000 # quick

Two more scenarios, each on a fresh service:

* ``--scenario crowd``: ``--crowd`` JSON ingest clients (one process each, batches of
  ``--crowd-batch`` keys, each sent once the last was acknowledged, the window moving every
  ``--crowd-window-s`` seconds of wall time) and two daemons polling ``GET /v1/policy``
  (open loop, ``--crowd-poll-rate`` requests/s in all) for ``--seconds``, with ``--busy``
  CPU-bound processes beside them (someone else's work on a shared machine). Reports the
  policy read's p99 as the client sees it (target <= 50 ms), ingest's p50/p99, every status,
  and the event loop's CPU time per request (the service's main thread).
* ``--scenario durability``: the cost of ``store.sqlite_synchronous``: for OFF, NORMAL and
  FULL, one client sending JSON batches of ``--crowd-batch`` keys (each commit is one
  fsync under FULL) and one sending binary batches of ``--batch`` keys, for ``--seconds``
  each; figures and ratios to NORMAL.

    nice .venv/bin/python bench/service.py --scenario crowd --seconds 60
    nice .venv/bin/python bench/service.py --scenario crowd --seconds 60 --busy 6
    nice .venv/bin/python bench/service.py --scenario durability --seconds 10
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

TOKEN = "bench-token"
WINDOW_S = 60.0
COUNTS = "application/x-regimetune-counts"
POLICY_TARGET_MS = 5.0
CROWD_POLICY_TARGET_MS = 50.0


def _cpu_s(pid: int, thread: int | None = None) -> float:
    """User + system CPU seconds of process ``pid`` (with its threads), or of its thread
    ``thread`` (the main thread's id is the process's)."""
    stat = Path(f"/proc/{pid}/stat" if thread is None else f"/proc/{pid}/task/{thread}/stat")
    fields = stat.read_text().rsplit(")", 1)[1].split()
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


# -- clients (each runs in a second process) -------------------------------------------------
def client_ingest(
    port: int,
    keys: int,
    batch: int,
    per_window: int,
    start_window: float,
    fmt: str,
    first_key: int = 0,
    rate: float = 0.0,
    stop_file: str = "",
) -> dict:
    """Send ``keys`` distinct keys (from ``first_key`` on) in batches of ``batch`` keys,
    ``per_window`` keys a window, each once the last was acknowledged, or paced at ``rate``
    keys/s; stop early once ``stop_file`` exists."""
    from regimetune.client.ingest import encode_counts

    conn = http.client.HTTPConnection("127.0.0.1", port)
    rng = np.random.default_rng(0)
    base = np.uint64(1) << np.uint64(40)
    t0 = time.perf_counter()
    lat = []
    sent = 0
    w = start_window
    in_window = 0
    stop = Path(stop_file) if stop_file else None
    while sent < keys and not (stop is not None and stop.exists()):
        if rate > 0 and (pause := t0 + sent / rate - time.perf_counter()) > 0:
            time.sleep(pause)
        n = min(batch, keys - sent)
        k = base + np.arange(first_key + sent, first_key + sent + n, dtype=np.uint64)
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


WRK_SCRIPT = r"""
-- Open-loop GET /v1/policy for wrk, one connection per thread: request i of thread k is due
-- at t0 + (i * nthreads + k) / rate. Its latency counts from the due time when it leaves late
-- (a backlog on the connection, or the client itself late: no coordinated omission), from
-- the send when wrk's whole-millisecond timer fired early.
local ffi = require("ffi")
ffi.cdef[[
typedef struct { long tv_sec; long tv_nsec; } rt_timespec;
int clock_gettime(int clk_id, rt_timespec *tp);
]]
local ts = ffi.new("rt_timespec")
local function now()
  ffi.C.clock_gettime(1, ts)  -- CLOCK_MONOTONIC: the same clock in every thread
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end

local threads = {}
function setup(thread)
  if #threads == 0 then start_at = now() + 0.3 end
  thread:set("tid", #threads)
  thread:set("t0", start_at)
  table.insert(threads, thread)
end

local i, due, sent = -1, 0, 0
local etag = nil
lat, rtt, lag, codes = {}, {}, {}, {}

function init(args)
  rate = tonumber(args[1])
  nthreads = tonumber(args[2])
  path = args[3]
end

function delay()  -- called once before each request of the thread's connection
  i = i + 1
  due = t0 + (i * nthreads + tid) / rate
  local d = (due - now()) * 1000
  if d < 0 then return 0 end
  return math.floor(d)
end

function request()
  sent = now()
  local h = {}
  if etag ~= nil and i % 2 == 1 then h["If-None-Match"] = etag end
  return wrk.format("GET", path, h)
end

function response(status, headers, body)
  local t = now()
  lat[#lat + 1] = t - math.min(due, sent)
  rtt[#rtt + 1] = t - sent
  lag[#lag + 1] = math.max(0, sent - due)
  codes[status] = (codes[status] or 0) + 1
  etag = headers["etag"] or headers["ETag"] or etag
end

function done(summary, latency, requests)
  local f = io.open(os.getenv("RT_WRK_OUT"), "w")
  for _, t in ipairs(threads) do
    local l, r, g, c = t:get("lat"), t:get("rtt"), t:get("lag"), t:get("codes")
    for j = 1, #l do f:write(string.format("%.9f %.9f %.9f\n", l[j], r[j], g[j])) end
    for code, cnt in pairs(c) do f:write(string.format("status %d %d\n", code, cnt)) end
  end
  local e = summary.errors
  f:write(string.format("errors %d %d %d %d %d\n", e.connect, e.read, e.write, e.status, e.timeout))
  f:close()
end
"""


def _latency(lat: np.ndarray, rtt: np.ndarray, lag: np.ndarray, seconds: float, statuses: dict) -> dict:
    ms = {
        f"{name}_{q}_ms": 1e3 * float(np.percentile(a, int(q[1:])))
        for name, a in (("lat", lat), ("rtt", rtt), ("lag", lag))
        for q in ("p50", "p99")
    }
    return ms | {
        "requests": len(lat),
        "achieved_rps": len(lat) / seconds,
        "lat_max_ms": 1e3 * float(lat.max()),
        "statuses": statuses,
    }


def client_policy_wrk(port: int, rate: float, seconds: float, connections: int) -> dict:
    """Open-loop GET /v1/policy with wrk (C, LuaJIT) and :data:`WRK_SCRIPT`, one connection
    per wrk thread."""
    run_s = max(1, round(seconds))
    with tempfile.TemporaryDirectory(prefix="regimetune-wrk-") as d:
        script, out = Path(d) / "policy.lua", Path(d) / "out.txt"
        script.write_text(WRK_SCRIPT)
        cmd = ["wrk", "-t", str(connections), "-c", str(connections), "-d", f"{run_s}s"]
        cmd += ["--timeout", "10s", "-s", str(script), f"http://127.0.0.1:{port}"]
        cmd += ["--", str(rate), str(connections), "/v1/policy"]
        res = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "RT_WRK_OUT": str(out)})
        if res.returncode or not out.exists():
            raise SystemExit(f"wrk failed ({res.returncode}): {res.stderr[-2000:]}{res.stdout[-2000:]}")
        rows, statuses, errors = [], {}, []
        for line in out.read_text().splitlines():
            if line.startswith("status "):
                _, code, cnt = line.split()
                statuses[int(code)] = statuses.get(int(code), 0) + int(cnt)
            elif line.startswith("errors "):
                errors = [int(x) for x in line.split()[1:]]
            else:
                rows.append([float(x) for x in line.split()])
    a = np.asarray(rows)
    if not len(a) or any(errors):
        raise SystemExit(f"wrk: {len(a)} responses, errors (connect, read, write, status, timeout) {errors}")
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    # the first request is due 0.3 s after wrk started; wrk stops after run_s
    return _latency(a[:, 0], a[:, 1], a[:, 2], run_s - 0.3, statuses) | {
        "generator": "wrk",
        "client_cpu_s": cpu.ru_utime + cpu.ru_stime,
    }


def client_policy_python(port: int, rate: float, seconds: float, connections: int) -> dict:
    """Open-loop GET /v1/policy in Python: one thread, raw keep-alive sockets (http.client's
    own cost per request kept a serial client below 1k requests/s on this machine), select()
    for its microsecond timeout. A due request leaves on the first idle connection."""
    import select
    import socket
    from collections import deque

    n = int(rate * seconds)
    socks = []
    for _ in range(connections):
        s = socket.create_connection(("127.0.0.1", port))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.setblocking(False)
        socks.append(s)
    conn_of = {s.fileno(): j for j, s in enumerate(socks)}
    plain = b"GET /v1/policy HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    etag = b""
    lat, rtt, lag = np.empty(n), np.empty(n), np.empty(n)
    statuses: dict[int, int] = {}
    idle = deque(range(connections))
    busy: dict[int, tuple[int, float]] = {}  # fd -> (request, sent at)
    bufs = [b""] * connections
    due_q: deque[int] = deque()
    done = nxt = 0
    t0 = time.perf_counter() + 0.05
    while done < n:
        now = time.perf_counter()
        while nxt < n and t0 + nxt / rate <= now:
            due_q.append(nxt)
            nxt += 1
        while due_q and idle:
            i, j = due_q.popleft(), idle.popleft()
            req = plain
            if etag and i % 2:
                req = b"GET /v1/policy HTTP/1.1\r\nHost: 127.0.0.1\r\nIf-None-Match: " + etag + b"\r\n\r\n"
            busy[socks[j].fileno()] = (i, time.perf_counter())
            socks[j].sendall(req)
        timeout = max(0.0, t0 + nxt / rate - time.perf_counter()) if nxt < n else 1.0
        ready, _, _ = select.select(list(busy), [], [], timeout)
        for fd in ready:
            j = conn_of[fd]
            chunk = socks[j].recv(65536)
            if not chunk:
                raise SystemExit("the service closed a connection")
            buf = bufs[j] = bufs[j] + chunk
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                continue
            head = buf[:end].split(b"\r\n")
            length = 0
            for line in head[1:]:
                name, _, value = line.partition(b":")
                name = name.strip().lower()
                if name == b"content-length":
                    length = int(value)
                elif name == b"etag":
                    etag = value.strip()
                elif name == b"transfer-encoding":
                    raise SystemExit("a chunked answer: not expected from GET /v1/policy")
            if len(buf) < end + 4 + length:
                continue
            bufs[j] = buf[end + 4 + length :]
            t = time.perf_counter()
            i, sent = busy.pop(fd)
            due = t0 + i / rate
            lat[i], rtt[i], lag[i] = t - min(due, sent), t - sent, max(0.0, sent - due)
            status = int(head[0].split()[1])
            statuses[status] = statuses.get(status, 0) + 1
            idle.append(j)
            done += 1
    elapsed = time.perf_counter() - t0
    for s in socks:
        s.close()
    return _latency(lat, rtt, lag, elapsed, statuses) | {
        "generator": "python",
        "client_cpu_s": time.process_time(),
    }


def client_probe(seconds: float) -> dict:
    """How late a process that sleeps 1 ms at a time wakes up: the scheduling delay the
    machine adds to any process (on a shared 2-core machine, the noise floor)."""
    late = []
    end = time.perf_counter() + seconds
    while (t := time.perf_counter()) < end:
        time.sleep(0.001)
        late.append(time.perf_counter() - t - 0.001)
    a = 1e3 * np.asarray(late)
    return {"wakeup_p50_ms": float(np.percentile(a, 50)), "wakeup_p99_ms": float(np.percentile(a, 99))}


def client_crowd(
    port: int,
    first_key: int,
    batch: int,
    epoch: float,
    base: float,
    window_s: float,
    seconds: float,
    fmt: str,
) -> dict:
    """One daemon of the crowd: batches of ``batch`` new keys (``fmt`` json or binary), each
    sent once the last was answered, to the window of the wall clock (a new one every
    ``window_s`` s from ``epoch``, numbered from ``base``), for ``seconds``. Every answer's
    status is counted (a 503 is resent, as a daemon does, after its Retry-After)."""
    from regimetune.client.ingest import encode_counts

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    rng = np.random.default_rng(first_key)
    keybase = np.uint64(1) << np.uint64(40)
    lat: list[float] = []
    statuses: dict[int, int] = {}
    sent = 0
    end = time.time() + seconds
    auth = {"Authorization": f"Bearer {TOKEN}"}
    while time.time() < end:
        w = base + WINDOW_S * int((time.time() - epoch) // window_s)
        k = keybase + np.arange(first_key + sent, first_key + sent + batch, dtype=np.uint64)
        r = rng.integers(1, 20, batch, dtype=np.uint32)
        wr = (r // 10).astype(np.uint32)
        if fmt == "binary":
            path, body = f"/v1/ingest/counts?window_start={w!r}", encode_counts(k, r, wr)
            headers = auth | {"Content-Type": COUNTS}
        else:
            counts = {"keys": k.tolist(), "reads": r.tolist(), "writes": wr.tolist()}
            path, body = "/v1/ingest", json.dumps({"window_start": w, "counts": counts}).encode()
            headers = auth | {"Content-Type": "application/json"}
        t1 = time.perf_counter()
        conn.request("POST", path, body=body, headers=headers)
        resp = conn.getresponse()
        resp.read()
        lat.append(time.perf_counter() - t1)
        statuses[resp.status] = statuses.get(resp.status, 0) + 1
        if resp.status == 200:
            sent += batch
        elif resp.status == 503:
            time.sleep(float(resp.getheader("Retry-After") or 1))
    a = 1e3 * np.asarray(lat)
    return {
        "batches": len(lat),
        "keys": sent,
        "statuses": statuses,
        "lat_ms": a.round(3).tolist(),
    }


def client_busy(seconds: float) -> dict:
    """Someone else's work on the machine: a CPU-bound loop for ``seconds``."""
    end = time.perf_counter() + seconds
    loops = 0
    while time.perf_counter() < end:
        loops += 1
    return {"loops": loops}


CLIENTS: dict[str, Callable[..., dict]] = {
    "ingest": client_ingest,
    "crowd": client_crowd,
    "busy": client_busy,
    "wrk": client_policy_wrk,
    "python": client_policy_python,
    "probe": client_probe,
}


def _start(role: str, **kw: Any) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, __file__, "--client", role, json.dumps(kw)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _result(proc: subprocess.Popen[str], role: str) -> dict:
    out, err = proc.communicate()
    if proc.returncode:
        raise SystemExit(f"client {role} failed: {err[-2000:]}")
    return json.loads(out.strip().splitlines()[-1])


def run_client(role: str, **kw: Any) -> dict:
    return _result(_start(role, **kw), role)


def run_policy(
    port: int, pid: int, a: argparse.Namespace, generator: str, ingest: dict | None, tmp: Path
) -> dict:
    """The policy client with the probe beside it; with ``ingest``, while an ingest client
    sends (it starts a second earlier, so the apply thread is busy, and stops after)."""
    ing = None
    stop_file = tmp / "stop-ingest"
    stop_file.unlink(missing_ok=True)
    if ingest is not None:
        ing = _start("ingest", port=port, stop_file=str(stop_file), **ingest)
        time.sleep(1.0)
        if ing.poll() is not None:
            _result(ing, "ingest")
            raise SystemExit("the ingest client ended before the policy client started")
    try:
        cpu = _cpu_s(pid)
        probe = _start("probe", seconds=a.seconds)
        pol = run_client(generator, port=port, rate=a.rate, seconds=a.seconds, connections=a.connections)
        res = pol | _result(probe, "probe") | {"service_cpu_s": _cpu_s(pid) - cpu}
    finally:
        stop_file.touch()
    if ing is not None:
        res["ingest"] = _result(ing, "ingest")
    return res


# -- orchestration ---------------------------------------------------------------------------
def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--client", nargs=2, metavar=("ROLE", "JSON"), help=argparse.SUPPRESS)
    ap.add_argument("--keys", type=int, default=10_000_000)
    ap.add_argument("--batch", type=int, default=10_000)
    ap.add_argument("--per-window", type=int, default=200_000)
    ap.add_argument("--rate", type=float, default=1000.0, help="GET /v1/policy requests/s")
    ap.add_argument("--seconds", type=float, default=10.0, help="length of each policy run")
    ap.add_argument("--connections", type=int, default=8, help="keep-alive connections (pollers)")
    ap.add_argument(
        "--generator",
        choices=("auto", "wrk", "python"),
        default="auto",
        help="load generator of GET /v1/policy; auto: wrk when on PATH, else python",
    )
    ap.add_argument("--scenario", choices=("single", "crowd", "durability"), default="single")
    ap.add_argument(
        "--sqlite-synchronous",
        choices=("OFF", "NORMAL", "FULL"),
        default=None,
        help="store.sqlite_synchronous of the single and crowd scenarios (default: the service's)",
    )
    ap.add_argument("--crowd", type=int, default=20, help="JSON ingest clients of the crowd scenario")
    ap.add_argument("--crowd-batch", type=int, default=200, help="keys per batch of a crowd client")
    ap.add_argument("--crowd-window-s", type=float, default=2.0, help="wall seconds between windows")
    ap.add_argument("--crowd-poll-rate", type=float, default=40.0, help="GET /v1/policy requests/s")
    ap.add_argument(
        "--busy", type=int, default=0, help="CPU-bound processes beside the crowd scenario (a shared machine)"
    )
    ap.add_argument(
        "--ingest-rate",
        type=float,
        default=0.0,
        help="keys/s of the ingest beside the policy run (0: as fast as acknowledged)",
    )
    a = ap.parse_args()
    if a.client:
        role, kw = a.client
        print(json.dumps(CLIENTS[role](**json.loads(kw))))
        return

    generator = a.generator
    if generator == "auto":
        generator = "wrk" if shutil.which("wrk") else "python"
    elif generator == "wrk" and not shutil.which("wrk"):
        raise SystemExit("wrk is not on PATH (apt-get install wrk); or use --generator python")
    if a.scenario == "crowd":
        result = run_crowd(a)
    elif a.scenario == "durability":
        result = run_durability(a)
    else:
        result = run_single(a, generator)
    for k, v in result.items():
        print(f"{k:40s} {v}", file=sys.stderr)
    print(json.dumps(result))


def _service(tmp: Path, sync: str | None = None) -> tuple[subprocess.Popen[bytes], int]:
    """A service on a fresh SQLite store in ``tmp`` (``sync``: its synchronous setting, else
    the default), ready."""
    from regimetune.cli.demo import free_port, spawn, wait_ready

    port = free_port()
    env = {
        "REGIMETUNE_STORE__URL": f"sqlite:///{tmp / 'bench.db'}",
        "REGIMETUNE_AUTH__WRITE_TOKENS": json.dumps([TOKEN]),
        "REGIMETUNE_ENGINE__WINDOW_S": str(WINDOW_S),
        "REGIMETUNE_ENGINE__DETECTOR": json.dumps({}),  # the detector's defaults
        "REGIMETUNE_INGEST__MAX_BODY_BYTES": str(256 << 20),
    }
    if sync is not None:
        env["REGIMETUNE_STORE__SQLITE_SYNCHRONOUS"] = sync
    svc = spawn(["serve", "--host", "127.0.0.1", "--port", str(port)], env, tmp / "service.log")
    try:
        wait_ready(f"http://127.0.0.1:{port}/readyz", svc, tmp / "service.log")
    except BaseException:
        svc.kill()
        raise
    return svc, port


def _crowd(
    port: int, n: int, fmt: str, batch: int, window_s: float, seconds: float, base: float = 0.0
) -> list[subprocess.Popen[str]]:
    """``n`` crowd clients (:func:`client_crowd`), started now, on disjoint keys, sending
    windows from ``base`` on."""
    epoch = time.time()
    return [
        _start(
            "crowd",
            port=port,
            first_key=i << 32,
            batch=batch,
            epoch=epoch,
            base=base,
            window_s=window_s,
            seconds=seconds,
            fmt=fmt,
        )
        for i in range(n)
    ]


def _crowd_figures(results: list[dict], seconds: float) -> dict:
    lat = np.concatenate([np.asarray(r["lat_ms"]) for r in results])
    statuses: dict[str, int] = {}
    for r in results:
        for code, cnt in r["statuses"].items():
            statuses[code] = statuses.get(code, 0) + cnt
    return {
        "batches_per_s": round(sum(r["batches"] for r in results) / seconds, 1),
        "keys_per_s": round(sum(r["keys"] for r in results) / seconds),
        "p50_ms": round(float(np.percentile(lat, 50)), 2),
        "p99_ms": round(float(np.percentile(lat, 99)), 2),
        "statuses": statuses,
        "answers_5xx": sum(c for code, c in statuses.items() if int(code) >= 500),
    }


def run_crowd(a: argparse.Namespace) -> dict:
    """Many JSON daemons ingesting while two daemons poll the policy."""
    from regimetune.cli.demo import stop

    tmp = Path(tempfile.mkdtemp(prefix="regimetune-bench-"))
    svc, port = _service(tmp, a.sqlite_synchronous)
    try:
        base = _prime(port)
        busy = [_start("busy", seconds=a.seconds + 1) for _ in range(a.busy)]
        cpu, loop_cpu = _cpu_s(svc.pid), _cpu_s(svc.pid, svc.pid)
        crowd = _crowd(port, a.crowd, "json", a.crowd_batch, a.crowd_window_s, a.seconds, base)
        time.sleep(1.0)  # the crowd is sending
        probe = _start("probe", seconds=a.seconds - 2)
        pol = run_client("python", port=port, rate=a.crowd_poll_rate, seconds=a.seconds - 2, connections=2)
        probe_res = _result(probe, "probe")
        crowd_res = [_result(p, "crowd") for p in crowd]
        ingest = _crowd_figures(crowd_res, a.seconds)
        service_cpu, loop_cpu = _cpu_s(svc.pid) - cpu, _cpu_s(svc.pid, svc.pid) - loop_cpu
        load = os.getloadavg()[0]
        for p in busy:
            _result(p, "busy")
    finally:
        stop(svc)
        shutil.rmtree(tmp, ignore_errors=True)
    return {
        "scenario": "crowd",
        "crowd_clients": a.crowd,
        "crowd_batch_keys": a.crowd_batch,
        "seconds": a.seconds,
        "policy_requests": pol["requests"],
        "policy_rate_target_rps": a.crowd_poll_rate,
        "policy_p50_ms": round(pol["lat_p50_ms"], 3),
        "policy_p99_ms": round(pol["lat_p99_ms"], 3),
        "policy_max_ms": round(pol["lat_max_ms"], 3),
        "policy_p99_ratio_to_target_50ms": round(pol["lat_p99_ms"] / CROWD_POLICY_TARGET_MS, 3),
        "policy_statuses": pol["statuses"],
        "ingest_batches_per_s": ingest["batches_per_s"],
        "ingest_keys_per_s": ingest["keys_per_s"],
        "ingest_p50_ms": ingest["p50_ms"],
        "ingest_p99_ms": ingest["p99_ms"],
        "ingest_statuses": ingest["statuses"],
        "answers_5xx": ingest["answers_5xx"]
        + sum(c for code, c in pol["statuses"].items() if int(code) >= 500),
        "sched_wakeup_p99_ms": round(probe_res["wakeup_p99_ms"], 3),
        "service_cpu_s": round(service_cpu, 2),
        "service_loop_cpu_ms_per_request": round(
            1e3 * loop_cpu / (sum(r["batches"] for r in crowd_res) + pol["requests"]), 3
        ),
        "busy_processes": a.busy,
        "cpus": os.cpu_count(),
        "load_average_1m": round(load, 2),
    }


def _prime(port: int) -> float:
    """A generated run (regimes, a policy version to poll); returns the next window's start."""
    from regimetune.client.ingest import IngestClient, count_windows
    from regimetune.collectors import GeneratorConfig, generate

    windows = list(
        count_windows(generate(GeneratorConfig(duration_s=9000, workers=64, seed=1, preset="classic")), 60.0)
    )
    with IngestClient(f"http://127.0.0.1:{port}", token=TOKEN) as c:
        for wc in windows:
            c.send(wc)
    _wait_applied(port)
    return windows[-1].start + 60.0


def run_durability(a: argparse.Namespace) -> dict:
    """What each ``store.sqlite_synchronous`` setting costs ingest (one JSON client with
    small batches, one binary client with large ones), with ratios to NORMAL."""
    from regimetune.cli.demo import stop

    out: dict[str, Any] = {"scenario": "durability", "seconds_each": a.seconds}
    for sync in ("OFF", "NORMAL", "FULL"):
        tmp = Path(tempfile.mkdtemp(prefix="regimetune-bench-"))
        svc, port = _service(tmp, sync)
        try:
            for phase, (fmt, batch) in enumerate((("json", a.crowd_batch), ("binary", a.batch))):
                base = phase * 1e6  # the second client's windows after the first's
                (proc,) = _crowd(port, 1, fmt, batch, a.crowd_window_s, a.seconds, base)
                res = _crowd_figures([_result(proc, "crowd")], a.seconds)
                name = f"{sync.lower()}_{fmt}_{batch}"
                out[f"{name}_batches_per_s"] = res["batches_per_s"]
                out[f"{name}_keys_per_s"] = res["keys_per_s"]
                out[f"{name}_p50_ms"] = res["p50_ms"]
                out[f"{name}_p99_ms"] = res["p99_ms"]
        finally:
            stop(svc)
            shutil.rmtree(tmp, ignore_errors=True)
    for fmt, batch in (("json", a.crowd_batch), ("binary", a.batch)):
        for sync in ("off", "full"):
            name = f"{fmt}_{batch}"
            out[f"{sync}_{name}_keys_per_s_ratio_to_normal"] = round(
                out[f"{sync}_{name}_keys_per_s"] / out[f"normal_{name}_keys_per_s"], 3
            )
    out["cpus"] = os.cpu_count()
    out["load_average_1m"] = round(os.getloadavg()[0], 2)
    return out


def run_single(a: argparse.Namespace, generator: str) -> dict:
    """One binary stream, then policy reads idle and under it (the original scenario)."""
    from regimetune.cli.demo import stop

    tmp = Path(tempfile.mkdtemp(prefix="regimetune-bench-"))
    svc, port = _service(tmp, a.sqlite_synchronous)
    ingest = {"batch": a.batch, "per_window": a.per_window}
    try:
        # 1. a generated run first, so regimes and policy versions exist
        next_window = _prime(port)
        rss0, _ = _rss_bytes(svc.pid)
        # 2. JSON ingest (smaller), then binary ingest of the distinct keys; a new window
        # every per_window keys
        n_json = min(a.keys, 1_000_000)
        cpu = _cpu_s(svc.pid)
        js = run_client("ingest", port=port, keys=n_json, start_window=next_window, fmt="json", **ingest)
        js_catch_up = _wait_applied(port)
        js_cpu = _cpu_s(svc.pid) - cpu
        cpu = _cpu_s(svc.pid)
        binary = run_client(
            "ingest",
            port=port,
            keys=a.keys,
            start_window=js["next_window"],
            fmt="binary",
            first_key=n_json,
            **ingest,
        )
        bin_catch_up = _wait_applied(port)
        bin_cpu = _cpu_s(svc.pid) - cpu
        rss, hwm = _rss_bytes(svc.pid)
        # 3. policy latency, engine idle
        idle = run_policy(port, svc.pid, a, generator, None, tmp)
        # 4. the acceptance case: policy latency while binary ingest of new keys runs
        busy = run_policy(
            port,
            svc.pid,
            a,
            generator,
            {
                "keys": 1 << 40,
                "start_window": binary["next_window"],
                "fmt": "binary",
                "first_key": n_json + a.keys,
                "rate": a.ingest_rate,
                **ingest,
            },
            tmp,
        )
        busy_catch_up = _wait_applied(port)
        load = os.getloadavg()[0]
    finally:
        stop(svc)
    db_bytes = sum(p.stat().st_size for p in tmp.glob("bench.db*"))
    shutil.rmtree(tmp, ignore_errors=True)
    during = busy["ingest"]
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
        "policy_generator": generator,
        "policy_connections": a.connections,
        "policy_rate_target_rps": a.rate,
        # GET /v1/policy while binary ingest runs: the acceptance case
        "policy_achieved_rps": round(busy["achieved_rps"], 1),
        "policy_p50_ms": round(busy["lat_p50_ms"], 3),
        "policy_p99_ms": round(busy["lat_p99_ms"], 3),
        "policy_max_ms": round(busy["lat_max_ms"], 3),
        "policy_p99_ratio_to_target_5ms": round(busy["lat_p99_ms"] / POLICY_TARGET_MS, 3),
        "policy_round_trip_p50_ms": round(busy["rtt_p50_ms"], 3),
        "policy_round_trip_p99_ms": round(busy["rtt_p99_ms"], 3),
        "policy_client_send_lag_p99_ms": round(busy["lag_p99_ms"], 3),
        "policy_statuses": busy["statuses"],
        "policy_sched_wakeup_p99_ms": round(busy["wakeup_p99_ms"], 3),
        "policy_ingest_rate_target_keys_per_s": a.ingest_rate or None,
        "policy_ingest_keys_per_s": round(during["keys_per_s"]),
        "policy_ingest_batch_p50_ms": round(during["batch_p50_ms"], 2),
        "policy_ingest_catch_up_s": round(busy_catch_up, 2),
        # the same with the engine idle
        "policy_idle_achieved_rps": round(idle["achieved_rps"], 1),
        "policy_idle_p50_ms": round(idle["lat_p50_ms"], 3),
        "policy_idle_p99_ms": round(idle["lat_p99_ms"], 3),
        "policy_idle_p99_ratio_to_target_5ms": round(idle["lat_p99_ms"] / POLICY_TARGET_MS, 3),
        "policy_idle_round_trip_p99_ms": round(idle["rtt_p99_ms"], 3),
        "policy_idle_client_send_lag_p99_ms": round(idle["lag_p99_ms"], 3),
        "policy_idle_sched_wakeup_p99_ms": round(idle["wakeup_p99_ms"], 3),
        "policy_idle_service_cpu_ms_per_request": round(1e3 * idle["service_cpu_s"] / idle["requests"], 3),
        "rss_before_bytes": rss0,
        "rss_after_bytes": rss,
        "rss_peak_bytes": hwm,
        "rss_ratio_to_target_1GiB": round(rss / 2**30, 3),
        "store_bytes": db_bytes,
        "cpus": os.cpu_count(),
        "load_average_1m": round(load, 2),
    }
    return result


if __name__ == "__main__":
    main()
