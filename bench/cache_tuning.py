"""Per-regime cache tuning on generated ParSplice-like traces versus the paper's hand-set
policies (Sevilla et al.: 96% efficiency with 7.6% of the unlimited cache's memory).

For each growth rate: generate the trace (collectors' generator at its defaults otherwise),
detect regimes, tune with the default optimizer and budget, and compare with unlimited, a
100K-key LRU, "switch at 100K then 10K" and the K-means suggestion. The LAST line printed is
JSON.

    nice .venv/bin/python bench/cache_tuning.py --growth 1 --growth 2
"""

from __future__ import annotations

import argparse
import json
import time

from regimetune.collectors import GeneratorConfig, generate
from regimetune.tuner.sessions import tune_cache_batches

KEEP = ("efficiency", "memory_fraction", "mean_bytes", "peak_bytes", "hit_ratio", "objective", "feasible")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--growth", type=float, action="append", help="growth rate(s); default 1 and 2")
    ap.add_argument("--budget", type=int, default=80)
    ap.add_argument("--optimizer", default="Pounders")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    out = []
    for growth in args.growth or [1.0, 2.0]:
        t = time.perf_counter()
        batches = list(generate(GeneratorConfig(growth=growth, seed=args.seed)))
        gen_s = time.perf_counter() - t
        t = time.perf_counter()
        res = tune_cache_batches(
            batches, optimizer=args.optimizer, budget=args.budget, workers=args.workers, seed=args.seed
        )
        tune_s = time.perf_counter() - t
        rep = res.report
        best = rep["best"]
        hand = rep["baselines"]["two_phase_100k_10k"]
        row = {
            "growth": growth,
            "requests": rep["trace"]["requests"],
            "keys": rep["trace"]["keys"],
            "regime_windows": rep["trace"]["regime_windows"],
            "generate_s": round(gen_s, 1),
            "tune_s": round(tune_s, 1),
            "n_evaluations": rep["n_evaluations"],
            "optimizer": rep["optimizer"],
            "tuned": {
                "switch": best["switch"],
                "high_watermark_keys": best.get("high_watermark_keys"),
                "limits": best["limits"],
                **{k: best[k] for k in KEEP},
            },
            "baselines": {n: {k: b[k] for k in KEEP} for n, b in rep["baselines"].items()},
            "meets_96_7.6": bool(best["efficiency"] >= 0.96 and best["memory_fraction"] <= 0.076),
            "beats_hand_set": bool(best["objective"] < hand["objective"]),
        }
        out.append(row)
        print(
            f"growth {growth}: tuned eff {best['efficiency']:.4f} mem {best['memory_fraction'] * 100:.2f}% "
            f"| 100K->10K eff {hand['efficiency']:.4f} mem {hand['memory_fraction'] * 100:.2f}% "
            f"| limits {best['limits']} switch {best['switch']} {best.get('high_watermark_keys')} "
            f"| {tune_s:.0f} s",
            flush=True,
        )
    print(json.dumps({"bench": "cache_tuning", "runs": out}))


if __name__ == "__main__":
    main()
