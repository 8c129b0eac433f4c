"""What a tuning is asked to do: a small frozen config per objective, and the two options both
objectives share, the held-apart validation and the warm start.

>>> CacheConfig(budget=20).budget, RescaleConfig().budget
(20, 30)
>>> Validation().holdout_for("cache"), Validation().holdout_for("rescale"), Validation(holdout=0.2).holdout_for("rescale")
(0.25, 0.5, 0.2)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from regimetune.models import Evaluation, Objective, Policy, PolicyFile
from regimetune.models.errors import ConfigError
from regimetune.tuner.cache.cost import CostModel
from regimetune.tuner.cache.limits import KeyLimit
from regimetune.tuner.cache.sim import DEFAULT_VALUE_SIZE
from regimetune.tuner.objectives import CacheObjective
from regimetune.tuner.optim import DEFAULT_BATCH_SIZE, available_optimizers

DEFAULT_OPTIMIZER = "Pounders"
DEFAULT_SWEEP = (0.01, 0.05, 0.2, 1.0)
"""Miss costs (relative to the compute per request) of the cache's sensitivity sweep."""
DEFAULT_HOLDOUT = {Objective.CACHE: 0.25, Objective.RESCALE: 0.5}
"""Held apart by default: a quarter of the windows (the cache; every window held apart is one
the tuning does not see), as many campaigns as the tuning runs (the weights; campaigns are
new draws over the same windows, so only simulation time limits them)."""


