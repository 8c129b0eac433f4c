"""Tuning W_L, W_D, W_T on a campaign (paper VIII-C: "fine-tune these weights using training
runs in an outer loop ... with derivative-free solvers such as POUNDERS").

The search space keeps the paper's convention max(W_L, W_D) = 1 by construction:
``log10_ratio = log10(W_L / W_D)`` in [-3, 3] (the larger of the two is 1) and
``log10_wt = log10(W_T)`` in [-3, 2]. Every candidate runs the same campaigns (same seeds:
common random numbers), so differences come from the weights alone. The presets are
evaluated first and handed to the optimizer as a warm start, so the result is never worse
than the best preset on the tuning seeds.

A few campaigns reward noise: a 13 % gain on two training campaigns turned into a 13 % loss
on held-out ones (issue 14). So the tuning (1) scores every candidate on ``n_seeds``
training campaigns, (2) shrinks towards the incumbent (the best, on the training campaigns,
of the presets and the current weights): a penalty of
``shrinkage * f(incumbent) * sum((dp / width)^2)`` over the search space's coordinates, so a
far move must pay for itself, and (3) adopts the tuned weights only if they beat the
incumbent on ``n_held_out`` campaigns never used in tuning; else the report keeps the
incumbent and says why, with the comparison's paired standard error (a gain inside it is
noise: where the weights barely matter, as on volatile decommissions, whose duration sits at
its lower bound, it takes tens of campaigns to tell a 1 % gain). A re-tuning starts from
the weights an earlier one found and its best evaluations (a warm start), so it needs fewer
evaluations.

On decommissions the search's W_T > 1 half is a cliff, not a lever: Eq. 17-18 then blend
the targets towards the initial L_i, D_i, which a decommission makes smaller than L_t, D_t,
so the remaining servers are asked to hold less than their share of whichever of load and
data has weight 1 (a target no placement meets);
W_T = 2 multiplies the objective of volatile decommissions by about 3.7. The weights cannot
say "relax load and data balance" on a decommission, only shift weight between them.
"""

from __future__ import annotations

import concurrent.futures as cf
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from regimetune.models import Evaluation
from regimetune.models.errors import ConfigError
from regimetune.models.rescale import PRESETS, PufferscaleWeights
from regimetune.tuner.rescale.campaign import CampaignSpec, simulate_campaign

if TYPE_CHECKING:
    from regimetune.tuner.config import RescaleConfig
    from regimetune.tuner.optim import Space

RATIO_BOUNDS = (-3.0, 3.0)
WT_BOUNDS = (-3.0, 2.0)
_WIDTH = {"log10_ratio": RATIO_BOUNDS[1] - RATIO_BOUNDS[0], "log10_wt": WT_BOUNDS[1] - WT_BOUNDS[0]}
CURRENT = "current"
"""The incumbent's name when the current weights beat every preset on the training campaigns."""
MAX_SEEDS = 10_000
"""Campaign seeds of one tuning lie in ``[seed * MAX_SEEDS, (seed + 1) * MAX_SEEDS)``: the
training ones first, the held-out ones from the middle on, so the two sets never meet."""


def weights_from_params(params: dict[str, float]) -> PufferscaleWeights:
    """Map the search space's point to weights (max(W_L, W_D) = 1 holds by construction).

    >>> w = weights_from_params({"log10_ratio": -1.0, "log10_wt": 0.0})
    >>> (w.w_load, w.w_data, w.w_time)
    (0.1, 1.0, 1.0)
    """
    r = float(params["log10_ratio"])
    return PufferscaleWeights(
        w_load=10.0 ** min(r, 0.0), w_data=10.0 ** min(-r, 0.0), w_time=10.0 ** float(params["log10_wt"])
    )


def params_from_weights(w: PufferscaleWeights) -> dict[str, float]:
    """Inverse of :func:`weights_from_params` (clipped to the search bounds)."""
    r = math.log10(w.w_load / w.w_data)
    return {
        "log10_ratio": min(max(r, RATIO_BOUNDS[0]), RATIO_BOUNDS[1]),
        "log10_wt": min(max(math.log10(w.w_time), WT_BOUNDS[0]), WT_BOUNDS[1]),
    }


