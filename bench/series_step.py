"""How a generic series is read: the seconds one row stands for (``SERIES_STEP_S``).

A series (``detect --series``, :func:`regimetune.regimes.detect_series`) has no window
length of its own when its time column holds a row index or yearly, monthly or daily dates;
the detector's durations (``min_regime_s`` 600 s, ``regime_s`` 1800 s) then count rows
through the seconds a row is read as. This script compares step lengths
on labelled series that are neither TCPD's (which score, never tune) nor our trace
generator's: ruptures' piecewise-constant signals (``ruptures.pw_constant``), 100-800 rows,
1-3 columns, 1-5 changes, level shifts of 1-10 in Gaussian noise of sd 0.5-3 around a level
of 20, in three kinds of noise real metrics have:

* ``const``: white noise;
* ``ar``: AR(1) noise (phi 0.5): a metric that remembers its last value;
* ``drift``: white noise plus a slow linear drift of up to a few noise sds over the series;
and four kinds that are not in the default set (which chose the defaults; ``--kinds`` adds
them), for what real series do between and at their changes:

* ``wander``: white noise plus a random walk whose steps have a tenth of the noise's sd (a
  local-level model; its first differences are mostly the white noise's, so it reads as
  AR(1) with a coefficient near 0);
* ``walk``: a random walk whose steps have half the noise's sd, and no white noise: a price
  between its jumps (river's TCPD prices and most of its other series read as AR(1) with a
  coefficient about 1);
* ``ramp``: white noise, and each change a straight ramp from one level to the next over
  20-60 % of the segment it leads into (a load that declines or grows over minutes, not at
  once); both ends of a ramp are change points: a level, a transition, a level;
* ``peak``: white noise, and each change a rise and a fall over 20-60 % of the segment it
  leads into, half each: from the old level to a peak as far beyond the new level as the
  new level is from the old, then down to the new level (a crowd that builds and decays, a
  rally and a crash); the start, the peak and the end are change points.
* ``mult`` and ``gwalk``: ``const`` and ``walk`` made multiplicative, ``20 exp((x - 20) /
  20)``: the noise and the shifts are relative to the level as the additive kinds' are at
  20 (a rate, a latency or a price, whose noise grows with its level), and the levels span
  up to an order of magnitude;
* ``far``: ``const`` plus 10^4, thousands of noise sds from zero (a temperature in kelvin,
  bytes in use): regimes do not depend on where zero is, so it should score as ``const``.

Every step with either noise model, the defaults, and ruptures PELT (the TCPD bench's
setting: l2 on the z-scored series, ``3 d log n``) are scored with TCPD's F1 (margin 5) and
cover, one annotator. A setting replaces the defaults only if its F1 + cover beats theirs by
more than two standard errors of the paired difference over the series.

    nice .venv/bin/python bench/series_step.py                        # 300 series, ~40 min
    nice .venv/bin/python bench/series_step.py --series 30 --steps 10 60

The last line printed is one JSON object: per method, the mean F1 and cover, overall and
per kind of noise, and its paired difference to the defaults (mean, standard error); the
best setting and whether the defaults are kept.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import ruptures as rpt

from regimetune.regimes.metrics import tcpd_cover, tcpd_f1

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tcpd import ours, pelt, standardise

KINDS = ("const", "ar", "drift")
ALL_KINDS = (*KINDS, "wander", "walk", "ramp", "peak", "mult", "gwalk", "far")
WALK_SD = {"wander": 0.1, "walk": 0.5}  # the random walk's step sd, as a share of the noise's sd
MULTIPLICATIVE = {"mult": "const", "gwalk": "walk"}  # a kind, and the additive kind it is made of
FAR = 1e4  # the offset of ``far``: thousands of noise sds from zero
DEFAULTS = "ours (defaults)"


def labelled_series(seed: int, kinds: tuple[str, ...] = KINDS) -> tuple[np.ndarray, list[int], str]:
    """One piecewise-constant series (or with ramps between its levels), its change rows and
    its kind of noise (``kinds[seed % len(kinds)]``; the same seed draws the same signal and
    noise under every kind)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(100, 800))
    d = int(rng.choice([1, 1, 2, 3]))
    k = int(rng.integers(1, 6))
    kind = kinds[seed % len(kinds)]
    if kind in MULTIPLICATIVE:
        x, changes, _ = labelled_series(seed, (MULTIPLICATIVE[kind],))
        return 20.0 * np.exp((x - 20.0) / 20.0), changes, kind
    if kind == "far":
        x, changes, _ = labelled_series(seed, ("const",))
        return x + FAR, changes, kind
    sd = float(rng.choice([0.5, 1.0, 2.0, 3.0]))
    signal, bkps = rpt.pw_constant(n, d, k, noise_std=None, seed=int(rng.integers(0, 2**31)))
    noise = rng.normal(0.0, sd, (n, d))
    if kind == "ar":
        for i in range(1, n):
            noise[i] += 0.5 * noise[i - 1]
    if kind == "walk":
        noise[:] = 0.0  # (drawn all the same, so every kind of a seed draws the same numbers)
    x = signal.reshape(n, d) + noise + 20.0
    if kind == "drift":
        x += np.outer(np.arange(n), rng.normal(0.0, 2 * sd / n, d))
    if kind in WALK_SD:
        x += np.cumsum(rng.normal(0.0, WALK_SD[kind] * sd, (n, d)), axis=0)
    changes = [int(b) for b in bkps if b < n]
    if kind not in ("ramp", "peak"):
        return x, changes, kind
    share = rng.uniform(0.2, 0.6)  # drawn last: the other kinds draw what they drew before
    levels = signal.reshape(n, d)
    ends = []
    for i, b in enumerate(changes):
        after = changes[i + 1] if i + 1 < len(changes) else n
        length = max(2, int(share * (after - b)))  # the ramp's rows, its last at the new level
        old, new = levels[b - 1], levels[b]
        if kind == "ramp":
            path = old + (new - old) * (np.arange(1, length + 1)[:, None] / length)
        else:
            up = length // 2  # rows of the rise (length >= 2: at least one each way); the peak is its last
            top = new + (new - old)
            rise = old + (top - old) * (np.arange(1, up + 1)[:, None] / up)
            fall = top + (new - top) * (np.arange(1, length - up + 1)[:, None] / (length - up))
            path = np.vstack([rise, fall])
            ends.append(b + up)
        x[b : b + length] += path - levels[b : b + length]
        ends.append(b + length)
    return x, sorted(set(changes) | {e for e in ends if e < n}), kind


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--series", type=int, default=300)
    ap.add_argument("--seed0", type=int, default=0, help="first series' seed (0-299 chose the defaults)")
    ap.add_argument("--kinds", default=",".join(KINDS), help="comma-separated, of " + ", ".join(ALL_KINDS))
    ap.add_argument("--steps", type=float, nargs="+", default=[10.0, 30.0, 40.0, 50.0, 60.0, 75.0, 90.0])
    a = ap.parse_args()
    methods = {"pelt": lambda x: pelt(standardise(x))} | {
        f"ours@{s:g}s": functools.partial(ours, step_s=s) for s in a.steps
    }
    methods[DEFAULTS] = ours
    kinds = tuple(a.kinds.split(","))
    if unknown := set(kinds) - set(ALL_KINDS):
        ap.error(f"unknown kinds: {sorted(unknown)}")
    scores: dict[str, dict[str, list[tuple[float, float]]]] = {m: {k: [] for k in kinds} for m in methods}
    for seed in range(a.seed0, a.seed0 + a.series):
        x, truth, kind = labelled_series(seed, kinds)
        for name, fn in methods.items():
            cps = fn(x)
            ann = {"truth": truth}
            scores[name][kind].append((tcpd_f1(ann, cps, len(x)), tcpd_cover(ann, cps, len(x))))
    out: dict[str, Any] = {"series": a.series, "methods": {}}
    paired = {m: np.array([f + c for k in kinds for f, c in per[k]]) for m, per in scores.items()}
    for name, per in scores.items():
        every = [v for k in kinds for v in per[k]]
        row = {"f1": float(np.mean([f for f, _ in every])), "cover": float(np.mean([c for _, c in every]))}
        row |= {
            k: [float(np.mean([f for f, _ in per[k]])), float(np.mean([c for _, c in per[k]]))] for k in kinds
        }
        diff = paired[name] - paired[DEFAULTS]
        row["vs_defaults"] = [float(diff.mean()), float(diff.std(ddof=1) / np.sqrt(len(diff)))]
        out["methods"][name] = row
        per_kind = "  ".join(f"{k} {row[k][0]:.2f}/{row[k][1]:.2f}" for k in kinds)
        d, se = row["vs_defaults"]
        print(
            f"{name:16} F1 {row['f1']:.3f} cover {row['cover']:.3f}   {per_kind}   F1+cover vs defaults {d:+.3f} (se {se:.3f})",
            flush=True,
        )
    # a setting replaces the defaults only if it beats them by more than two standard errors of
    # the paired difference: a constant is not moved for a difference the series' noise makes
    ours_rows = {m: r for m, r in out["methods"].items() if m.startswith("ours@")}
    best = max(ours_rows, key=lambda m: ours_rows[m]["vs_defaults"][0])
    d, se = ours_rows[best]["vs_defaults"]
    out["best"] = best
    out["defaults_kept"] = not d > 2.0 * se
    print(
        f"best: {best} ({d:+.3f}, se {se:.3f}); "
        + ("defaults kept" if out["defaults_kept"] else "beats the defaults")
    )
    print(json.dumps(out))


if __name__ == "__main__":
    main()
