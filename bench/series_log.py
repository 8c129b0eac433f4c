"""``log="auto"`` against the raw reading, paired per series, on sets of generated series.

``detect_series(..., log="auto")`` reads a positive column in log space when its noise is
likelier proportional to its level (a Box-Cox test inside the raw reading's segments). This
script says whether that reading helps, series by series, on the labelled series of
``bench/series_step.py``: for each set (a seed range and its kinds of noise) the paired
difference of F1 + cover (auto minus raw; TCPD's F1 with margin 5 and cover, one annotator),
its mean and standard error, and a sign test over the series whose score changed (the
readings differ only where a column is logged, so a set may differ on a handful of series,
too few for a standard error to mean much).

    nice .venv/bin/python bench/series_log.py                   # the rule's sets and its verdict, ~20 s
    nice .venv/bin/python bench/series_log.py --set 3-kind:15300:300:const,ar,drift

With no ``--set`` (or with ``--rule``) it runs the sets below, fixed before their first run,
and says whether ``log="auto"`` passes the rule for a default: no set worse by two standard
errors, nor by a sign test. The last line printed is
one JSON object.
"""

from __future__ import annotations

import argparse
import json
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import binomtest

from regimetune.regimes import SERIES_STEP_S, OnlineRegimeDetector
from regimetune.regimes.metrics import tcpd_cover, tcpd_f1

sys.path.insert(0, str(Path(__file__).resolve().parent))
from series_step import ALL_KINDS, labelled_series


@dataclass(frozen=True)
class SeriesSet:
    name: str
    seed0: int
    n: int
    kinds: tuple[str, ...]

    @classmethod
    def parse(cls, text: str) -> SeriesSet:
        """``NAME:SEED0:N:KIND,KIND,...``"""
        name, seed0, n, kinds = text.split(":")
        ks = tuple(kinds.split(","))
        if unknown := set(ks) - set(ALL_KINDS):
            raise SystemExit(f"unknown kinds {sorted(unknown)} in {text!r}; known: {', '.join(ALL_KINDS)}")
        return cls(name, int(seed0), int(n), ks)


#: The sets the rule for a default reads (fixed before their first run).
RULE_SETS = tuple(
    SeriesSet.parse(s)
    for s in (
        "3-kind:27840:500:const,ar,drift",
        "5-kind:28340:500:const,ar,drift,wander,walk",
        "ramp,peak:28840:300:ramp,peak",
        "mult,gwalk:29140:400:mult,gwalk",
        "far:29540:100:far",
        "walk,wander:29640:300:walk,wander",
    )
)
GAIN_SET = "mult,gwalk"  # the set the option is for: it must gain by more than two standard errors


def score(seed: int, kinds: tuple[str, ...]) -> tuple[int, str, float, float, bool]:
    """One series' F1 + cover read raw and with ``log="auto"``, and whether that logged a column."""
    x, truth, kind = labelled_series(seed, kinds)
    ann = {"truth": truth}
    out = []
    for log in ((), "auto"):
        h, read = OnlineRegimeDetector().detect_series(x, step_s=SERIES_STEP_S, log=log)
        cps = sorted({c.at_window for c in h.changes if c.from_id is not None})
        out.append(tcpd_f1(ann, cps, len(x)) + tcpd_cover(ann, cps, len(x)))
    return seed, kind, out[0], out[1], bool(read.log)


def judge(s: SeriesSet, rows: list[tuple[int, str, float, float, bool]]) -> dict[str, Any]:
    d = np.array([auto - raw for _, _, raw, auto, _ in rows])
    gains, losses = int((d > 1e-12).sum()), int((d < -1e-12).sum())
    changed = gains + losses
    # one-sided: do the losses outnumber the gains by more than chance (p = 1/2) would?
    p_loss = binomtest(losses, changed, 0.5, alternative="greater").pvalue if changed else 1.0
    se = float(d.std(ddof=1) / np.sqrt(len(d))) if len(d) > 1 else 0.0
    per_kind = {k: float(np.mean([a - r for _, kk, r, a, _ in rows if kk == k])) for k in s.kinds}
    return {
        "set": s.name,
        "seeds": [s.seed0, s.seed0 + s.n - 1],
        "raw": float(np.mean([r for _, _, r, _, _ in rows])),
        "auto": float(np.mean([a for _, _, _, a, _ in rows])),
        "logged": sum(logged for *_, logged in rows),
        "diff": float(d.mean()),
        "se": se,
        "gains": gains,
        "losses": losses,
        "p_losses": float(p_loss),
        "per_kind": per_kind,
        "worst": sorted((round(float(v), 3), seed) for v, (seed, *_) in zip(d, rows, strict=True))[:3],
    }


def rule(results: list[dict[str, Any]], pooled: np.ndarray) -> dict[str, Any]:
    """The rule written before the runs: a default iff (1) the ``mult``, ``gwalk`` set gains
    by more than two standard errors, (2) the sets pooled do not fall, (3) no set fails: a
    set fails if its mean falls by more than two standard errors, or if its losses
    outnumber its gains with a one-sided sign-test p below 0.05."""
    failed = [r["set"] for r in results if r["diff"] < -2 * r["se"] or r["p_losses"] < 0.05]
    gain = [r for r in results if r["set"] == GAIN_SET]
    gains = bool(gain) and gain[0]["diff"] > 2 * gain[0]["se"]
    verdict = "default" if gains and pooled.mean() >= 0 and not failed else "option" if gains else "dropped"
    return {
        "failed_sets": failed,
        "gain_set_passes": gains,
        "pooled_falls": bool(pooled.mean() < 0),
        "verdict": verdict,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", action="append", default=[], type=SeriesSet.parse, help="NAME:SEED0:N:KINDS")
    ap.add_argument("--rule", action="store_true", help="the rule's sets and its verdict (the default)")
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    a.rule = a.rule or not a.set
    sets = [*(RULE_SETS if a.rule else ()), *a.set]
    results, pooled = [], []
    with ProcessPoolExecutor(a.workers) as pool:
        for s in sets:
            rows = list(pool.map(score, range(s.seed0, s.seed0 + s.n), [s.kinds] * s.n, chunksize=4))
            r = judge(s, rows)
            results.append(r)
            pooled += [auto - raw for _, _, raw, auto, _ in rows]
            print(
                f"{s.name:12} {r['seeds'][0]}-{r['seeds'][1]}  raw {r['raw']:.4f}  auto {r['auto']:.4f}  "
                f"diff {r['diff']:+.4f} (se {r['se']:.4f})  {r['gains']} gain / {r['losses']} lose "
                f"(sign p {r['p_losses']:.3f}), {r['logged']} logged  worst {r['worst']}",
                flush=True,
            )
    p = np.array(pooled)
    out: dict[str, Any] = {
        "sets": results,
        "pooled": [float(p.mean()), float(p.std(ddof=1) / np.sqrt(len(p))) if len(p) > 1 else 0.0],
    }
    if a.rule:
        out["rule"] = rule(results, p)
        print(f"pooled {out['pooled'][0]:+.4f} (se {out['pooled'][1]:.4f}); rule: {out['rule']}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