class CampaignObjective:
    """Residuals of a weight setting over fixed campaign seeds; picklable for process pools.

    With ``anchor`` (a point of the search space) and ``penalty`` > 0, the residuals end with
    ``sqrt(penalty) * (p - anchor) / width`` per coordinate: the shrinkage towards the
    incumbent."""

    def __init__(
        self,
        campaign: CampaignSpec,
        seeds: Sequence[int],
        *,
        anchor: dict[str, float] | None = None,
        penalty: float = 0.0,
    ) -> None:
        self.campaign = campaign
        self.seeds = tuple(seeds)
        self.anchor = anchor
        self.penalty = penalty

    def __call__(self, params: dict[str, float]) -> np.ndarray:
        w = weights_from_params(params)
        parts = [simulate_campaign(w, self.campaign, seed=s).residuals for s in self.seeds]
        r = np.concatenate(parts) / math.sqrt(len(self.seeds))
        return np.concatenate([r, self.shrink(params)])

    def shrink(self, params: dict[str, float]) -> np.ndarray:
        """The penalty residuals of ``params`` (empty without an anchor)."""
        if self.anchor is None or self.penalty <= 0:
            return np.zeros(0)
        scale = math.sqrt(self.penalty)
        return np.array([scale * (params[k] - self.anchor[k]) / _WIDTH[k] for k in sorted(_WIDTH)])

    def value(self, w: PufferscaleWeights) -> float:
        """Mean campaign value of ``w`` on these seeds (no penalty)."""
        return float(np.mean(self.values(w)))

    def values(self, w: PufferscaleWeights) -> np.ndarray:
        """The value of ``w`` on each of these seeds' campaigns, in seed order (no penalty)."""
        return np.array([simulate_campaign(w, self.campaign, seed=s).value for s in self.seeds])


@dataclass(frozen=True, slots=True)
class WeightTuningReport:
    """What the tuning found beside the presets (values are sums of squared residuals, mean
    over campaigns; lower is better).

    ``weights``/``value`` are what to use: the tuned ``candidate`` if ``adopted``, else the
    ``incumbent``; ``reason`` says which and why. ``*_values`` are on the training campaigns,
    ``held_out_*`` on campaigns the tuning never saw."""

    weights: PufferscaleWeights
    value: float
    preset_values: dict[str, float]
    components: dict[str, float]
    preset_components: dict[str, dict[str, float]]
    n_evaluations: int
    optimizer: str
    candidate: PufferscaleWeights
    candidate_value: float
    incumbent: str
    incumbent_weights: PufferscaleWeights
    adopted: bool
    reason: str
    held_out_value: float
    candidate_held_out_value: float
    held_out_preset_values: dict[str, float]
    train_seeds: tuple[int, ...] = field(default=())
    held_out_seeds: tuple[int, ...] = field(default=())
    evaluations: tuple[Evaluation, ...] = field(default=())
    incumbent_held_out_value: float = math.nan
    held_out_se: float = math.nan
    """Standard error of the candidate's paired difference with the incumbent on the
    held-out campaigns, relative to the incumbent's value (:func:`paired_se`)."""

    @property
    def best_preset(self) -> str:
        return min(self.preset_values, key=self.preset_values.__getitem__)

    @property
    def improvement(self) -> float:
        """Relative gain of the chosen weights over the best preset on the training campaigns
        (0.1 = 10% lower objective)."""
        best = self.preset_values[self.best_preset]
        return (best - self.value) / best if best > 0 else 0.0

    @property
    def held_out_improvement(self) -> float:
        """Relative gain of the chosen weights over the best preset on held-out campaigns."""
        best = min(self.held_out_preset_values.values())
        return (best - self.held_out_value) / best if best > 0 else 0.0


def _components(campaign: CampaignSpec, w: PufferscaleWeights, seeds: Sequence[int]) -> dict[str, float]:
    runs = [simulate_campaign(w, campaign, seed=s).components for s in seeds]
    return {k: float(np.mean([r[k] for r in runs])) for k in runs[0]}


def _space(init: dict[str, float] | None = None) -> Space:
    from regimetune.tuner.optim import Param, Space

    at = init or {"log10_ratio": 0.0, "log10_wt": 0.0}
    return Space(
        [
            Param("log10_ratio", *RATIO_BOUNDS, init=at["log10_ratio"]),
            Param("log10_wt", *WT_BOUNDS, init=at["log10_wt"]),
        ]
    )


