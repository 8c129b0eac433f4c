"""How realistic the generator's presets are, and what today's online detector makes of them.

For each trace (``parsplice`` at 128 and 256 workers, ``fast-decay`` and ``stationary`` at 256,
seeds ``--seed0`` on, ``--duration`` seconds), the events go once through two window
aggregators (10 s and 60 s windows, the last window ending at the trace's end).

Realism figures, against ``shared/design/real-workload-facts.md``: the share of consecutive
requests on the same key (87-99.6 %), reads per write (50-100), the keyspace at the end
(1e4-1e5 in hours), the flash crowd's active keys per 10 s window (1 or 2) and the share of its
windows with 1 or 2, the gap between the first two plateaus (10-20 %), the robust
window-to-window spread of the read rate inside plateaus at 10 s (3-5 %), dips per hour
(10 s windows 20-45 % below the median of the 31 windows around them; "every few minutes").

Detector figures, for :class:`OnlineRegimeDetector` with its defaults on each window length:
regimes found, confirmed changes, A -> B -> A reversals (a change straight back to the regime
just left), changes inside plateaus (dated in a window labelled as a plateau, farther than the
2 % margin from every true boundary), ARI and change-point F1 at a 2 % margin, and the
true regime count. On ``stationary`` traces every confirmed change is a false one.

    nice .venv/bin/python bench/generator_realism.py           # 4 h traces, seeds 0-2
    nice .venv/bin/python bench/generator_realism.py --quick   # one seed, 1 h

The last line printed is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import time
from typing import Any

import numpy as np
from scipy.ndimage import median_filter

from regimetune.collectors import GeneratorConfig, WindowAggregator, generate
from regimetune.collectors.windows import frame_of
from regimetune.models import WindowFrame
from regimetune.regimes import OnlineRegimeDetector
from regimetune.regimes.metrics import ari, change_points, precision_recall_f1

TOLERANCE = 0.02
WINDOWS = (10.0, 60.0)


def _trace(cfg: GeneratorConfig) -> tuple[dict[str, float], dict[float, WindowFrame]]:
    """Stream the trace once: event figures and the frames at every window length."""
    aggs = {w: WindowAggregator(w) for w in WINDOWS}
    parts: dict[float, list[dict[str, np.ndarray]]] = {w: [] for w in WINDOWS}
    same = pairs = reads = writes = 0
    prev: np.uint64 | None = None
    t0 = time.perf_counter()
    for b in generate(cfg):
        k = b.key
        same += int(np.count_nonzero(k[1:] == k[:-1])) + int(prev is not None and k[0] == prev)
        pairs += len(k) - (prev is None)
        prev = k[-1]
        writes += b.n_writes
        reads += b.n_reads
        for w, agg in aggs.items():
            cols = agg.push_columns(b)
            if cols is not None:
                parts[w].append(cols)
    for w, agg in aggs.items():
        last = agg.flush_columns(end=cfg.trace_end)
        if last is not None:
            parts[w].append(last)
    frames = {w: frame_of(parts[w], 0) for w in WINDOWS}
    figures = {
        "events": reads + writes,
        "reuse": same / max(pairs, 1),
        "rw_ratio": reads / max(writes, 1),
        "keyspace": int(frames[WINDOWS[0]]["keyspace_size"][-1]),
        "seconds": time.perf_counter() - t0,
    }
    return figures, frames


def _shape_figures(cfg: GeneratorConfig, f: WindowFrame) -> dict[str, Any]:
    """Figures read off the 10 s windows, by ground-truth label."""
    names = cfg.regime_names()
    rate, lab, active = f.reads_per_s[1:-1], f["label"][1:-1], f["active_keys"][1:-1]  # whole windows
    out: dict[str, Any] = {}
    if "flash crowd" in names:
        a = active[lab == names.index("flash crowd")]
        out["flash_active_mean"] = float(a.mean())
        out["flash_1_or_2"] = float(np.isin(a, (1, 2)).mean())
        out["flash_1_share"] = float((a == 1).mean())
    plateaus = [i for i, n in enumerate(names) if n.startswith("plateau")]
    levels = [float(np.median(rate[lab == i])) for i in plateaus]
    if len(levels) >= 2:
        out["plateau_levels"] = levels
        out["plateau_gap"] = 1.0 - levels[1] / levels[0]
    spreads = []
    for i in plateaus:
        r = rate[lab == i]
        d = np.diff(r) / np.median(r)
        spreads.append(1.4826 * float(np.median(np.abs(d - np.median(d)))) / np.sqrt(2))
    out["spread_10s"] = float(np.mean(spreads))
    base = median_filter(rate, size=31, mode="nearest")
    dips = (rate < 0.8 * base) & (rate > 0.55 * base)
    out["dips_per_hour"] = float(dips.sum() * 3600.0 / cfg.duration_s)
    return out


def _detector_figures(cfg: GeneratorConfig, f: WindowFrame) -> dict[str, Any]:
    h = OnlineRegimeDetector().detect(f)
    real = [c for c in h.changes if c.from_id is not None]
    reversals = sum(1 for a, b in itertools.pairwise(real) if b.to_id == a.from_id)
    truth = f["label"]
    true_cp = change_points(truth)
    margin = max(1.0, TOLERANCE * len(f))
    plateau = {i for i, n in enumerate(cfg.regime_names()) if n.startswith("plateau")}
    inside = sum(
        1
        for c in real
        if 0 <= c.at_window < len(f)
        and int(truth[c.at_window]) in plateau
        and (not len(true_cp) or np.min(np.abs(true_cp - c.at_window)) > margin)
    )
    _, _, f1 = precision_recall_f1(true_cp, [c.at_window for c in real], margin=margin)
    return {
        "true_regimes": len(np.unique(truth[truth >= 0])),
        "regimes": h.n_regimes,
        "changes": len(real),
        "reversals": reversals,
        "in_plateau": inside,
        "ari": ari(truth, h.labels),
        "f1": f1,
        "false_per_hour": len(real) * 3600.0 / cfg.duration_s if cfg.preset == "stationary" else None,
    }


def _configs(a: argparse.Namespace) -> list[GeneratorConfig]:
    seeds = range(a.seed0, a.seed0 + a.seeds)
    kinds = [("parsplice", 128), ("parsplice", 256), ("fast-decay", 256), ("stationary", 256)]
    return [
        GeneratorConfig(duration_s=a.duration, workers=w, seed=s, preset=p) for p, w in kinds for s in seeds
    ]


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for preset in dict.fromkeys(r["preset"] for r in rows):
        rs = [r for r in rows if r["preset"] == preset]
        s: dict[str, Any] = {}
        for key in ("reuse", "rw_ratio", "keyspace", "spread_10s", "dips_per_hour", "plateau_gap"):
            vals = [r[key] for r in rs if r.get(key) is not None]
            if vals:
                s[key] = [min(vals), max(vals)]
        for w in WINDOWS:
            d = [r[f"w{w:g}"] for r in rs]
            s[f"w{w:g}"] = {
                k: statistics.mean(x[k] for x in d)
                for k in ("regimes", "changes", "reversals", "in_plateau", "ari", "f1")
            }
        out[preset] = s
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=14_400.0, help="seconds per trace")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--seed0", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="one seed, 1 h traces")
    a = ap.parse_args()
    if a.quick:
        a.seeds, a.duration = 1, 3600.0
    rows: list[dict[str, Any]] = []
    head = f"{'trace':<24} {'reuse':>6} {'r/w':>5} {'keys':>7} {'gap':>5} {'dips/h':>6} {'spread':>6}"
    det = " | ".join(f"{w:g}s: K/true chg rev inpl ARI   F1 " for w in WINDOWS)
    print(f"{head} | {det}")
    for cfg in _configs(a):
        figures, frames = _trace(cfg)
        row: dict[str, Any] = {"preset": cfg.preset, "workers": cfg.workers, "seed": cfg.seed, **figures}
        row |= _shape_figures(cfg, frames[10.0])
        for w in WINDOWS:
            row[f"w{w:g}"] = _detector_figures(cfg, frames[w])
        rows.append(row)
        gap = f"{row['plateau_gap']:.3f}" if "plateau_gap" in row else "-"
        cells = " | ".join(
            "{regimes:>3}/{true_regimes} {changes:>3} {reversals:>3} {in_plateau:>4} {ari:.2f} {f1:.2f}".format(
                **row[f"w{w:g}"]
            )
            for w in WINDOWS
        )
        name = f"{cfg.preset} w{cfg.workers} s{cfg.seed}"
        print(
            f"{name:<24} {row['reuse']:>6.3f} {row['rw_ratio']:>5.0f} {row['keyspace']:>7,} {gap:>5} "
            f"{row['dips_per_hour']:>6.1f} {row['spread_10s']:>6.3f} | {cells}",
            flush=True,
        )
        if "flash_active_mean" in row:
            print(
                f"{'':<24} flash crowd: {row['flash_active_mean']:.2f} active keys per 10 s window, "
                f"{row['flash_1_or_2']:.0%} of windows on 1 or 2 keys ({row['flash_1_share']:.0%} on 1)"
            )
    print(json.dumps({"duration_s": a.duration, "summary": _summary(rows), "runs": rows}))


if __name__ == "__main__":
    main()
