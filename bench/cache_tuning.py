"""Per-regime cache tuning under the explicit cost model, on realistic generated ParSplice
traces and on the real CloudPhysics trace, against the hand-set policies (Sevilla et al.:
96% of the unlimited cache's efficiency with 7.6% of its time-averaged memory).

For each trace: prepare it as the service would (:class:`regimetune.tuner.Workload`: windows,
regimes labelled by the policy in force), tune with :func:`regimetune.tuner.tune`'s default
optimizer, budget and cost model (``CostModel()``, fixed in commit 10c6e61 before any of
these runs), and compare with the baselines it simulates: the unlimited cache, a static LRU
sized to the memory budget, the paper's "100K then 10K" as written and scaled to the run's
keyspace, a 100K LRU and the K-means suggestion:
efficiency over the miss-cost sweep, hit ratio relative to unlimited, memory (time-averaged
and peak). A fitting baseline counts as beating the tuned policy at a miss cost only if it is
more efficient there with no more memory; one that buys efficiency with memory is listed
apart (``more_efficient_with_more_memory``). Then, on the first generated trace, evaluations
each optimizer needs to come within 1% of the best policy any of them found (median over
seeds; ``fewest`` is null when no method gets there in half its runs, and each method's
median best value is given), and a warm-started re-tuning of the second generated trace.
The LAST line printed is JSON.

    nice .venv/bin/python bench/cache_tuning.py            # full
    nice .venv/bin/python bench/cache_tuning.py --quick    # one generated trace, 2 seeds
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from regimetune.collectors import GeneratorConfig, TraceSpec, generate, read_trace
from regimetune.tuner import CacheConfig, CacheObjective, CostModel, Workload, tune

CLOUDPHYSICS = Path(__file__).resolve().parents[1].parent / "shared/data/cloudphysics/cloudPhysicsIO.csv"
METHODS = ("Pounders", "NGOpt", "CMA", "RandomSearch")
KEEP = (
    "efficiency", "hit_ratio", "hit_ratio_vs_unlimited", "byte_hit_ratio_vs_unlimited", "memory_fraction", "peak_fraction",
    "mean_bytes", "peak_bytes", "fits_memory", "objective",
)  # fmt: skip


def compare(
    name: str, work: Workload, budget: int, seed: int, cost: CostModel | None = None
) -> tuple[dict[str, Any], Any]:
    t = time.perf_counter()
    config = CacheConfig(budget=budget, seed=seed, cost=cost or CostModel())
    res = tune(work, "cache", config=config, workers=0)
    tune_s = time.perf_counter() - t
    rep = res.report
    best, bases, sweep = rep["best"], rep["baselines"], rep["sweep"]
    rel_eff = best["efficiency"] / bases["unlimited"]["efficiency"]
    fitting = [n for n, b in bases.items() if b["fits_memory"]]
    # a fitting baseline beats the tuned policy at a miss cost when it is more efficient there
    # with no more time-averaged memory; one that buys efficiency with memory is listed apart
    mem = best["memory_fraction"]
    ahead = [(m, n) for m in sweep for n in fitting if sweep[m][n] > sweep[m]["tuned"] + 1e-12]
    losses, trades = [], []
    for m, n in ahead:
        line = (
            f"{n} at miss cost {m}: {sweep[m][n]:.6f} > tuned {sweep[m]['tuned']:.6f} "
            f"with {bases[n]['memory_fraction'] * 100:.2f}% memory against {mem * 100:.2f}%"
        )
        (losses if bases[n]["memory_fraction"] <= mem else trades).append(line)
    row = {
        "trace": name,
        "cost_model": (cost or CostModel()).describe(),
        "requests": rep["trace"]["requests"],
        "keys": rep["trace"]["keys"],
        "regime_windows": rep["trace"]["regime_windows"],
        "store_ops_s": round(rep["store"]["capacity_ops_s"], 1),
        "tune_s": round(tune_s, 1),
        "n_evaluations": rep["n_evaluations"],
        "tuned": {
            "switch": best["switch"],
            "high_watermark_keys": best.get("high_watermark_keys"),
            "limits": best["limits"],
            **{k: best[k] for k in KEEP},
        },
        "baselines": {n: {k: b[k] for k in KEEP} for n, b in bases.items()},
        "efficiency_by_miss_cost": sweep,
        "relative_efficiency": rel_eff,
        "meets_96_7.6": bool(rel_eff >= 0.96 and best["memory_fraction"] <= 0.076),
        "target_binds": rep["binds"]["efficiency"],
        "binding_notes": rep["binds"]["notes"],
        "static_lru_same_memory": rep["binds"]["static_lru_same_memory"],
        "baselines_fitting_budget": fitting,
        "tuned_loses_to": losses,
        "more_efficient_with_more_memory": trades,
        "decision": {k: rep["decision"][k] for k in ("push", "reason")},
    }
    print(
        f"{name}: tuned rel.eff {rel_eff:.4f} mem {best['memory_fraction'] * 100:.2f}% "
        f"(peak {best['peak_fraction'] * 100:.1f}%) limits {best['limits']} | binds {row['target_binds']} "
        f"| fitting baselines {fitting} | losses {len(losses)} | {tune_s:.0f} s",
        flush=True,
    )
    for n, b in bases.items():
        print(
            f"    {n:20s} eff {b['efficiency']:.4f} hits/unl {b['hit_ratio_vs_unlimited']:.4f} "
            f"bytes/unl {b['byte_hit_ratio_vs_unlimited']:.4f} "
            f"mem {b['memory_fraction'] * 100:7.2f}% fits {bool(b['fits_memory'])}",
            flush=True,
        )
    return row, res


def evals_to_best(work: Workload, budget: int, seeds: list[int]) -> dict[str, Any]:
    """Evaluations each method needs to come within 1% of the best value any run found."""
    obj = CacheObjective()
    traces: dict[str, list[list[float]]] = {m: [] for m in METHODS}
    for m in METHODS:
        for s in seeds:
            res = tune(
                work, "cache", config=CacheConfig(budget=budget, seed=s, optimizer=m, sweep=()), workers=0
            )
            # values of the policies within the (hard) memory budget, in evaluation order
            traces[m].append(
                [
                    e.value if e.residuals is not None and e.residuals[1] == 0.0 else np.inf
                    for e in res.evaluations
                ]
            )
    best = min(min(v) for runs in traces.values() for v in runs)
    out: dict[str, Any] = {
        "best_value": best,
        "budget": budget,
        "seeds": seeds,
        "objective": obj.get_params(),
    }
    for m, runs in traces.items():
        firsts = []
        for v in runs:
            hit = [i + 1 for i, x in enumerate(v) if x <= best * 1.01]
            firsts.append(hit[0] if hit else budget + 1)
        out[m] = {
            "median_evals": statistics.median(firsts),
            "per_seed": firsts,
            "best_per_seed": [min(v) for v in runs],
        }
        out[m]["median_best"] = statistics.median(min(v) for v in runs)
    fewest = min(METHODS, key=lambda m: (out[m]["median_evals"], out[m]["median_best"]))
    # no method within 1% of the best in half its runs: the count says nothing, the values do
    out["fewest"] = fewest if out[fewest]["median_evals"] <= budget else None
    out["best_median_value"] = min(METHODS, key=lambda m: out[m]["median_best"])
    med = ", ".join(
        f"{m}: {out[m]['median_evals']} (median best {out[m]['median_best']:.5f})" for m in METHODS
    )
    print(f"evaluations to within 1% of the best ({best:.5f}): {med}", flush=True)
    return out


def cloudphysics() -> list[Any] | None:
    if not CLOUDPHYSICS.exists():
        return None
    spec = TraceSpec(
        columns="ts=time,op=op,size=size,key=lbn",
        time_unit="s",
        read_ops=frozenset({"28"}),
        write_ops=frozenset({"2a"}),
    )
    return list(read_trace(CLOUDPHYSICS, spec=spec))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=int, default=80)
    ap.add_argument("--dfo-budget", type=int, default=60)
    ap.add_argument("--seeds", type=int, default=5, help="seeds of the optimizer comparison")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    t0 = time.perf_counter()
    gens = [("parsplice seed 0", 0), ("parsplice seed 1", 1)][: 1 if args.quick else 2]
    runs, probs, results = [], {}, {}
    for name, seed in gens:
        probs[name] = Workload.from_batches(
            generate(GeneratorConfig(preset="parsplice", seed=seed)), name=name
        )
        row, results[name] = compare(name, probs[name], args.budget, 0)
        runs.append(row)
    cp = cloudphysics()
    if cp is not None and not args.quick:
        probs["cloudphysics"] = Workload.from_batches(cp, name="cloudphysics")
        row, _ = compare("cloudphysics", probs["cloudphysics"], args.budget, 0)
        runs.append(row)
    # a stressed store (no headroom, misses as costly as the compute): not the default, to
    # show what the tuner does where the target binds
    stress = CostModel(miss_cost=1.0, store_headroom=1.0)
    for name in list(probs):
        row, _ = compare(
            f"{name} [stress: miss cost 1, headroom 1]", probs[name], args.budget, 0, cost=stress
        )
        runs.append(row)
    out: dict[str, Any] = {"bench": "cache_tuning", "cost_model": CostModel().describe(), "runs": runs}
    first = gens[0][0]
    out["evals_to_within_1pct"] = evals_to_best(
        probs[first], args.dfo_budget, list(range(2 if args.quick else args.seeds))
    )
    if len(gens) > 1:  # re-tune the second trace of the same workload from the first's result
        second = gens[1][0]
        cold = results[second]
        config = CacheConfig(budget=args.budget // 4, sweep=())
        warm = tune(probs[second], "cache", config=config, workers=0, warm_start=results[first])
        out["warm_start"] = {
            "cold": {"evaluations": len(cold.evaluations), "objective": cold.report["best"]["objective"]},
            "warm": {"evaluations": len(warm.evaluations), "objective": warm.report["best"]["objective"]},
        }
        print(f"warm start: {out['warm_start']}", flush=True)
    out["elapsed_s"] = round(time.perf_counter() - t0, 1)
    print(json.dumps(out, default=str))


if __name__ == "__main__":
    main()
