"""Tuning W_L, W_D, W_T on a campaign (paper VIII-C: "fine-tune these weights using training
runs in an outer loop ... with derivative-free solvers such as POUNDERS").

The search space keeps the paper's convention max(W_L, W_D) = 1 by construction:
``log10_ratio = log10(W_L / W_D)`` in [-3, 3] (the larger of the two is 1) and
``log10_wt = log10(W_T)`` in [-3, 2]. Every candidate runs the same campaigns (same seeds:
common random numbers), so differences come from the weights alone. The presets are
evaluated first and handed to the optimizer as a warm start, so the result is never worse
than the best preset on the tuning seeds.
"""

from __future__ import annotations

import concurrent.futures as cf
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from regimetune.models.errors import ConfigError
from regimetune.models.rescale import PRESETS, PufferscaleWeights
from regimetune.tuner.rescale.campaign import CampaignSpec, simulate_campaign

RATIO_BOUNDS = (-3.0, 3.0)
WT_BOUNDS = (-3.0, 2.0)


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
    """Residuals of a weight setting over fixed campaign seeds; picklable for process pools."""

    def __init__(self, campaign: CampaignSpec, seeds: Sequence[int]) -> None:
        self.campaign = campaign
        self.seeds = tuple(seeds)

    def __call__(self, params: dict[str, float]) -> np.ndarray:
        w = weights_from_params(params)
        parts = [simulate_campaign(w, self.campaign, seed=s).residuals for s in self.seeds]
        return np.concatenate(parts) / math.sqrt(len(self.seeds))


@dataclass(frozen=True, slots=True)
class WeightTuningReport:
    """What the tuning found beside the presets, on the same seeds (values are sums of squared
    residuals; lower is better)."""

    weights: PufferscaleWeights
    value: float
    preset_values: dict[str, float]
    components: dict[str, float]
    preset_components: dict[str, dict[str, float]]
    n_evaluations: int
    optimizer: str

    @property
    def best_preset(self) -> str:
        return min(self.preset_values, key=self.preset_values.__getitem__)

    @property
    def improvement(self) -> float:
        """Relative gain over the best preset (0.1 = 10% lower objective)."""
        best = self.preset_values[self.best_preset]
        return (best - self.value) / best if best > 0 else 0.0


def _components(campaign: CampaignSpec, w: PufferscaleWeights, seeds: Sequence[int]) -> dict[str, float]:
    runs = [simulate_campaign(w, campaign, seed=s).components for s in seeds]
    return {k: float(np.mean([r[k] for r in runs])) for k in runs[0]}


def _space():
    from regimetune.tuner.optim import Param, Space

    return Space(
        [
            Param("log10_ratio", *RATIO_BOUNDS, init=0.0),
            Param("log10_wt", *WT_BOUNDS, init=0.0),
        ]
    )


def tune_weights(
    campaign: CampaignSpec,
    *,
    budget: int = 40,
    optimizer: str = "Pounders",
    executor: cf.Executor | None = None,
    seed: int = 0,
    n_seeds: int = 2,
) -> tuple[PufferscaleWeights, WeightTuningReport]:
    """Tune the weights on ``campaign`` with :func:`regimetune.tuner.optim.minimize`.

    ``budget`` counts new evaluations after the four presets; each evaluation runs the
    campaign for ``n_seeds`` seeds (``seed``, ``seed + 1``, ...).
    """
    from regimetune.tuner.optim import minimize

    if n_seeds < 1:
        raise ConfigError(f"n_seeds must be >= 1, got {n_seeds}")
    campaign.validate()
    seeds = [seed + k for k in range(n_seeds)]
    objective = CampaignObjective(campaign, seeds)
    warm = [(params_from_weights(w), objective(params_from_weights(w))) for w in PRESETS.values()]
    preset_values = {name: float(r @ r) for name, (_, r) in zip(PRESETS, warm, strict=True)}
    res = minimize(
        objective,
        _space(),
        budget=budget,
        optimizer=optimizer,
        residuals=True,
        executor=executor,
        warm_start=warm,
        seed=seed,
    )
    best = weights_from_params(res.best_params)
    report = WeightTuningReport(
        weights=best,
        value=float(res.best_value),
        preset_values=preset_values,
        components=_components(campaign, best, seeds),
        preset_components={n: _components(campaign, w, seeds) for n, w in PRESETS.items()},
        n_evaluations=res.n_evaluations + len(warm),
        optimizer=res.optimizer,
    )
    return best, report
