"""Regime detection benchmark: realistic generated runs, river's seven TCPD series, the real
CloudPhysics trace, and speed, side by side in one run, every method with its defaults.

1. **Generated** (``--seed0``, default 70, ``--seeds`` default 10): the realistic presets of
   :mod:`regimetune.collectors.presets` (``parsplice``, ``fast-decay``, ``stationary``),
   ``--hours`` long, 256 workers, at 10-s and 60-s windows. Figures per preset and window:
   ARI, change-point F1 at 2 % of the run, A -> B -> A reversals, false changes per hour
   (stationary), the regime count at 10 s against 60 s, and for the online method the
   minutes until each true boundary was known (median per boundary; the service runs the old
   policy until then) and what the service saw window by window (``live_reversals``,
   ``live_changes_per_h`` after the first regime: each a policy pushed, every one false on
   ``stationary``). Methods: ``online`` (:class:`OnlineRegimeDetector`), ``pelt`` (ruptures
   PELT, l2 on the z-scored features with ``3 d log n``, the TCPD bench's setting) and
   ``paper`` (:func:`paper_kmeans`).
2. **TCPD**: :func:`bench.tcpd.run_tcpd` (F1 and cover, margin 5, every annotator) for
   ours and every baseline; the series score, they never tuned anything.
3. **CloudPhysics** (``../shared/data``, no labels): changes, reversals and regimes at 10-s
   and 60-s windows; a person sees no regime flapping there.
4. **Speed**: windows/s replayed (``detect``) and per-window ``update`` calls/s (the
   service's path), per CPU-second and per wall second, medians of ``--reps``; targets
   200k and 20k (per CPU-second). Beside them, a fixed loop of small numpy operations (the
   detector's kind of work) timed between the samples: a shared machine's speed moves by a
   quarter or more from minute to minute, and the loop shows by how much.

    nice .venv/bin/python bench/regimes.py                 # everything
    nice .venv/bin/python bench/regimes.py --quick         # one seed, 2 h runs
    nice .venv/bin/python bench/regimes.py --presets fast-decay --seed0 0 --seeds 40

The last line printed is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import ruptures as rpt

from regimetune.collectors import GeneratorConfig, generate, window_frame
from regimetune.models import WindowFrame
from regimetune.regimes import (
    FeatureExtractor,
    OnlineRegimeDetector,
    ari,
    change_points,
    paper_kmeans,
    precision_recall_f1,
    regimes_entered,
    reversals,
)

sys.path.insert(0, str(Path(__file__).parent))
from tcpd import run_tcpd

TOLERANCE = 0.02
PRESETS = ("parsplice", "fast-decay", "stationary")
CLOUDPHYSICS = Path(__file__).resolve().parents[1].parent / "shared/data/cloudphysics/cloudPhysicsIO.csv"


class Found(NamedTuple):
    labels: np.ndarray  # the regime of each window
    ids: list[int]  # the regimes in the order they were entered
    confirmed: dict[int, int]  # an online method's changes: first window -> window it was known at
    live: np.ndarray | None = None  # an online method's regime as each window was learnt (-1: none yet)


def _online(frame: WindowFrame) -> Found:
    h = OnlineRegimeDetector().detect(frame)
    confirmed = {c.at_window: c.confirmed_window for c in h.changes}
    return Found(h.labels, [c.to_id for c in h.changes], confirmed, h.online_labels)


def _known_after(truth: np.ndarray, found: Found, margin: float, window_s: float) -> list[float]:
    """Per true boundary, the minutes until the online detector knew of the change it dated
    within ``margin`` windows of it (NaN: none): how long the service runs the old policy."""
    out = []
    for b in change_points(truth):
        known = [k - b for at, k in found.confirmed.items() if at > 0 and abs(at - b) <= margin]
        out.append(min(known) * window_s / 60.0 if known else float("nan"))
    return out


def _pelt(frame: WindowFrame) -> Found:
    x = FeatureExtractor(features=OnlineRegimeDetector().features).transform(frame)[1:]
    x = (x - x.mean(0)) / np.maximum(x.std(0, ddof=1), 1e-12)
    pen = 3 * x.shape[1] * np.log(len(x))
    bkps = rpt.KernelCPD(kernel="linear", min_size=2).fit(x).predict(pen=pen)[:-1]
    labels = np.zeros(len(frame), dtype=np.int64)
    for i, b in enumerate(bkps, start=1):
        labels[b + 1 :] = i
    return Found(labels, list(range(len(bkps) + 1)), {})


def _paper(frame: WindowFrame) -> Found:
    labels = np.maximum.accumulate(paper_kmeans(frame).labels)
    return Found(labels, regimes_entered(labels), {})


METHODS: dict[str, Callable[[WindowFrame], Found]] = {
    "online": _online,
    "pelt": _pelt,
    "paper": _paper,
}
# methods that know a change some windows after it began
ONLINE = ("online",)


def generated(seeds: range, hours: float, presets: tuple[str, ...] = PRESETS) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for preset in presets:
        for window in (10.0, 60.0):
            rows: dict[str, list[dict[str, Any]]] = {m: [] for m in METHODS}
            for seed in seeds:
                cfg = GeneratorConfig(duration_s=3600.0 * hours, workers=256, seed=seed, preset=preset)
                frame = window_frame(generate(cfg), window_s=window)
                truth = frame["label"]
                margin = max(1.0, TOLERANCE * len(frame))
                for name, fn in METHODS.items():
                    found = fn(frame)
                    cps = change_points(found.labels)
                    _, _, f1 = precision_recall_f1(change_points(truth), cps, margin=margin)
                    rows[name].append(
                        {
                            "ari": ari(truth, found.labels) if len(set(truth.tolist())) > 1 else float("nan"),
                            "f1": f1,
                            "reversals": reversals(found.ids),
                            "changes_per_h": len(cps) / hours,
                            "regimes": len(set(found.labels.tolist())),
                            "known_after_min": _known_after(truth, found, margin, window),
                            **_live(found, hours),
                        }
                    )
            for name, rs in rows.items():
                key = f"{preset}@{window:g}s"
                out.setdefault(name, {})[key] = {
                    "ari_mean": _mean([r["ari"] for r in rs]),
                    "ari_min": _min([r["ari"] for r in rs]),
                    "f1_mean": _mean([r["f1"] for r in rs]),
                    "f1_min": _min([r["f1"] for r in rs]),
                    "reversals": sum(int(r["reversals"]) for r in rs),
                    "changes_per_h": _mean([r["changes_per_h"] for r in rs]),
                    "regimes": [int(r["regimes"]) for r in rs],
                }
                if name not in ONLINE:
                    continue
                out[name][key]["live_reversals"] = sum(int(r["live_reversals"]) for r in rs)
                out[name][key]["live_changes_per_h"] = _mean([r["live_changes_per_h"] for r in rs])
                known = np.array([r["known_after_min"] for r in rs], dtype=float).reshape(len(rs), -1)
                if known.shape[1]:  # per true boundary: median minutes to know it, runs that never did
                    out[name][key]["known_after_min_median"] = [
                        round(float(np.nanmedian(k)), 1) if np.isfinite(k).any() else None for k in known.T
                    ]
                    out[name][key]["never_known"] = [int(np.isnan(k).sum()) for k in known.T]
    for name in METHODS:
        m = out[name]
        out[name]["regime_count_10s_vs_60s"] = {
            p: [abs(a - b) for a, b in zip(m[f"{p}@10s"]["regimes"], m[f"{p}@60s"]["regimes"], strict=True)]
            for p in presets
        }
    return out


def _live(found: Found, hours: float) -> dict[str, Any]:
    """What the service saw, window by window (an online method): reversals of the regime
    in force, and its changes per hour after the first regime was founded (each one a
    policy pushed; on a stationary run every one is false)."""
    if found.live is None:
        return {}
    ids = regimes_entered(found.live)
    return {"live_reversals": reversals(ids), "live_changes_per_h": max(len(ids) - 1, 0) / hours}


def _mean(v: list[float]) -> float | None:
    v = [x for x in v if not np.isnan(x)]
    return round(statistics.fmean(v), 4) if v else None


def _min(v: list[float]) -> float | None:
    v = [x for x in v if not np.isnan(x)]
    return round(min(v), 4) if v else None


def cloudphysics() -> dict[str, Any] | None:
    if not CLOUDPHYSICS.exists():
        return None
    from regimetune.collectors import TraceSpec, read_trace

    spec = TraceSpec(
        columns="ts=time,op=op,size=size,key=lbn",
        time_unit="s",
        read_ops=frozenset({"28"}),
        write_ops=frozenset({"2a"}),
    )
    out = {}
    for window in (10.0, 60.0):
        frame = window_frame(read_trace(CLOUDPHYSICS, spec=spec), window_s=window)
        h = OnlineRegimeDetector().detect(frame)
        ids = [c.to_id for c in h.changes]
        assert h.online_labels is not None
        live = regimes_entered(h.online_labels)
        out[f"{window:g}s"] = {
            "windows": len(frame),
            "changes": len(h.changes) - 1,
            "reversals": reversals(ids),
            "live_changes": max(len(live) - 1, 0),
            "live_reversals": reversals(live),
            "regimes": h.n_regimes,
        }
    return out


def _rates(run: Callable[[], None], items: int, min_cpu_s: float = 1.0) -> tuple[float, float]:
    """Items per CPU-second and per wall second of ``run``, repeated until it has taken
    ``min_cpu_s`` of CPU (one replay is a tenth of a second: too short to time alone)."""
    n, c, w = 0, time.process_time(), time.perf_counter()
    while (cpu := time.process_time() - c) < min_cpu_s:
        run()
        n += 1
    return n * items / cpu, n * items / (time.perf_counter() - w)


def speed(reps: int) -> dict[str, Any]:
    """Windows/s of a replay and of per-window ``update`` calls, per CPU-second of this
    process (a shared 2-core machine's wall clock measures the neighbours) and per wall
    second, medians of ``reps`` (each at least a CPU-second)."""
    cfg = GeneratorConfig(duration_s=4 * 3600.0, workers=256, seed=1)
    frame = window_frame(generate(cfg), window_s=1.0)  # 14,400 windows
    OnlineRegimeDetector().detect(frame.slice(0, 100))  # compile
    records = list(frame.slice(0, 3000).records())

    def replay() -> None:
        OnlineRegimeDetector(window_s=10.0).detect(frame)

    def update() -> None:
        det = OnlineRegimeDetector(window_s=10.0)
        for rec in records:
            det.update(rec)

    rng = np.random.default_rng(0)
    small = rng.normal(size=(2000, 3))

    def probe() -> None:
        for row in small:
            np.abs(row).sum()

    probes, replays, updates = [], [], []
    for _ in range(reps):
        probes.append(_rates(probe, 1, 0.2)[0])
        replays.append(_rates(replay, len(frame)))
        updates.append(_rates(update, len(records)))
    med = {
        "replay_cpu": statistics.median(r[0] for r in replays),
        "replay_wall": statistics.median(r[1] for r in replays),
        "update_cpu": statistics.median(r[0] for r in updates),
        "update_wall": statistics.median(r[1] for r in updates),
    }
    return {
        "replay_windows_per_cpu_s": round(med["replay_cpu"]),
        "replay_windows_per_wall_s": round(med["replay_wall"]),
        "replay_ratio_to_200k": round(med["replay_cpu"] / 200_000, 3),
        "update_calls_per_cpu_s": round(med["update_cpu"]),
        "update_calls_per_wall_s": round(med["update_wall"]),
        "update_ratio_to_20k": round(med["update_cpu"] / 20_000, 3),
        "machine_probe_per_cpu_s": round(statistics.median(probes), 1),
        "machine_probe_min_max": [round(min(probes), 1), round(max(probes), 1)],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed0", type=int, default=70, help="first seed of the generated runs")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--hours", type=float, default=4.0)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--presets", default=",".join(PRESETS), help="comma-separated, of " + ", ".join(PRESETS))
    a = ap.parse_args()
    if a.quick:
        a.seeds, a.hours, a.reps = 1, 2.0, 1
    out: dict[str, Any] = {"seeds": [a.seed0, a.seed0 + a.seeds - 1], "hours": a.hours}
    presets = tuple(a.presets.split(","))
    out["generated"] = generated(range(a.seed0, a.seed0 + a.seeds), a.hours, presets)
    for name, per in out["generated"].items():
        for key, v in per.items():
            print(f"generated {name:7} {key:22} {v}", flush=True)
    out["tcpd"] = {name: {"f1": r["f1"], "cover": r["cover"]} for name, r in run_tcpd().items()}
    for name, v in out["tcpd"].items():
        print(f"tcpd {name:15} F1 {v['f1']:.3f} cover {v['cover']:.3f}", flush=True)
    out["cloudphysics"] = cloudphysics()
    print(f"cloudphysics {out['cloudphysics']}", flush=True)
    out["speed"] = speed(a.reps)
    print(f"speed {out['speed']}", flush=True)
    best = {k: max(v[k] for n, v in out["tcpd"].items() if not n.startswith("ours")) for k in ("f1", "cover")}
    o = out["generated"]["online"]
    out["targets_met"] = {
        "tcpd_f1_beats_every_baseline": out["tcpd"]["ours"]["f1"] > best["f1"],
        "tcpd_cover_beats_every_baseline": out["tcpd"]["ours"]["cover"] > best["cover"],
        # the targets, per preset and window length over its runs
        "generated_ari_ge_0.9": all((v["ari_mean"] or 1.0) >= 0.9 for k, v in o.items() if "@" in k),
        "generated_f1_ge_0.9": all(v["f1_mean"] >= 0.9 for k, v in o.items() if "@" in k),
        # stricter: in every run (one boundary outside the margin in a run of three is F1 0.67)
        "generated_ari_ge_0.9_every_run": all((v["ari_min"] or 1.0) >= 0.9 for k, v in o.items() if "@" in k),
        "generated_f1_ge_0.9_every_run": all(v["f1_min"] >= 0.9 for k, v in o.items() if "@" in k),
        "zero_reversals": all(v["reversals"] == 0 for k, v in o.items() if "@" in k),
        "zero_false_changes_stationary": all(
            o[f"stationary@{w}s"]["changes_per_h"] == 0 for w in ("10", "60") if "stationary" in presets
        ),
        # the same, as the service saw them window by window (each live change a policy pushed)
        "zero_live_reversals": all(v["live_reversals"] == 0 for k, v in o.items() if "@" in k),
        "zero_live_changes_stationary": all(
            o[f"stationary@{w}s"]["live_changes_per_h"] == 0 for w in ("10", "60") if "stationary" in presets
        ),
        "regimes_10s_vs_60s_within_1": all(d <= 1 for v in o["regime_count_10s_vs_60s"].values() for d in v),
        "replay_ge_200k_windows_per_s": out["speed"]["replay_windows_per_cpu_s"] >= 200_000,
        "update_ge_20k_per_s": out["speed"]["update_calls_per_cpu_s"] >= 20_000,
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
