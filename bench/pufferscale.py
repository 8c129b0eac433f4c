"""Reproduce the Pufferscale paper's large-scale protocol (CCGRID 2020, Section VII-B).

8,192 buckets (load and size Normal with 40% std; load sums to 1, size to 4,096 GB); 25 random
rescalings (128..2,048 servers) as warm-up with the strategy under test; then, ``--reps``
times, 9 rescalings (the 9th to the scenario's start size) and the recorded one. Scenarios:
commission 128 -> 2,048, 256 -> 320; decommission 2,048 -> 128, 320 -> 256. Strategies LT,
DT, LDT, planned by the paper's Algorithms 1-2 (``--heuristic release``: the planner's default);
planner times are CPU time of the planning thread (one core, whatever else runs).
Also times ``plan_rescale`` (with its pydantic models) on the 128 -> 2,048 commission, and
tunes the weights (``--skip-tuning`` to skip) on volatile commissions, volatile
decommissions and stable decommissions: ``--tune-seeds`` tuning runs each, on
``--train-campaigns`` training campaigns with as many held-out ones for the gate; the chosen
weights and every preset are then scored on ``--test-campaigns`` campaigns no run saw, and
the verdict is the median over the tuning runs against the best preset there, with the
paired standard error of each run's difference (same test campaigns for all weights). Each
seed is then re-tuned with a quarter of the budget, warm-started from the previous seed's
result, and compared with its cold run on the same test campaigns (training values would
compare two selections on their own noise).

How many campaigns: on volatile decommissions a decommission's duration sits at its lower
bound (the leaving servers' data; T/LB = 1.00 under LDT), and the drift reshuffles data
balance between operations, so the weights move the objective by about 1 %, while one
campaign's paired difference between two weight settings has a standard deviation of about
4 % of the value (measured on campaigns 7e8.., which no figure here uses). 16 held-out
campaigns (se ~1 %) made the gate a coin flip; 64 (se ~0.5 %) resolve it, and 64 training
campaigns keep the search from chasing one draw's noise. 128 test campaigns (se ~0.35 %). Each run's chosen weights are also scored on one kind of operation
only (the best preset plans the other kind), to show where a gain comes from.

    nice .venv/bin/python bench/pufferscale.py --reps 20

The last line is JSON.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from regimetune.models import PRESETS, Bucket, PufferscaleWeights, RescaleOperation
from regimetune.tuner import RescaleConfig, TuningResult, Validation, tune
from regimetune.tuner.rescale import CampaignSpec, plan_rescale, run_scenario, simulate_campaign
from regimetune.tuner.rescale.tuning import paired_se

PAPER_MS = 612.0
SCENARIOS = {
    "commission_128_to_2048": (128, 2048),
    "commission_256_to_320": (256, 320),
    "decommission_2048_to_128": (2048, 128),
    "decommission_320_to_256": (320, 256),
}
# The paper's Figure 3 panels; its "LDT's range of durations 32-70% shorter than LT's" is read
# off panels (a) and (d) (Section VII-B), so the band is checked on those two scenarios.
PAPER_PANELS = {
    "commission_128_to_2048": "3a",
    "decommission_2048_to_128": "3b",
    "commission_256_to_320": "3c",
    "decommission_320_to_256": "3d",
}
RANGE_BAND = (0.32, 0.70)
STRATEGIES = ("LT", "DT", "LDT")


def _full_api_ms(heuristic: str, repeats: int = 5) -> tuple[float, float]:
    rng = np.random.default_rng(0)
    n = 8192
    load = np.abs(rng.normal(1, 0.4, n))
    size = np.abs(rng.normal(1, 0.4, n)) * 4096e9 / n
    buckets = [Bucket(id=j, load=float(load[j]), size=float(size[j])) for j in range(n)]
    placement = {j: int(rng.integers(0, 128)) for j in range(n)}
    op = RescaleOperation(kind="commission", count=1920)
    wall, cpu = [], []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.thread_time()
        plan_rescale(buckets, placement, list(range(128)), op, PRESETS["LDT"], heuristic=heuristic)  # type: ignore[arg-type]
        wall.append(time.perf_counter() - t0)
        cpu.append(time.thread_time() - c0)
    return float(np.median(wall) * 1e3), float(np.median(cpu) * 1e3)


def _scenarios(reps: int, seed: int, heuristic: str) -> dict[str, dict[str, dict[str, float]]]:
    out: dict[str, dict[str, dict[str, float]]] = {}
    for name, (a, b) in SCENARIOS.items():
        out[name] = {}
        for strat in STRATEGIES:
            t0 = time.perf_counter()
            r = run_scenario(PRESETS[strat], start=a, end=b, reps=reps, seed=seed, heuristic=heuristic)  # type: ignore[arg-type]
            out[name][strat] = {
                "planner_ms_median": float(np.median(r.planner_seconds) * 1e3),
                "l_ratio": float(np.median(r.l_ratio)),
                "d_ratio": float(np.median(r.d_ratio)),
                "t_ratio": float(np.median(r.t_ratio)),
                "t_over_lower_bound": float(np.median(r.t_max / r.t_lower_bound)),
                "t_median_s": float(np.median(r.t_max)),
                "t_range_s": float(np.ptp(r.t_max)),
                "moved": float(np.median(r.moved)),
            }
            s = out[name][strat]
            print(
                f"{name:26s} {strat:4s} L/Lt={s['l_ratio']:.3f} D/Dt={s['d_ratio']:.3f} T/Tt={s['t_ratio']:.3f} "
                f"T/LB={s['t_over_lower_bound']:.3f} T={s['t_median_s']:.2f}s range={s['t_range_s']:.2f}s "
                f"planner CPU={s['planner_ms_median']:.1f}ms ({time.perf_counter() - t0:.0f}s)",
                flush=True,
            )
    return out


TUNING_CAMPAIGNS = {
    # the paper's VIII-C cases: volatile loads and sizes, mostly growing or mostly shrinking
    "volatile_commissions": dict(p_commission=0.85, volatility=0.3, size_volatility=0.3),
    "volatile_decommissions": dict(p_commission=0.15, volatility=0.3, size_volatility=0.3),
    "stable_decommissions": dict(p_commission=0.25),
}
TEST_SEED0 = 10**8
"""Campaigns that score the result: far from every tuning run's training and held-out seeds
(``campaign_seeds``: below 10,000 per tuning seed)."""


_SCORED: dict[tuple[object, ...], np.ndarray] = {}


def _values(
    w: PufferscaleWeights, spec: CampaignSpec, seeds: range, dec: PufferscaleWeights | None = None
) -> np.ndarray:
    """The campaign value of ``w`` (``dec`` for the decommissions, if given) on each of
    ``seeds`` (lower is better), computed once."""
    key = (spec, seeds, w, dec)  # the spec (by identity) stays alive
    if key not in _SCORED:
        _SCORED[key] = np.array(
            [simulate_campaign(w, spec, seed=s, decommission_weights=dec).value for s in seeds]
        )
    return _SCORED[key]


def _gain(values: np.ndarray, base: np.ndarray) -> tuple[float, float]:
    """Relative gain of ``values`` over ``base`` on the same campaigns, and its paired
    standard error (both as shares of ``base``'s mean)."""
    return float(1 - values.mean() / base.mean()), paired_se(values, base)


def _tune_one(
    spec: CampaignSpec, seed: int, budget: int, n_train: int, test: dict[str, np.ndarray], seeds: range
) -> tuple[dict[str, object], TuningResult]:
    """One cold tuning run; its chosen weights and candidate scored on the test campaigns
    (``test``: every preset's values there)."""
    t0 = time.perf_counter()
    # as many held-out campaigns as training ones: half of all held out
    res = tune(
        spec,
        "rescale",
        config=RescaleConfig(budget=budget, seed=seed, n_seeds=n_train),
        validation=Validation(holdout=0.5),
        workers=0,
    )
    rep = res.detail[0]
    w = rep.weights
    cand = _values(rep.candidate, spec, seeds)
    chosen = _values(w, spec, seeds)
    best = min(test, key=lambda k: float(test[k].mean()))
    gain, se = _gain(chosen, test[best])
    # which kind of operation the gain comes from: the chosen weights on one kind only,
    # the best preset on the other
    com_only = _values(w, spec, seeds, dec=PRESETS[best])
    dec_only = _values(PRESETS[best], spec, seeds, dec=w)
    return {
        "seed": seed,
        "weights": [w.w_load, w.w_data, w.w_time],
        "candidate": [rep.candidate.w_load, rep.candidate.w_data, rep.candidate.w_time],
        "adopted": rep.adopted,
        "reason": rep.reason,
        "incumbent": rep.incumbent,
        "train_candidate": rep.candidate_value,
        "train_best_preset": min(rep.preset_values.values()),
        "validation_candidate": rep.candidate_held_out_value,
        "validation_incumbent": rep.held_out_preset_values[rep.incumbent],
        "validation_se": rep.held_out_se,
        "test_candidate": float(cand.mean()),
        "test_chosen": float(chosen.mean()),
        "test_gain": gain,
        "test_gain_se": se,
        "test_candidate_gain": _gain(cand, test[best])[0],
        "test_gain_commissions_only": _gain(com_only, test[best])[0],
        "test_gain_decommissions_only": _gain(dec_only, test[best])[0],
        "evaluations": rep.n_evaluations,
        "seconds": time.perf_counter() - t0,
    }, res


def _warm(
    spec: CampaignSpec, results: list[TuningResult], budget: int, n_train: int, seeds: range
) -> dict[str, object]:
    """Re-tune each seed's campaigns from the previous seed's result (the same workload, new
    campaigns) with a quarter of the budget. The warm run's objective over the cold run's,
    both scored on the same test campaigns (1.0: as good; above: worse): of the weights each
    run chose (after its gate) and of its candidate; and of the candidates on the run's own
    training campaigns (selection on those campaigns' noise favours the longer search). For
    scale, the previous seed's cold weights over this seed's: how far two cold runs differ."""
    chosen, cands, train, previous, cold_n, warm_n = [], [], [], [], [], []
    for seed in range(1, len(results)):
        warm = tune(
            spec,
            "rescale",
            config=RescaleConfig(budget=max(budget // 4, 1), seed=seed, n_seeds=n_train),
            validation=Validation(holdout=0.5),
            warm_start=results[seed - 1],
            workers=0,
        )
        w, c = warm.detail[0], results[seed].detail[0]
        chosen.append(_values(w.weights, spec, seeds).mean() / _values(c.weights, spec, seeds).mean())
        cands.append(_values(w.candidate, spec, seeds).mean() / _values(c.candidate, spec, seeds).mean())
        train.append(w.candidate_value / c.candidate_value)
        before = results[seed - 1].detail[0].weights
        previous.append(_values(before, spec, seeds).mean() / _values(c.weights, spec, seeds).mean())
        cold_n.append(c.n_evaluations)
        warm_n.append(w.n_evaluations)

    def summary(ratios: list[float]) -> dict[str, object]:
        return {
            "ratio_to_cold": [float(r) for r in ratios],
            "median_ratio_to_cold": float(np.median(ratios)) if ratios else None,
            "within_1pct": int(sum(r <= 1.01 for r in ratios)),
        }

    return {
        "test_chosen": summary(chosen),
        "test_candidate": summary(cands),
        "train_candidate": summary(train),
        "previous_cold": summary(previous),
        "runs": len(chosen),
        "evaluations_cold": cold_n,
        "evaluations_warm": warm_n,
    }


def _tuning(
    budget: int, n_seeds: int, n_train: int, n_test: int, heuristic: str
) -> dict[str, dict[str, object]]:
    """Tune each campaign with ``n_seeds`` tuning seeds; score the chosen weights and every
    preset on ``n_test`` campaigns that no tuning run saw; the verdict is on the median."""
    kw = dict(n_buckets=1024, min_servers=16, max_servers=256, warmup=10, operations=20, heuristic=heuristic)
    seeds = range(TEST_SEED0, TEST_SEED0 + n_test)
    out: dict[str, dict[str, object]] = {}
    for name, extra in TUNING_CAMPAIGNS.items():
        spec = CampaignSpec(**kw, **extra)  # type: ignore[arg-type]
        test = {k: _values(p, spec, seeds) for k, p in PRESETS.items()}
        presets = {k: float(v.mean()) for k, v in test.items()}
        best_name = min(presets, key=presets.__getitem__)
        print(f"\ntuning {name} (test: {n_test} campaigns; best preset {best_name} {presets[best_name]:.4f})")
        print(
            f"{'seed':>4} {'W_L':>6} {'W_D':>6} {'W_T':>6} {'train':>7} {'preset':>7} {'valid':>7} "
            f"{'incumb':>7} {'adopt':>5} {'test':>7} {'cand':>7} {'gain':>7} {'se':>5}"
        )
        runs, results = [], []
        for seed in range(n_seeds):
            r, res = _tune_one(spec, seed, budget, n_train, test, seeds)
            runs.append(r)
            results.append(res)
            w = r["weights"]
            print(
                f"{seed:4d} {w[0]:6.3g} {w[1]:6.3g} {w[2]:6.3g} {r['train_candidate']:7.4f} "  # type: ignore[index]
                f"{r['train_best_preset']:7.4f} {r['validation_candidate']:7.4f} {r['validation_incumbent']:7.4f} "
                f"{'yes' if r['adopted'] else 'no':>5} {r['test_chosen']:7.4f} {r['test_candidate']:7.4f} "
                f"{100 * float(r['test_gain']):6.2f}% {100 * float(r['test_gain_se']):4.2f}%",  # type: ignore[arg-type]
                flush=True,
            )

        def med(key: str, rs: list[dict[str, object]] = runs) -> float:
            return float(np.median([float(r[key]) for r in rs]))  # type: ignore[arg-type]

        test_chosen = med("test_chosen")
        out[name] = {
            "test_preset_values": presets,
            "best_preset": best_name,
            "median_test_chosen": test_chosen,
            "median_test_candidate": med("test_candidate"),
            "median_train_candidate": med("train_candidate"),
            "median_train_best_preset": med("train_best_preset"),
            "median_train_gain": float(
                np.median([1 - r["train_candidate"] / r["train_best_preset"] for r in runs])
            ),  # type: ignore[operator]
            "median_test_gain": med("test_gain"),
            "median_test_candidate_gain": med("test_candidate_gain"),
            "median_test_gain_commissions_only": med("test_gain_commissions_only"),
            "median_test_gain_decommissions_only": med("test_gain_decommissions_only"),
            "test_gain_se": [r["test_gain_se"] for r in runs],
            "beats_best_preset": test_chosen < presets[best_name],
            "adopted": sum(bool(r["adopted"]) for r in runs),
            "runs": runs,
            "warm_start": _warm(spec, results, budget, n_train, seeds),
        }
        o = out[name]
        print(
            f"median over {n_seeds} seeds: train {o['median_train_candidate']:.4f} vs best preset "
            f"{o['median_train_best_preset']:.4f} ({100 * float(o['median_train_gain']):.1f}% gain); "  # type: ignore[arg-type]
            f"test {test_chosen:.4f} vs {best_name} {presets[best_name]:.4f} "
            f"({100 * float(o['median_test_gain']):.2f}% gain); adopted {o['adopted']}/{n_seeds}",  # type: ignore[arg-type]
            flush=True,
        )
        print(
            f"the chosen weights on commissions only: {100 * float(o['median_test_gain_commissions_only']):.2f}% "  # type: ignore[arg-type]
            f"gain; on decommissions only: {100 * float(o['median_test_gain_decommissions_only']):.2f}%",  # type: ignore[arg-type]
            flush=True,
        )
        ws = o["warm_start"]
        print(f"warm start (a quarter of the budget, from the previous seed's result): {ws}", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=20, help="recorded operations per scenario (paper: 100)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--budget", type=int, default=30, help="tuning evaluations per campaign")
    ap.add_argument("--tune-seeds", type=int, default=5, help="tuning runs per campaign (median)")
    ap.add_argument("--train-campaigns", type=int, default=64, help="training (and held-out) campaigns")
    ap.add_argument("--test-campaigns", type=int, default=128, help="campaigns that score the result")
    ap.add_argument("--skip-tuning", action="store_true")
    ap.add_argument(
        "--heuristic",
        choices=("paper", "release"),
        default="paper",
        help="the planner's heuristic: the paper's Algorithms 1-2 (its figures), or the default release",
    )
    args = ap.parse_args()
    # Compile the kernels first so no timing includes numba's compilation.
    run_scenario(PRESETS["LDT"], start=5, end=8, reps=1, n_buckets=16, min_servers=2, max_servers=8, warmup=2)
    full_ms, full_cpu_ms = _full_api_ms(args.heuristic)
    print(
        f"plan_rescale (with models), commission 128 -> 2,048: {full_ms:.1f} ms wall, {full_cpu_ms:.1f} ms CPU",
        flush=True,
    )
    res = _scenarios(args.reps, args.seed, args.heuristic)
    big = res["commission_128_to_2048"]
    planner_ms = float(np.median([big[s]["planner_ms_median"] for s in STRATEGIES]))
    summary: dict[str, object] = {
        "reps": args.reps,
        "heuristic": args.heuristic,
        "planner_ms_commission_1920": planner_ms,
        "plan_rescale_ms_commission_1920": full_ms,
        "plan_rescale_cpu_ms_commission_1920": full_cpu_ms,
        "ratio_to_paper_612ms": planner_ms / PAPER_MS,
        "lt_load_within_at_128": res["decommission_2048_to_128"]["LT"]["l_ratio"] - 1,
        "dt_data_within_at_128": res["decommission_2048_to_128"]["DT"]["d_ratio"] - 1,
        "lt_load_within_at_2048": res["commission_128_to_2048"]["LT"]["l_ratio"] - 1,
        "dt_data_within_at_2048": res["commission_128_to_2048"]["DT"]["d_ratio"] - 1,
        "ldt_vs_lt_range_reduction": {
            k: 1 - v["LDT"]["t_range_s"] / v["LT"]["t_range_s"] if v["LT"]["t_range_s"] > 0 else None
            for k, v in res.items()
        },
        "paper_panels": PAPER_PANELS,
        "ldt_vs_dt_duration_ratio": {
            k: v["LDT"]["t_median_s"] / v["DT"]["t_median_s"] for k, v in res.items()
        },
        "scenarios": res,
    }
    reduction = summary["ldt_vs_lt_range_reduction"]
    assert isinstance(reduction, dict)
    for name in ("commission_128_to_2048", "decommission_320_to_256"):
        r = reduction[name] or 0.0
        where = "inside" if RANGE_BAND[0] <= r <= RANGE_BAND[1] else "outside"
        print(f"Fig. {PAPER_PANELS[name]}: LDT's duration range {r:.0%} shorter than LT's ({where} 32-70%)")
    if not args.skip_tuning:
        summary["tuning"] = _tuning(
            args.budget, args.tune_seeds, args.train_campaigns, args.test_campaigns, args.heuristic
        )
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
