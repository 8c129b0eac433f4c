"""Benchmark of the cache simulator on a Zipf trace.

Measures the stack-distance pass (``stack_distances`` on the raw keys, requests/s against
the 5M req/s target; numba compilation or cache loading is done first and reported apart),
the same pass on hashed (huge) keys, the time of one candidate policy evaluation once the
trace is prepared, and libcachesim's LRU (its C path, reading an oracleGeneral file) on the
same trace for one capacity. Medians of ``--repeat`` (at least 3) runs, in wall time and in
CPU time of this process (the machine may be shared). The LAST line printed is JSON.

    nice .venv/bin/python bench/cache_sim.py --requests 10000000 --repeat 3
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

from regimetune.models import CachePolicy
from regimetune.tuner.cache import CacheTrace, CapacitySchedule, RegimePolicy, simulate
from regimetune.tuner.cache.stack import stack_distances, warm_up

TARGET_REQ_PER_S = 5_000_000


def zipf_trace(n: int, *, alpha: float, n_keys: int, duration_s: float, seed: int = 0):
    rng = np.random.default_rng(seed)
    keys = (rng.zipf(alpha, n) % n_keys).astype(np.uint64) + 1
    ts = np.linspace(0.0, duration_s, n)
    return ts, keys


CPU: dict[str, float] = {}


def timed(fn, repeat: int, name: str | None = None) -> tuple[float, list[float]]:
    """Median wall time of ``repeat`` runs (and, under ``name``, the median CPU time of this
    process: the machine may be shared, so wall time alone can mislead)."""
    runs, cpu = [], []
    for _ in range(max(3, repeat)):
        t, c = time.perf_counter(), time.process_time()
        fn()
        runs.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    if name:
        CPU[name] = statistics.median(cpu)
    return statistics.median(runs), runs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=10_000_000)
    ap.add_argument("--keys", type=int, default=2_000_000)
    ap.add_argument("--alpha", type=float, default=1.1)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--capacity", type=int, default=100_000)
    args = ap.parse_args()

    t = time.perf_counter()
    warm_up()  # compiles the kernels, or loads them from numba's cache: not timed below
    compile_s = time.perf_counter() - t

    ts, keys = zipf_trace(args.requests, alpha=args.alpha, n_keys=args.keys, duration_s=9000.0)
    hashed = keys * np.uint64(0x9E3779B97F4A7C15)  # same trace, keys too large for a direct table

    stack_s, stack_runs = timed(lambda: stack_distances(keys), args.repeat, "stack")
    hashed_s, _ = timed(lambda: stack_distances(hashed), args.repeat, "stack_hashed")
    rate, rate_cpu = args.requests / stack_s, args.requests / CPU["stack"]
    t = time.perf_counter()
    trace = CacheTrace.from_arrays(ts=ts, keys=keys, window_s=1.0)
    prepare_s = time.perf_counter() - t
    print(
        f"stack pass: {rate / 1e6:.2f} M req/s wall (median of {[round(r, 3) for r in stack_runs]} s), "
        f"{rate_cpu / 1e6:.2f} M req/CPU-s; {rate / TARGET_REQ_PER_S:.2f}x the 5M target "
        f"({rate_cpu / TARGET_REQ_PER_S:.2f}x per CPU-s)"
    )
    print(
        f"stack pass, hashed keys: {args.requests / hashed_s / 1e6:.2f} M req/s wall, "
        f"{args.requests / CPU['stack_hashed'] / 1e6:.2f} M req/CPU-s"
    )
    print(f"prepare (stack pass + windows + sort): {prepare_s:.2f} s; compile/load {compile_s:.2f} s")

    # candidate policies, as a tuner would ask for them
    labels = np.arange(trace.n_windows) // 600 % 4
    regime = RegimePolicy(
        policies={
            0: CachePolicy(mode="lru", limit_keys=200_000),
            1: CachePolicy(mode="lru", limit_keys=20_000),
            2: CachePolicy(mode="lru", limit_keys=50_000),
        },
        window_starts_s=trace.window_starts_s,
        labels=labels,
        default=CachePolicy(mode="lru", limit_keys=5_000),
    )
    candidates = {
        "lru": CachePolicy(mode="lru", limit_keys=args.capacity),
        "two_phase": CachePolicy(mode="two_phase", high_watermark_keys=300_000, limit_keys=10_000),
        "regime_keyed_regrowth": regime,
    }
    evals = {}
    for name, pol in candidates.items():
        simulate(trace, pol)
        evals[name], _ = timed(lambda pol=pol: simulate(trace, pol), max(5, args.repeat), f"eval_{name}")
        print(f"evaluate {name}: {evals[name] * 1e3:.2f} ms")
    sched = regime.schedule(ts=trace.ts, first_ref=trace.first_ref)
    assert isinstance(sched, CapacitySchedule) and sched.grows

    lcs_s = None
    lcs_agree = None
    try:
        import libcachesim as lcs
    except ImportError:
        print("libcachesim not importable: no anchor")
    else:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "zipf.oracleGeneral.bin"
            rec = np.zeros(
                len(keys), dtype=np.dtype([("t", "<u4"), ("id", "<u8"), ("sz", "<u4"), ("nx", "<i8")])
            )
            rec["t"], rec["id"], rec["sz"], rec["nx"] = ts.astype(np.uint32), keys, 1, -1
            rec.tofile(path)
            del rec
            out: dict[str, float] = {}

            def run_lcs() -> None:
                reader = lcs.TraceReader(
                    str(path), lcs.TraceType.ORACLE_GENERAL_TRACE, lcs.ReaderInitParam(ignore_obj_size=True)
                )
                out["ratio"], _ = lcs.LRU(args.capacity).process_trace(reader)

            lcs_s, lcs_runs = timed(run_lcs, args.repeat, "libcachesim")
            ours = simulate(trace, candidates["lru"]).misses
            lcs_agree = ours == round(out["ratio"] * len(keys))
            print(
                f"libcachesim LRU({args.capacity}): {lcs_s:.2f} s (runs {lcs_runs}); same misses: {lcs_agree}"
            )

    worst_eval = max(evals.values())
    result = {
        "bench": "cache_sim",
        "requests": args.requests,
        "distinct_keys": trace.n_keys,
        "windows": trace.n_windows,
        "numba_compile_s": round(compile_s, 3),
        "stack_pass_s": round(stack_s, 3),
        "stack_pass_runs_s": [round(r, 3) for r in stack_runs],
        "stack_pass_req_per_s": round(rate),
        "stack_pass_req_per_cpu_s": round(rate_cpu),
        "stack_pass_target_ratio": round(rate / TARGET_REQ_PER_S, 2),
        "stack_pass_target_ratio_cpu": round(rate_cpu / TARGET_REQ_PER_S, 2),
        "stack_pass_hashed_req_per_s": round(args.requests / hashed_s),
        "stack_pass_hashed_req_per_cpu_s": round(args.requests / CPU["stack_hashed"]),
        "prepare_s": round(prepare_s, 3),
        "eval_ms": {k: round(v * 1e3, 3) for k, v in evals.items()},
        "libcachesim_lru_s": None if lcs_s is None else round(lcs_s, 3),
        "libcachesim_same_misses": lcs_agree,
        "speedup_vs_libcachesim_worst_eval": None if lcs_s is None else round(lcs_s / worst_eval, 1),
        "cpu_s": {k: round(v, 4) for k, v in CPU.items()},
        "speedup_vs_libcachesim_worst_eval_cpu": None
        if lcs_s is None
        else round(CPU["libcachesim"] / max(CPU[f"eval_{n}"] for n in evals), 1),
        "load_average": list(os.getloadavg()),
        "repeats": max(3, args.repeat),
        "targets": {"stack_pass_req_per_s": TARGET_REQ_PER_S, "speedup_vs_libcachesim": 20},
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
