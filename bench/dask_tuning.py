"""Benchmark of cache tuning on a Dask cluster: one tuning job on 1 vs 2 workers.

Generates a ParSplice-like run (``regimetune.collectors.generate``), windows it and labels
its regimes once (a :class:`regimetune.tuner.Workload`), then runs the same
:func:`regimetune.tuner.tune` cache job (same
seed, same budget; the timing includes scattering the trace to the workers) with its
candidate evaluations on a local Dask cluster of 1 and of 2 worker processes
(``distributed.LocalCluster``, one thread each, on 127.0.0.1), and inline as the reference.
Reports wall time, evaluations per second, the speed-up, and whether every run found the
same policy (it must: rounds of a fixed size, results told in the order asked). The
machine may be shared: compare the runs of one invocation, not across machines. Each
optimizer is run as given by ``--optimizers`` (Pounders runs only its initial design and
geometry batches in parallel; population methods run whole rounds in parallel). The LAST
line printed is JSON.

    nice .venv/bin/python bench/dask_tuning.py --duration 9000 --workers 64 --budget 48
"""

from __future__ import annotations

import argparse
import json
import os
import time

from regimetune.collectors import GeneratorConfig, generate
from regimetune.models import EventBatch
from regimetune.tuner import CacheConfig, Workload, tune


def prepare(batches: list[EventBatch], window_s: float) -> Workload:
    """The trace and the regime in force per window, once: the benchmark times the tuning
    itself (the trace's stack distances are computed here too)."""
    work = Workload.from_batches(batches, window_s=window_s)
    _ = work.cache_trace
    return work


def run(problem: Workload, *, optimizer: str, budget: int, executor: str | None) -> dict:
    t0 = time.perf_counter()
    config = CacheConfig(optimizer=optimizer, budget=budget, seed=0)
    res = tune(problem, "cache", config=config, executor=executor, workers=0)
    wall = time.perf_counter() - t0
    n = len(res.evaluations)
    return {
        "wall_s": round(wall, 3),
        "evaluations": n,
        "evaluations_per_s": round(n / wall, 2),
        "policy": res.policy_file.model_dump_json(include={"regimes", "default"}),
        "objective": res.report["best"]["objective"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=9000.0, help="seconds of generated workload")
    ap.add_argument("--workers", type=int, default=64, help="ParSplice workers of the generated run")
    ap.add_argument("--budget", type=int, default=48)
    ap.add_argument("--optimizers", default="TwoPointsDE,Pounders")
    args = ap.parse_args()

    from distributed import LocalCluster

    batches = list(generate(GeneratorConfig(duration_s=args.duration, workers=args.workers, seed=1)))
    problem = prepare(batches, 10.0)
    n_requests = sum(len(b) for b in batches)
    out: dict = {
        "requests": n_requests,
        "budget": args.budget,
        "cpus": os.cpu_count(),
        "load_avg_1m_before": round(os.getloadavg()[0], 2),
        "results": {},
    }
    for optimizer in args.optimizers.split(","):
        rows = {"inline": run(problem, optimizer=optimizer, budget=args.budget, executor=None)}
        for n_workers in (1, 2):
            with LocalCluster(
                n_workers=n_workers,
                threads_per_worker=1,
                processes=True,
                host="127.0.0.1",
                dashboard_address=None,
            ) as cluster:
                rows[f"dask_{n_workers}"] = run(
                    problem, optimizer=optimizer, budget=args.budget, executor=cluster.scheduler_address
                )
        same = len({r["policy"] for r in rows.values()}) == 1
        for name, r in rows.items():
            print(f"{optimizer:12s} {name:8s} {r['wall_s']:8.2f} s {r['evaluations_per_s']:8.2f} eval/s")
        out["results"][optimizer] = {
            **{name: {k: v for k, v in r.items() if k != "policy"} for name, r in rows.items()},
            "speedup_2_vs_1": round(rows["dask_1"]["wall_s"] / rows["dask_2"]["wall_s"], 3),
            "same_result": same,
        }
    out["load_avg_1m_after"] = round(os.getloadavg()[0], 2)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
