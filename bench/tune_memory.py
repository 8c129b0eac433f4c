"""Peak memory of ``regimetune tune`` per request, on generated traces of growing length.

For each length (default 1M, 10M and 100M requests) a ParSplice-like trace is generated once
(``regimetune generate``, workers scaled so the 9000-s run holds about that many requests;
kept in ``--data-dir``) and ``regimetune tune TRACE --json`` runs as a child process. Printed
per length: the requests tuned, wall time, the child's peak RSS (the high-water mark of the
largest process of the run, from ``wait4``), the peak summed PSS of the run's process tree
(sampled every 0.2 s: the pool's workers included, shared pages counted once), and bytes per
request: the peak RSS over the requests, and the growth of the peak per extra request from a
small base run (``--base`` requests) and from the previous length, which is what the trace's
length costs. The fixed part (about 350 MB of imported libraries and compiled kernels, and the
trace reader's buffers for its first chunks of 1M requests) is paid by any run. The anchor is
24 bytes a request; ``ratio`` is the growth per request from the previous length over it
(<= 1 meets it).

    nice .venv/bin/python bench/tune_memory.py                       # 1M, 10M, 100M
    nice .venv/bin/python bench/tune_memory.py --sizes 1e6,1e7 --src /path/to/other/src

``--src`` runs another source tree's ``regimetune`` (e.g. to measure an older version in the
same way). The LAST line printed is JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

TARGET_BYTES_PER_REQUEST = 24.0
REQUESTS_PER_WORKER = 12_600
"""Requests per simulated ParSplice worker in a default (9000-s) generated run."""


def _cli(src: str | None) -> tuple[list[str], dict[str, str]]:
    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = src
    return [sys.executable, "-m", "regimetune.cli.main"], env


def trace_of(n: int, data_dir: Path, fmt: str, src: str | None) -> Path:
    path = data_dir / f"gen-{n}.{fmt}"
    if not path.exists():
        cmd, env = _cli(src)
        workers = max(1, round(n / REQUESTS_PER_WORKER))
        tmp = path.with_name(f"partial-{path.name}")
        subprocess.run(
            [*cmd, "generate", str(tmp), "--seed", "1", "--workers", str(workers)], env=env, check=True
        )
        tmp.rename(path)
    return path


def _tree(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except OSError:
            continue
    return out


def _pss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("Pss:"))
    except (OSError, StopIteration):
        return 0


def run_tune(trace: Path, args: argparse.Namespace) -> dict[str, float]:
    """One ``tune --json`` child: wall time, peak RSS (its ``wait4`` rusage, which covers the
    workers it reaped), peak PSS of its process tree (sampled)."""
    cmd, env = _cli(args.src)
    argv = [*cmd, "tune", str(trace), "--json", "--workers", str(args.workers), "--budget", str(args.budget)]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=err)
        peak_pss = 0
        done = threading.Event()

        def sample() -> None:
            nonlocal peak_pss
            while not done.wait(0.2):
                peak_pss = max(peak_pss, sum(_pss_kb(p) for p in _tree(proc.pid)))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        done.set()
        sampler.join()
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            raise SystemExit(f"tune failed on {trace}: {err.read().decode()[-2000:]}")
        report = json.loads(out.read().decode().strip().splitlines()[-1])
    return {
        "requests": float(report["trace"]["requests"]),
        "wall_s": wall,
        "peak_rss_mb": usage.ru_maxrss / 1024,
        "tree_pss_mb": peak_pss / 1024,
    }


def measured(trace: Path, args: argparse.Namespace) -> dict[str, float]:
    """Medians of ``--repeat`` runs."""
    runs = [run_tune(trace, args) for _ in range(args.repeat)]
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def _growth(small: dict[str, float], big: dict[str, float]) -> float:
    """Bytes of peak RSS per request added from the ``small`` run to the ``big`` one."""
    return (big["peak_rss_mb"] - small["peak_rss_mb"]) * 2**20 / max(big["requests"] - small["requests"], 1.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1e6,1e7,1e8", help="Trace lengths in requests, comma-separated.")
    ap.add_argument("--base", type=float, default=1e5, help="Requests of the base run (fixed costs).")
    ap.add_argument("--data-dir", type=Path, default=Path("/tmp/regimetune-bench"))
    ap.add_argument("--format", default="csv", choices=("csv", "parquet"))
    ap.add_argument("--workers", type=int, default=2, help="tune's --workers.")
    ap.add_argument("--budget", type=int, default=80, help="tune's --budget.")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--src", default=None, help="Source tree to run (PYTHONPATH of the children).")
    args = ap.parse_args()
    args.data_dir.mkdir(parents=True, exist_ok=True)
    sizes = sorted(int(float(s)) for s in args.sizes.split(","))
    base = measured(trace_of(int(args.base), args.data_dir, args.format, args.src), args)
    print(
        f"base: {base['requests']:,.0f} requests, peak RSS {base['peak_rss_mb']:.0f} MB, {base['wall_s']:.1f} s"
    )
    rows = []
    prev = base
    for n in sizes:
        r = measured(trace_of(n, args.data_dir, args.format, args.src), args)
        r["bytes_per_request"] = r["peak_rss_mb"] * 2**20 / r["requests"]
        r["growth_from_base"] = _growth(base, r)
        r["growth_from_previous"] = _growth(prev, r)
        r["ratio"] = r["growth_from_previous"] / TARGET_BYTES_PER_REQUEST
        rows.append(r)
        prev = r
        print(
            f"{r['requests']:>13,.0f} requests: {r['wall_s']:7.1f} s, peak RSS {r['peak_rss_mb']:7.0f} MB "
            f"({r['bytes_per_request']:6.1f} B/request), tree PSS {r['tree_pss_mb']:7.0f} MB; growth "
            f"{r['growth_from_base']:6.1f} B/request from the base, {r['growth_from_previous']:6.1f} from the "
            f"previous length = {r['ratio']:.2f} x the {TARGET_BYTES_PER_REQUEST:g} B target",
            flush=True,
        )
    print(
        json.dumps(
            {
                "target_bytes_per_request": TARGET_BYTES_PER_REQUEST,
                "format": args.format,
                "workers": args.workers,
                "budget": args.budget,
                "base": base,
                "runs": rows,
            }
        )
    )


if __name__ == "__main__":
    main()
