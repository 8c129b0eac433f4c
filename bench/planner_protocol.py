"""The planner's two heuristics on the paper's campaign protocol (Section VII-B).

Each campaign (:class:`CampaignSpec`: warm-up rescalings with the strategy under test, then
``--operations`` recorded ones) runs ``--campaigns`` times (seeds 0..), planned by the
paper's Algorithms 1-2 (``paper``, the anchor) and by ``release`` (the default). Per
campaign and preset: mean L_max/L_t, D_max/D_t, T_max/T_t, the fraction of the data moved,
and the campaign score (every cost component at weight 1; lower is better), with the ratio
of ``release``'s score to ``paper``'s.

    nice .venv/bin/python bench/planner_protocol.py

The last line is JSON: {CAMPAIGN: {PRESET: {HEURISTIC: {...}, "score_ratio": x}}}.
"""

from __future__ import annotations

import argparse
import dataclasses
import json

import numpy as np

from regimetune.models import PRESETS
from regimetune.tuner.rescale.campaign import CampaignSpec, simulate_campaign
from regimetune.tuner.rescale.planner import Heuristic

CAMPAIGNS: dict[str, tuple[CampaignSpec, tuple[str, ...]]] = {
    "128-2,048 servers, 8,192 buckets": (CampaignSpec(), ("LDT", "LT", "DT")),
    "256-320 servers": (CampaignSpec(min_servers=256, max_servers=320), ("LDT",)),
    "4-8 servers, 16,384 buckets": (CampaignSpec(min_servers=4, max_servers=8, n_buckets=16384), ("LDT",)),
    "16-64 servers, volatile loads (0.3)": (
        CampaignSpec(min_servers=16, max_servers=64, volatility=0.3),
        ("LDT",),
    ),
}
HEURISTICS: tuple[Heuristic, ...] = ("paper", "release")


def figures(spec: CampaignSpec, preset: str, campaigns: int) -> dict[str, float]:
    runs = [simulate_campaign(PRESETS[preset], spec, seed=s) for s in range(campaigns)]
    return {
        "l_ratio": float(np.mean([r.l_ratio.mean() for r in runs])),
        "d_ratio": float(np.mean([r.d_ratio.mean() for r in runs])),
        "t_ratio": float(np.mean([r.t_ratio.mean() for r in runs])),
        "moved": float(np.mean([r.moved.mean() for r in runs])),
        "score": float(np.mean([r.value for r in runs])),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--campaigns", type=int, default=3)
    ap.add_argument("--operations", type=int, default=10)
    a = ap.parse_args()
    out: dict[str, dict[str, dict[str, object]]] = {}
    print(
        "| campaign | preset | paper: L, D, T/T_t, moved, score | release: L, D, T/T_t, moved, score | ratio |"
    )
    print("|---|---|---|---|---|")
    for name, (spec, presets) in CAMPAIGNS.items():
        out[name] = {}
        for preset in presets:
            per = {
                h: figures(
                    dataclasses.replace(spec, operations=a.operations, heuristic=h), preset, a.campaigns
                )
                for h in HEURISTICS
            }
            ratio = per["release"]["score"] / per["paper"]["score"]
            out[name][preset] = {"paper": per["paper"], "release": per["release"], "score_ratio": ratio}
            cells = [", ".join(f"{v:.3f}" for v in per[h].values()) for h in HEURISTICS]
            print(f"| {name} | {preset} | {cells[0]} | {cells[1]} | {ratio:.2f} |", flush=True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
