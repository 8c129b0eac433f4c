"""Objectives of cache tuning as residual vectors, so least-squares solvers (POUNDERS) apply;
``value`` is the scalar view (sum of squares) for any other optimizer.

The user states a target and a budget (the paper's two-policy figures by default: 96%
efficiency with 7.6% of the unlimited cache's memory) and how much each matters:

* ``efficiency``: the shortfall below the target, in units of the allowed loss
  ``1 - target``, times ``steepness`` (a miss by a tenth of the allowance costs as much as
  a cache at its whole memory budget);
* ``memory_excess``: time-averaged memory above the budget, in units of the budget, times
  ``steepness``;
* ``memory``: time-averaged memory in units of the budget, times ``thrift``: a gentle pull
  down that keeps the optimizer saving memory once both constraints hold.

Each residual is multiplied by its user weight.

>>> obj = CacheObjective()
>>> obj.residuals(efficiency=0.96, memory_fraction=0.038).round(3).tolist()
[0.0, 0.0, 0.15]
>>> obj.residuals(efficiency=0.956, memory_fraction=0.076).round(3).tolist()
[1.0, 0.0, 0.3]
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from regimetune.models.errors import ConfigError
from regimetune.tuner.cache.sim import CacheResult

RESIDUAL_NAMES = ("efficiency", "memory_excess", "memory")


@dataclass(frozen=True, slots=True)
class CacheObjective:
    """Efficiency at least ``efficiency_target`` with time-averaged memory at most
    ``memory_budget`` (a fraction of the unlimited cache's), weighted by preference."""

    efficiency_target: float = 0.96
    memory_budget: float = 0.076
    efficiency_weight: float = 1.0
    memory_weight: float = 1.0
    steepness: float = 10.0
    thrift: float = 0.3

    def __post_init__(self) -> None:
        def num(name: str) -> float:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
                raise ConfigError(f"{name} must be a finite number, got {v!r}")
            return float(v)

        if not 0.0 < num("efficiency_target") < 1.0:
            raise ConfigError(f"efficiency target must be in (0, 1), got {self.efficiency_target}")
        if not 0.0 < num("memory_budget") <= 1.0:
            raise ConfigError(f"memory budget must be in (0, 1], got {self.memory_budget}")
        for name in ("efficiency_weight", "memory_weight", "steepness", "thrift"):
            if num(name) < 0:
                raise ConfigError(f"{name} must be >= 0, got {getattr(self, name)}")

    def get_params(self) -> dict[str, float]:
        return asdict(self)

    def residuals(self, *, efficiency: float, memory_fraction: float) -> np.ndarray:
        """Residuals for a policy's efficiency and its memory as a fraction of the unlimited
        cache's (both time-averaged)."""
        shortfall = max(0.0, self.efficiency_target - efficiency) / (1.0 - self.efficiency_target)
        mem = memory_fraction / self.memory_budget
        return np.array(
            [
                self.efficiency_weight * self.steepness * shortfall,
                self.memory_weight * self.steepness * max(0.0, mem - 1.0),
                self.memory_weight * self.thrift * mem,
            ]
        )

    def of(self, result: CacheResult, unlimited: CacheResult) -> np.ndarray:
        """Residuals of ``result``, with memory relative to ``unlimited`` on the same trace."""
        return self.residuals(
            efficiency=result.efficiency, memory_fraction=memory_fraction(result, unlimited)
        )

    @staticmethod
    def value(residuals: np.ndarray) -> float:
        """The scalar view: the sum of squared residuals."""
        r = np.asarray(residuals, dtype=np.float64)
        return float(np.dot(r, r))

    def feasible(self, result: CacheResult, unlimited: CacheResult) -> bool:
        """Both the efficiency target and the memory budget are met."""
        return (
            result.efficiency >= self.efficiency_target
            and memory_fraction(result, unlimited) <= self.memory_budget
        )


def memory_fraction(result: CacheResult, unlimited: CacheResult) -> float:
    """Time-averaged memory of ``result`` as a fraction of the unlimited cache's."""
    return result.mean_bytes / unlimited.mean_bytes if unlimited.mean_bytes > 0 else 0.0


__all__ = ["RESIDUAL_NAMES", "CacheObjective", "memory_fraction"]
