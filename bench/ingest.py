"""Ingest benchmark: read + window throughput per trace format, and peak memory at 10M keys.

Generates one ParSplice-like trace of at least ``--events`` events (default 10M) into a temp
directory as CSV, Parquet and oracleGeneral, then times ``window_frame(read_trace(path))``
``--runs`` times per format and reports the medians: events per wall-clock second and events
per CPU second (all threads of the process; on a shared machine the CPU figure is the stable
one). A child process windows ``--distinct`` distinct keys and reports its peak RSS.

Targets: >= 5M events/s for Parquet and oracleGeneral, >= 1M events/s for CSV, peak RSS < 1 GiB.
The last line printed is one JSON object with every figure.

    nice .venv/bin/python bench/ingest.py            # full size
    nice .venv/bin/python bench/ingest.py --quick    # a smoke run (1M events, 1 run)
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from regimetune.collectors import GeneratorConfig, generate, read_trace, window_frame, write_events
from regimetune.models import EventBatch

TARGETS = {"csv": 1e6, "parquet": 5e6, "oracle": 5e6}
FILES = {"csv": "trace.csv", "parquet": "trace.parquet", "oracle": "trace.oracleGeneral.bin"}
RSS_TARGET_MIB = 1024.0


def _config(events: int) -> GeneratorConfig:
    """A full 2.5 h run with enough workers for ``events`` events (about 34K events per worker)."""
    workers = max(1, math.ceil(events / 34_000))
    return GeneratorConfig(workers=workers, seed=1, preset="classic")


def _child_rss(distinct: int, batch: int) -> None:
    """Window ``distinct`` distinct keys (1 s windows of ``batch`` events); print the result."""
    from regimetune.collectors import WindowAggregator

    agg = WindowAggregator(1.0)
    n_windows = 0
    for i in range(0, distinct, batch):
        m = min(batch, distinct - i)
        keys = (np.arange(i, i + m, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(8)
        ts = i / batch + np.arange(m) / m
        cols = agg.push_columns(EventBatch.from_columns(ts=ts, key=keys))
        n_windows += 0 if cols is None else len(cols["index"])
    cols = agg.flush_columns()
    n_windows += 0 if cols is None else len(cols["index"])
    lo, hi = agg.keyspace_bounds(2)
    status = Path("/proc/self/status").read_text().splitlines()
    hwm = next(int(line.split()[1]) for line in status if line.startswith("VmHWM"))
    print(
        json.dumps(
            {
                "estimate": agg.keyspace_size,
                "lo": lo,
                "hi": hi,
                "windows": n_windows,
                "exact": agg.exact,
                "hwm_kib": hwm,
            }
        )
    )


def _measure_rss(distinct: int) -> dict[str, float]:
    t0 = time.perf_counter()
    out = subprocess.run(
        [sys.executable, __file__, "--rss-child", str(distinct)], check=True, capture_output=True, text=True
    )
    wall = time.perf_counter() - t0
    child = json.loads(out.stdout.strip().splitlines()[-1])
    # The child's own high-water mark (VmHWM) is the figure: ru_maxrss of RUSAGE_CHILDREN also
    # counts the parent's pages that the fork copied before exec, so it is only an upper bound.
    rusage_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0
    return {
        "distinct_keys": distinct,
        "peak_rss_mib": child["hwm_kib"] / 1024.0,
        "ru_maxrss_children_mib": rusage_mib,
        "keyspace_estimate": child["estimate"],
        "estimate_rel_error": abs(child["estimate"] - distinct) / distinct,
        "within_2sd_bounds": bool(child["lo"] <= distinct <= child["hi"]),
        "seconds": wall,
    }


def _time_format(path: Path, runs: int) -> tuple[list[float], list[float], int]:
    walls, cpus = [], []
    n = 0
    for _ in range(runs):
        w0, c0 = time.perf_counter(), time.process_time()
        frame = window_frame(read_trace(path))
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
        n = int(frame["reads"].sum() + frame["writes"].sum())
    return walls, cpus, n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--distinct", type=int, default=10_000_000)
    ap.add_argument("--quick", action="store_true", help="1M events, 1 run, 1M distinct keys")
    ap.add_argument("--rss-child", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rss_child:
        _child_rss(args.rss_child, 1 << 20)
        return
    if args.quick:
        args.events, args.runs, args.distinct = 1_000_000, 1, 1_000_000

    result: dict[str, object] = {"events_target": args.events, "runs": args.runs}
    # memory first, while this process is still small (its pages are copied into the fork)
    rss = _measure_rss(args.distinct)
    print(
        f"windowing {args.distinct:,} distinct keys: peak RSS {rss['peak_rss_mib']:.0f} MiB "
        f"(x{rss['peak_rss_mib'] / RSS_TARGET_MIB:.2f} of the 1 GiB limit; ru_maxrss "
        f"{rss['ru_maxrss_children_mib']:.0f} MiB), keyspace estimate {rss['keyspace_estimate']:,} "
        f"(error {rss['estimate_rel_error']:.2%}, within 2 sd: {rss['within_2sd_bounds']}), "
        f"{rss['seconds']:.1f} s"
    )
    result.update({f"rss_{k}": v for k, v in rss.items()})
    result["rss_ratio_to_target"] = rss["peak_rss_mib"] / RSS_TARGET_MIB

    # warm the compiled kernels so that the first timed run does not pay for compilation
    window_frame(generate(GeneratorConfig(duration_s=30, workers=2, preset="classic")))
    with tempfile.TemporaryDirectory(prefix="regimetune-bench-") as tmp:
        cfg = _config(args.events)
        t0 = time.perf_counter()
        batches = list(generate(cfg))
        n_events = sum(len(b) for b in batches)
        gen_s = time.perf_counter() - t0
        print(f"generated {n_events:,} events ({cfg.workers} workers, {cfg.duration_s:g} s) in {gen_s:.1f} s")
        result["events"] = n_events
        result["generate_events_per_s"] = n_events / gen_s
        for name in FILES.values():
            p = Path(tmp) / name
            t0 = time.perf_counter()
            write_events(batches, p)
            print(f"wrote {name}: {p.stat().st_size / 2**20:.0f} MiB in {time.perf_counter() - t0:.1f} s")
        del batches

        for fmt, name in FILES.items():
            walls, cpus, n = _time_format(Path(tmp) / name, args.runs)
            assert n == n_events, (fmt, n, n_events)
            wall_rate = n / statistics.median(walls)
            cpu_rate = n / statistics.median(cpus)
            target = TARGETS[fmt]
            print(
                f"{fmt:8s} read+window: {wall_rate / 1e6:6.2f} M events/s wall "
                f"(x{wall_rate / target:.2f} of the {target / 1e6:g}M target), "
                f"{cpu_rate / 1e6:6.2f} M events per CPU-s (x{cpu_rate / target:.2f}); "
                f"runs {', '.join(f'{w:.2f}' for w in walls)} s"
            )
            result[f"{fmt}_events_per_s"] = wall_rate
            result[f"{fmt}_events_per_cpu_s"] = cpu_rate
            result[f"{fmt}_ratio_to_target"] = wall_rate / target
            result[f"{fmt}_cpu_ratio_to_target"] = cpu_rate / target
            result[f"{fmt}_runs_s"] = walls

    result["load_average_1m"] = __import__("os").getloadavg()[0]
    print(json.dumps(result))


if __name__ == "__main__":
    main()