def campaign_seeds(seed: int, n_train: int, n_held_out: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Disjoint training and held-out campaign seeds of a tuning run with ``seed``.

    >>> campaign_seeds(1, 2, 2)
    ((10000, 10001), (15000, 15001))
    """
    half = MAX_SEEDS // 2
    if not (1 <= n_train <= half and 0 <= n_held_out <= half) or seed < 0:
        raise ConfigError(
            f"need seed >= 0, 1 <= n_seeds <= {half} and 0 <= n_held_out <= {half}, "
            f"got {seed}, {n_train}, {n_held_out}"
        )
    base = seed * MAX_SEEDS
    return tuple(range(base, base + n_train)), tuple(range(base + half, base + half + n_held_out))


def paired_se(candidate: np.ndarray, incumbent: np.ndarray) -> float:
    """Standard error of the mean of ``candidate - incumbent`` over the same campaigns,
    relative to the incumbent's mean (nan with fewer than two campaigns).

    >>> round(paired_se(np.array([1.0, 2.0, 3.0]), np.array([1.0, 1.0, 1.0])), 3)
    0.577
    """
    n = len(candidate)
    base = float(np.mean(incumbent)) if n else 0.0
    if n < 2 or base <= 0:
        return math.nan
    return float(np.std(np.asarray(candidate) - np.asarray(incumbent), ddof=1) / math.sqrt(n) / base)


def held_out_gate(
    candidate: float,
    incumbent: float,
    *,
    name: str,
    n_campaigns: int,
    min_gain: float = 0.0,
    se: float = math.nan,
) -> tuple[bool, str]:
    """Whether tuned weights scoring ``candidate`` on held-out campaigns replace the
    incumbent ``name`` scoring ``incumbent`` there, and why (lower is better). They must be
    lower by more than ``min_gain`` (relative). ``se`` (relative, :func:`paired_se`) is the
    noise of the comparison on those campaigns, stated beside the difference so a reader
    sees whether it is within noise.

    >>> held_out_gate(2.0, 2.5, name="LDT", n_campaigns=8)[0]
    True
    >>> held_out_gate(2.3, 2.0, name="LDT", n_campaigns=8)[1]
    'kept LDT: the tuned weights scored 2.3 on 8 held-out campaigns against its 2 (+15.0%)'
    >>> held_out_gate(1.98, 2.0, name="LDT", n_campaigns=64, se=0.004)[1]
    "adopted: the tuned weights scored 1.98 on 64 held-out campaigns against LDT's 2 (-1.0% ± 0.4%)"
    """
    if n_campaigns == 0:
        return True, "adopted without validation (no held-out campaigns)"
    rel = (candidate - incumbent) / incumbent if incumbent > 0 else 0.0
    diff = f"{100 * rel:+.1f}%" + (f" ± {100 * se:.1f}%" if math.isfinite(se) else "")
    if candidate < incumbent * (1.0 - min_gain):
        return True, (
            f"adopted: the tuned weights scored {candidate:.4g} on {n_campaigns} held-out campaigns "
            f"against {name}'s {incumbent:.4g} ({diff})"
        )
    return False, (
        f"kept {name}: the tuned weights scored {candidate:.4g} on {n_campaigns} held-out campaigns "
        f"against its {incumbent:.4g} ({diff})"
    )


def tune_campaign(
    campaign: CampaignSpec,
    config: RescaleConfig,
    *,
    n_held_out: int,
    current: PufferscaleWeights | None = None,
    starts: Sequence[PufferscaleWeights] = (),
    past: Sequence[Evaluation] = (),
    min_gain: float = 0.0,
    executor: cf.Executor | None = None,
    on_evaluation: Callable[[Evaluation], None] | None = None,
) -> WeightTuningReport:
    """Tune the weights on ``campaign`` with :func:`regimetune.tuner.optim.minimize` (one
    regime's part of :func:`regimetune.tuner.tune`).

    Every candidate runs the campaign for ``config.n_seeds`` training seeds, penalised by
    ``config.shrinkage`` towards the incumbent: the best, on those seeds, of the presets and
    the ``current`` weights. The presets (and ``current``) are told to the optimizer first;
    ``config.budget`` counts the evaluations after them. A warm start's ``starts`` (a
    previous tuning's weights) and the best of its ``past`` evaluations are evaluated first
    within the budget, and the search starts from the first. The tuned weights replace the
    incumbent only if they beat it on ``n_held_out`` other seeds by more than ``min_gain``
    (:func:`held_out_gate`); else the incumbent stays, and the report says why.
    """
    from regimetune.tuner.optim import minimize

    campaign.validate()
    train, held = campaign_seeds(config.seed, config.n_seeds, n_held_out)
    plain = CampaignObjective(campaign, train)
    preset_res = {name: plain(params_from_weights(w)) for name, w in PRESETS.items()}
    preset_values = {name: float(r @ r) for name, r in preset_res.items()}
    known = dict(preset_values)
    if current is not None:
        cur_res = plain(params_from_weights(current))
        known[CURRENT] = float(cur_res @ cur_res)
    inc_name = min(known, key=known.__getitem__)
    inc_w, inc_value = (current if inc_name == CURRENT else PRESETS[inc_name]), known[inc_name]
    assert inc_w is not None  # CURRENT is known only with current weights
    anchor = params_from_weights(inc_w)
    objective = CampaignObjective(campaign, train, anchor=anchor, penalty=config.shrinkage * inc_value)
    told = [(params_from_weights(w), preset_res[n]) for n, w in PRESETS.items()]
    if current is not None:
        told.append((params_from_weights(current), cur_res))
    warm = [(p, np.concatenate([r, objective.shrink(p)])) for p, r in told]
    initial = _starts(starts, past, known=[p for p, _ in warm], limit=max(config.budget - 1, 0))
    space = _space(init=initial[0] if initial else None)
    res = minimize(
        objective,
        space,
        budget=config.budget,
        optimizer=config.optimizer,
        residuals=True,
        executor=executor,
        batch_size=config.batch_size,
        initial=initial,
        warm_start=warm,
        seed=config.seed,
        on_evaluation=on_evaluation,
    )
    cand = weights_from_params(res.best_params)
    cand_value = plain.value(cand)
    validate = CampaignObjective(campaign, held)
    held_preset_runs = {n: validate.values(w) for n, w in PRESETS.items()} if held else {}
    held_presets = {n: float(np.mean(v)) for n, v in held_preset_runs.items()}
    cand_runs = validate.values(cand) if held else np.zeros(0)
    inc_runs = held_preset_runs[inc_name] if inc_name in held_preset_runs else validate.values(inc_w)
    cand_held = float(np.mean(cand_runs)) if held else math.nan
    inc_held = float(np.mean(inc_runs)) if held else math.nan
    se = paired_se(cand_runs, inc_runs)
    adopted, reason = held_out_gate(
        cand_held, inc_held, name=inc_name, n_campaigns=len(held), min_gain=min_gain, se=se
    )
    chosen = cand if adopted else inc_w
    return WeightTuningReport(
        weights=chosen,
        value=cand_value if adopted else inc_value,
        preset_values=preset_values,
        components=_components(campaign, chosen, train),
        preset_components={n: _components(campaign, w, train) for n, w in PRESETS.items()},
        n_evaluations=res.n_evaluations + len(warm),
        optimizer=res.optimizer,
        candidate=cand,
        candidate_value=cand_value,
        incumbent=inc_name,
        incumbent_weights=inc_w,
        adopted=adopted,
        reason=reason,
        held_out_value=cand_held if adopted else inc_held,
        candidate_held_out_value=cand_held,
        held_out_preset_values=held_presets,
        train_seeds=train,
        held_out_seeds=held,
        incumbent_held_out_value=inc_held,
        held_out_se=se,
        evaluations=tuple(
            Evaluation(params=p, residuals=tuple(float(x) for x in r), value=float(r @ r)) for p, r in warm
        )
        + res.evaluations,
    )


def _starts(
    starts: Sequence[PufferscaleWeights],
    past: Sequence[Evaluation],
    *,
    known: Sequence[dict[str, float]],
    limit: int,
) -> list[dict[str, float]]:
    """A warm start's points to evaluate first: its weights, then its three best evaluations
    (re-run: their campaigns were another trace's), none already told, at most ``limit``."""
    ranked = sorted((e for e in past if not e.failed and e.value is not None), key=lambda e: e.value or 0.0)
    out: list[dict[str, float]] = []
    picks = [params_from_weights(w) for w in starts]
    picks += [{k: float(e.params[k]) for k in _WIDTH} for e in ranked[:3] if set(_WIDTH) <= set(e.params)]
    for p in picks:
        q = {
            "log10_ratio": min(max(p["log10_ratio"], RATIO_BOUNDS[0]), RATIO_BOUNDS[1]),
            "log10_wt": min(max(p["log10_wt"], WT_BOUNDS[0]), WT_BOUNDS[1]),
        }
        if not any(_close(q, k) for k in [*known, *out]):
            out.append(q)
    return out[:limit]


def _close(a: dict[str, float], b: dict[str, float], tol: float = 0.02) -> bool:
    """Within ``tol`` of each other on both axes (as a share of the axis): a point so close
    to one already evaluated would spend an evaluation on noise."""
    return all(abs(a[k] - b[k]) < tol * _WIDTH[k] for k in _WIDTH)


def at_bounds(w: PufferscaleWeights) -> list[str]:
    """Which of the search's bounds ``w`` sits on (the weights' only constraints).

    >>> at_bounds(PufferscaleWeights(w_load=1.0, w_data=1e-3, w_time=100.0))
    ['W_L / W_D at 10^3', 'W_T at 10^2']
    """
    p = params_from_weights(w)
    out = []
    for name, key, (lo, hi) in (("W_L / W_D", "log10_ratio", RATIO_BOUNDS), ("W_T", "log10_wt", WT_BOUNDS)):
        for bound in (lo, hi):
            if abs(p[key] - bound) < 1e-6:
                out.append(f"{name} at 10^{bound:g}")
    return out