def _search(budget: Any, optimizer: Any, seed: Any, batch_size: Any) -> None:
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise ConfigError(f"budget must be a positive number of evaluations, got {budget!r}")
    if optimizer not in available_optimizers():
        raise ConfigError(
            f"unknown optimizer {optimizer!r}; use 'Pounders' (default) or a nevergrad optimizer such as "
            "'TwoPointsDE', 'OnePlusOne', 'CMA', 'NGOpt'"
        )
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ConfigError(f"seed must be an integer >= 0, got {seed!r}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ConfigError(f"batch_size must be a positive integer, got {batch_size!r}")


@dataclass(frozen=True)
class CacheConfig:
    """Cache tuning: a key limit per regime and the two-phase switch point.

    ``objective`` states the efficiency target and the memory budget (a hard constraint),
    ``cost`` the store behind the cache, ``max_limit`` bounds every regime limit (keys, a
    fraction of the keyspace or ``"5%"``), ``sweep`` lists the miss costs the report
    re-scores the policies at. ``budget`` evaluations by ``optimizer``; ``batch_size``
    candidates per round, so ``seed`` gives the same result on any number of workers."""

    objective: CacheObjective = field(default_factory=CacheObjective)
    cost: CostModel = field(default_factory=CostModel)
    value_size: int = DEFAULT_VALUE_SIZE
    max_limit: KeyLimit | None = None
    sweep: tuple[float, ...] = DEFAULT_SWEEP
    budget: int = 80
    optimizer: str = DEFAULT_OPTIMIZER
    seed: int = 0
    batch_size: int = DEFAULT_BATCH_SIZE

    def __post_init__(self) -> None:
        _search(self.budget, self.optimizer, self.seed, self.batch_size)
        if not isinstance(self.objective, CacheObjective) or not isinstance(self.cost, CostModel):
            raise ConfigError("objective must be a CacheObjective and cost a CostModel")
        if isinstance(self.value_size, bool) or not isinstance(self.value_size, int) or self.value_size < 1:
            raise ConfigError(f"value_size must be a positive number of bytes, got {self.value_size!r}")
        if self.max_limit is not None and not isinstance(self.max_limit, KeyLimit):
            object.__setattr__(self, "max_limit", KeyLimit.of(self.max_limit))
        sweep = tuple(self.sweep)
        if any(isinstance(m, bool) or not isinstance(m, int | float) or not m >= 0 for m in sweep):
            raise ConfigError(f"the sweep's miss costs must be numbers >= 0, got {self.sweep!r}")
        object.__setattr__(self, "sweep", tuple(float(m) for m in sweep))


@dataclass(frozen=True)
class RescaleConfig:
    """Rescale tuning: the Pufferscale weights W_L, W_D, W_T per regime.

    Each regime's windows are replayed as campaigns of ``warmup`` + ``operations``
    rescalings between ``min_servers`` and ``max_servers`` (a :class:`CampaignSpec` tuned
    directly states its own); every candidate runs the same ``n_seeds`` campaigns, shrunk
    towards the incumbent by ``shrinkage``. ``budget`` evaluations per regime by
    ``optimizer``, after the presets."""

    budget: int = 30
    optimizer: str = DEFAULT_OPTIMIZER
    seed: int = 0
    batch_size: int = DEFAULT_BATCH_SIZE
    n_seeds: int = 8
    shrinkage: float = 0.05
    min_servers: int = 4
    max_servers: int = 32
    warmup: int = 5
    operations: int = 15

    def __post_init__(self) -> None:
        _search(self.budget, self.optimizer, self.seed, self.batch_size)
        for name in ("n_seeds", "min_servers", "max_servers", "operations"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ConfigError(f"{name} must be a positive integer, got {v!r}")
        if isinstance(self.warmup, bool) or not isinstance(self.warmup, int) or self.warmup < 0:
            raise ConfigError(f"warmup must be an integer >= 0, got {self.warmup!r}")
        if self.min_servers >= self.max_servers:
            raise ConfigError(f"need min_servers < max_servers, got {self.min_servers}, {self.max_servers}")
        if not (
            isinstance(self.shrinkage, int | float) and math.isfinite(self.shrinkage) and self.shrinkage >= 0
        ):
            raise ConfigError(f"shrinkage must be a number >= 0, got {self.shrinkage!r}")

    def get_params(self) -> dict[str, Any]:
        return asdict(self)


def _as_file(policies: PolicyFile | Mapping[int, Policy] | None) -> PolicyFile | None:
    if policies is None or isinstance(policies, PolicyFile):
        return policies
    try:
        return PolicyFile(regimes={int(r): Policy.model_validate(p) for r, p in policies.items()})
    except (AttributeError, TypeError, ValueError) as exc:
        raise ConfigError(f"policies are a PolicyFile or a mapping of regime id to Policy: {exc}") from exc


@dataclass(frozen=True)
class Validation:
    """The held-apart check a tuned policy must pass to replace ``current``.

    ``holdout`` is the share of the data the tuning does not see (None: the objective's
    default, :data:`DEFAULT_HOLDOUT`): windows for the cache, campaigns for the weights.
    ``current`` is the policy in force per regime (a :class:`PolicyFile`, or a mapping of
    regime id to :class:`Policy` as the service stores them; a regime it lacks runs its
    default); a tuned policy replaces it only if it scores better (lower) on the held-apart
    data by more than ``min_gain`` (relative). Without ``current`` the cache's tuned policy
    is adopted when it fits the memory budget, and tuned weights must beat the best preset."""

    holdout: float | None = None
    current: PolicyFile | None = None
    min_gain: float = 0.0

    def __post_init__(self) -> None:
        h = self.holdout
        if h is not None and not (not isinstance(h, bool) and isinstance(h, int | float) and 0.0 <= h <= 0.5):
            raise ConfigError(f"holdout must be a share of the data in [0, 0.5], got {h!r}")
        if not (
            isinstance(self.min_gain, int | float) and math.isfinite(self.min_gain) and self.min_gain >= 0
        ):
            raise ConfigError(f"min_gain must be a number >= 0, got {self.min_gain!r}")
        object.__setattr__(self, "current", _as_file(self.current))

    def holdout_for(self, objective: Objective | str) -> float:
        return DEFAULT_HOLDOUT[Objective(objective)] if self.holdout is None else float(self.holdout)


@dataclass(frozen=True)
class WarmStart:
    """Where a re-tuning starts: a regime's last tuned ``policies`` and the ``evaluations``
    of the searches that found them (keyed by the regimes each search tuned: all of them at
    once for the cache, one per search for the weights). ``objective`` names the tuning they
    came from (None: policies alone, whose cache and weights are both meaningful).

    Build one with :meth:`of` from a :class:`TuningResult`, a :class:`PolicyFile` or the
    service's mapping of regime id to :class:`Policy`."""

    policies: PolicyFile
    evaluations: Mapping[tuple[int, ...], Sequence[Evaluation]] = field(default_factory=dict)
    objective: Objective | None = None

    @classmethod
    def of(cls, source: Any) -> WarmStart:
        if isinstance(source, WarmStart):
            return source
        as_warm = getattr(source, "as_warm_start", None)
        if callable(as_warm):
            out = as_warm()
            if isinstance(out, WarmStart):
                return out
        pf = _as_file(source)
        if pf is None:
            raise ConfigError(
                "warm_start is a TuningResult, a PolicyFile or a mapping of regime id to Policy"
            )
        return cls(policies=pf)

    def policy_for(self, regime_id: int) -> Policy:
        """The regime's last tuned policy, or the default of the tuning it came from."""
        return self.policies.regimes.get(regime_id, self.policies.default)

    def evaluations_for(self, regimes: Sequence[int]) -> list[Evaluation]:
        """Past evaluations of a search over exactly ``regimes`` (the weights: one regime), or
        of any search (the cache: the parameters name their regimes)."""
        key = tuple(regimes)
        if key in self.evaluations:
            return list(self.evaluations[key])
        if len(key) == 1:
            return []
        return [e for evals in self.evaluations.values() for e in evals]


__all__ = [
    "DEFAULT_HOLDOUT",
    "DEFAULT_OPTIMIZER",
    "DEFAULT_SWEEP",
    "CacheConfig",
    "RescaleConfig",
    "Validation",
    "WarmStart",
]
