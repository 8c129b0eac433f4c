"""Regime detection benchmark on the ParSplice-like generator (ground truth in ``label``).

Suite: growth x temperature x seed (default 3 x 3 x 3 = 27 runs of ``--duration`` seconds,
1 s windows, the regimes unfolding over ``--duration / 2`` seconds at growth 1), plus
``--stationary`` traces that hold only the last plateau. Three detectors:

* ``online``: :class:`OnlineRegimeDetector` with its defaults (no label is ever shown to it);
* ``paper``: :func:`paper_kmeans` (batch K-means on (time, reads/s), K = 4);
* ``pelt``: ruptures' PELT (l2 cost, ``KernelCPD(kernel="linear")``) on the same features,
  penalty ``100 d sigma^2 log n`` with sigma^2 the median per-feature noise (MAD of first
  differences): the offline anchor, which sees the whole trace at once;
* ``silhouette``: batch K-means on the same features with K in 2..8 chosen by the silhouette
  score on a bounded sample of 2,000 windows (scikit-learn), the textbook way to choose K
  from the data, offline: what the online detector's own choice of K is measured against.

Figures: mean / min ARI, mean / min change-point F1 at a 2 % tolerance of the trace length
(each true change matched at most once, a detected change placed where the detector dates
it), median detection delay (windows from the true change to the confirmation; online
only), the same per true boundary (0->1 the end of the flash crowd, 1->2 the decline
levelling off into the first plateau, 2->3 the step to the second plateau) with how many
of them were matched, false changes per hour on the stationary traces, and windows/s
(median over runs, detection only). ``--seed0`` moves the seeds, e.g. to held-out ones. Targets for ``online``: ARI >= 0.9 and
F1 >= 0.9 on every trace, median delay <= 3 windows, 0 false changes/hour, >= 100k windows/s.
The last line printed is one JSON object with every figure.

    nice .venv/bin/python bench/regimes.py            # full suite
    nice .venv/bin/python bench/regimes.py --quick    # 2 x 1 x 1 smoke run
    nice .venv/bin/python bench/regimes.py --seed0 10 # the same suite on held-out seeds
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import ruptures as rpt
from sklearn.cluster import KMeans
from sklearn.metrics import silhouette_score

from regimetune.collectors import GeneratorConfig, generate, window_frame
from regimetune.models import WindowFrame
from regimetune.regimes import FeatureExtractor, OnlineRegimeDetector, change_points, paper_kmeans
from regimetune.regimes.metrics import _match, ari, detection_delays, precision_recall_f1

TOLERANCE = 0.02
#: PELT's penalty per feature, in units of noise variance x log n (picked from 30/100/300 on
#: one growth x temperature grid of seed 1, as a fair anchor; 3, a BIC-like value, splits the
#: continuous drifts of this workload into dozens of segments).
PELT_PENALTY = 100.0


def _frame(duration: float, growth: float, temperature: float, seed: int) -> WindowFrame:
    cfg = GeneratorConfig(
        duration_s=duration, growth=growth, temperature=temperature, seed=seed, timescale_s=duration / 2
    )
    return window_frame(generate(cfg))


def _stationary(duration: float, seed: int) -> WindowFrame:
    """Only the last plateau: the regimes unfold over a short timescale, then keep the tail."""
    lead = 600.0
    cfg = GeneratorConfig(duration_s=duration + lead, seed=seed, timescale_s=lead / 2)
    f = window_frame(generate(cfg))
    f = f.slice(int(lead), len(f))
    assert set(f["label"].tolist()) == {3}
    return f


def _online(frame: WindowFrame) -> tuple[np.ndarray, list[int], list[tuple[int, int]]]:
    h = OnlineRegimeDetector().detect(frame)
    real = [c for c in h.changes if c.from_id is not None]
    return h.labels, [c.at_window for c in real], [(c.at_window, c.confirmed_window) for c in real]


def _paper(frame: WindowFrame) -> tuple[np.ndarray, list[int], list[tuple[int, int]]]:
    r = paper_kmeans(frame)
    labels = np.maximum.accumulate(r.labels)
    return labels, change_points(labels).tolist(), []


def _pelt(frame: WindowFrame) -> tuple[np.ndarray, list[int], list[tuple[int, int]]]:
    x = FeatureExtractor().transform(frame)[1:]  # the first window has no growth rate
    d = np.diff(x, axis=0)
    sigma2 = float(np.median((1.4826 * np.median(np.abs(d - np.median(d, 0)), 0) / np.sqrt(2)) ** 2))
    pen = PELT_PENALTY * x.shape[1] * max(sigma2, 1e-6) * np.log(len(x))
    # KernelCPD with a linear kernel is PELT on the l2 cost, in ruptures' C code
    bkps = rpt.KernelCPD(kernel="linear", min_size=10).fit(x).predict(pen=pen)[:-1]
    cps = [b + 1 for b in bkps]
    labels = np.zeros(len(frame), dtype=np.int64)
    for i, b in enumerate(cps, start=1):
        labels[b:] = i
    return labels, cps, []


def _silhouette(frame: WindowFrame) -> tuple[np.ndarray, list[int], list[tuple[int, int]]]:
    x = FeatureExtractor(lag=3, features=OnlineRegimeDetector().features).transform(frame)[1:]
    best: tuple[float, np.ndarray] | None = None
    for k in range(2, 9):
        km = KMeans(n_clusters=k, n_init=4, random_state=0).fit(x)
        s = float(silhouette_score(x, km.labels_, sample_size=min(2000, len(x)), random_state=0))
        if best is None or s > best[0]:
            best = (s, km.labels_)
    assert best is not None
    labels = np.r_[best[1][0], best[1]]
    return labels, change_points(labels).tolist(), []


def _by_boundary(rs: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """Median delay and matched count per true boundary (online only)."""
    if not any(r["by_boundary"] and any(d is not None for d in r["by_boundary"]) for r in rs):
        return None
    out = []
    for i in range(max(len(r["by_boundary"]) for r in rs)):
        ds = [
            r["by_boundary"][i] for r in rs if i < len(r["by_boundary"]) and r["by_boundary"][i] is not None
        ]
        out.append({"median": statistics.median(ds) if ds else None, "matched": f"{len(ds)}/{len(rs)}"})
    return out


DETECTORS: dict[str, Callable[[WindowFrame], tuple[np.ndarray, list[int], list[tuple[int, int]]]]] = {
    "online": _online,
    "paper": _paper,
    "pelt": _pelt,
    "silhouette": _silhouette,
}


def _score(frame: WindowFrame, fn: Callable[..., Any]) -> dict[str, Any]:
    t = time.perf_counter()
    labels, cps, conf = fn(frame)
    dt = time.perf_counter() - t
    truth = frame["label"]
    true_cp = change_points(truth)
    margin = max(1.0, TOLERANCE * len(frame))
    _, _, f1 = precision_recall_f1(true_cp, cps, margin=margin)
    delays: list[int] = []
    by_boundary: list[int | None] = [None] * len(true_cp)
    if conf:
        from regimetune.models import RegimeChange

        changes = [
            RegimeChange(
                from_id=0, to_id=1, at_window=a, at_time=float(a), confirmed_window=c, confirmed_time=float(c)
            )
            for a, c in conf
        ]
        delays = detection_delays(true_cp, changes, margin=margin)
        real = sorted(conf)
        for i, j in _match(
            true_cp.astype(np.float64), np.array([a for a, _ in real], dtype=np.float64), margin
        ):
            by_boundary[i] = int(real[j][1] - true_cp[i])
    return {
        "ari": ari(truth, labels),
        "f1": f1,
        "delays": delays,
        "by_boundary": by_boundary,
        "wps": len(frame) / dt,
        "n_cp": len(cps),
        "k": len(np.unique(labels[labels >= 0])),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=3600.0, help="seconds per trace")
    ap.add_argument("--growth", type=float, nargs="+", default=[0.5, 1.0, 1.5])
    ap.add_argument("--temperature", type=float, nargs="+", default=[0.5, 1.0, 2.0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--seed0", type=int, default=0, help="first seed")
    ap.add_argument("--stationary", type=int, default=3, help="stationary traces")
    ap.add_argument("--quick", action="store_true", help="a smoke run")
    a = ap.parse_args()
    if a.quick:
        a.growth, a.temperature, a.seeds, a.stationary, a.duration = [0.5, 1.5], [1.0], 1, 1, 1800.0

    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in DETECTORS}
    for g, temp, seed in itertools.product(a.growth, a.temperature, range(a.seed0, a.seed0 + a.seeds)):
        frame = _frame(a.duration, g, temp, seed)
        for name, fn in DETECTORS.items():
            r = _score(frame, fn)
            r["trace"] = {"growth": g, "temperature": temp, "seed": seed}
            runs[name].append(r)
        o = runs["online"][-1]
        print(
            f"growth {g:<4} temp {temp:<4} seed {seed}: online ARI {o['ari']:.3f} F1 {o['f1']:.2f} "
            f"delays by boundary {o['by_boundary']} | paper ARI {runs['paper'][-1]['ari']:.3f} F1 {runs['paper'][-1]['f1']:.2f} "
            f"| pelt ARI {runs['pelt'][-1]['ari']:.3f} F1 {runs['pelt'][-1]['f1']:.2f} "
            f"| silhouette ARI {runs['silhouette'][-1]['ari']:.3f} K {runs['silhouette'][-1]['k']}",
            flush=True,
        )
    false_rate: dict[str, list[float]] = {k: [] for k in DETECTORS}
    for seed in range(a.stationary):
        frame = _stationary(a.duration, 100 + a.seed0 + seed)
        for name, fn in DETECTORS.items():
            _, cps, _ = fn(frame)
            false_rate[name].append(len(cps) * 3600.0 / float(frame["length"].sum()))
    print(f"stationary: false changes/hour { ({k: v for k, v in false_rate.items()}) }", flush=True)

    out: dict[str, Any] = {
        "traces": len(runs["online"]),
        "seeds": [a.seed0, a.seed0 + a.seeds - 1],
        "duration_s": a.duration,
        "tolerance": TOLERANCE,
    }
    for name, rs in runs.items():
        delays = [d for r in rs for d in r["delays"]]
        out[name] = {
            "ari_mean": round(statistics.fmean(r["ari"] for r in rs), 4),
            "ari_min": round(min(r["ari"] for r in rs), 4),
            "f1_mean": round(statistics.fmean(r["f1"] for r in rs), 4),
            "f1_min": round(min(r["f1"] for r in rs), 4),
            "median_delay_windows": statistics.median(delays) if delays else None,
            "median_delay_by_boundary": _by_boundary(rs),
            "false_changes_per_hour": round(statistics.fmean(false_rate[name]), 3),
            "windows_per_s": round(statistics.median(r["wps"] for r in rs)),
            "k_found": sorted({r["k"] for r in rs}),
        }
    anchor = out["pelt"]
    out["online_vs_pelt"] = {
        "ari_mean_ratio": round(out["online"]["ari_mean"] / anchor["ari_mean"], 3),
        "f1_mean_ratio": round(out["online"]["f1_mean"] / anchor["f1_mean"], 3)
        if anchor["f1_mean"]
        else None,
        "windows_per_s_ratio": round(out["online"]["windows_per_s"] / anchor["windows_per_s"], 1),
    }
    o = out["online"]
    out["targets_met"] = {
        "ari_every_trace_ge_0.9": o["ari_min"] >= 0.9,
        "f1_every_trace_ge_0.9": o["f1_min"] >= 0.9,
        "median_delay_le_3": o["median_delay_windows"] is not None and o["median_delay_windows"] <= 3,
        "zero_false_changes": o["false_changes_per_hour"] == 0.0,
        "windows_per_s_ge_100k": o["windows_per_s"] >= 100_000,
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
