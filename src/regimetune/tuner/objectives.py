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
  down that keeps the optimizer saving memory once both constraints hold (it also gives a
  local solver the slope it needs to reach the budget);
* ``efficiency_loss``: the loss below the unlimited cache's efficiency, in units of the
  allowed loss, times ``reach`` (small by default: a larger pull upset POUNDERS' models).
  The session ranks policies within the budget by this loss before their value (the
  paper's framing is efficiency *at* a memory budget: by value alone the tuner traded
  efficiency down to the target to save memory nobody asked it to).

Efficiency is relative to the unlimited cache's on the same windows. The memory budget is
also a hard constraint of the session (see ``tuner.cache.session``): the residual only guides
the optimizer towards it.

Each residual is multiplied by its user weight.

>>> obj = CacheObjective()
>>> obj.residuals(efficiency=0.96, memory_fraction=0.038).round(3).tolist()
[0.0, 0.0, 0.15, 0.01]
>>> obj.residuals(efficiency=0.956, memory_fraction=0.076).round(3).tolist()
[1.0, 0.0, 0.3, 0.011]
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from regimetune.models.errors import ConfigError
from regimetune.tuner.cache.sim import CacheResult

RESIDUAL_NAMES = ("efficiency", "memory_excess", "memory", "efficiency_loss")


@dataclass(frozen=True, slots=True)
class CacheObjective:
    """Efficiency (relative to the unlimited cache's) at least ``efficiency_target`` with time-averaged memory at most
    ``memory_budget`` (a fraction of the unlimited cache's), weighted by preference."""

    efficiency_target: float = 0.96
    memory_budget: float = 0.076
    efficiency_weight: float = 1.0
    memory_weight: float = 1.0
    steepness: float = 10.0
    thrift: float = 0.3
    reach: float = 0.01

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
        for name in ("efficiency_weight", "memory_weight", "steepness", "thrift", "reach"):
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
                self.efficiency_weight
                * self.reach
                * max(0.0, 1.0 - efficiency)
                / (1.0 - self.efficiency_target),
            ]
        )

    def of(
        self, result: CacheResult, unlimited: CacheResult, windows: np.ndarray | None = None
    ) -> np.ndarray:
        """Residuals of ``result``, with memory relative to ``unlimited`` on the same trace,
        counted over the windows ``windows`` selects (a boolean mask; all by default)."""
        return self.residuals(
            efficiency=relative_efficiency(result, unlimited, windows),
            memory_fraction=memory_fraction(result, unlimited, windows),
        )

    def fits_memory(
        self, result: CacheResult, unlimited: CacheResult, windows: np.ndarray | None = None
    ) -> bool:
        """The hard constraint: time-averaged memory within the budget."""
        return memory_fraction(result, unlimited, windows) <= self.memory_budget

    @staticmethod
    def value(residuals: np.ndarray) -> float:
        """The scalar view: the sum of squared residuals."""
        r = np.asarray(residuals, dtype=np.float64)
        return float(np.dot(r, r))

    def feasible(
        self, result: CacheResult, unlimited: CacheResult, windows: np.ndarray | None = None
    ) -> bool:
        """Both the efficiency target and the memory budget are met."""
        return relative_efficiency(result, unlimited, windows) >= self.efficiency_target and self.fits_memory(
            result, unlimited, windows
        )


def mean_keys_over(result: CacheResult, windows: np.ndarray | None) -> float:
    """Time-averaged cached keys over the windows ``windows`` selects (all by default)."""
    if windows is None or result.window_time_s is None:
        return result.mean_keys
    t = result.window_time_s[windows]
    return float(np.dot(result.window_keys[windows], t) / t.sum()) if t.sum() > 0 else 0.0


def memory_fraction(result: CacheResult, unlimited: CacheResult, windows: np.ndarray | None = None) -> float:
    """Time-averaged memory of ``result`` as a fraction of the unlimited cache's (over the
    windows ``windows`` selects, all by default)."""
    unl = mean_keys_over(unlimited, windows) * unlimited.value_size
    return mean_keys_over(result, windows) * result.value_size / unl if unl > 0 else 0.0


def relative_efficiency(
    result: CacheResult, unlimited: CacheResult, windows: np.ndarray | None = None
) -> float:
    """Efficiency as a fraction of the unlimited cache's on the same windows (the paper's "96%
    efficiency": the unlimited cache pays its cold misses too)."""
    base = efficiency_over(unlimited, windows)
    return efficiency_over(result, windows) / base if base > 0 else 0.0


def efficiency_over(result: CacheResult, windows: np.ndarray | None = None) -> float:
    """Efficiency (nominal over simulated time) over the windows ``windows`` selects."""
    if windows is None or result.window_time_s is None:
        return result.efficiency
    t = result.window_time_s[windows]
    return float(np.count_nonzero(windows) * result.window_s / t.sum()) if t.sum() > 0 else 1.0


__all__ = [
    "RESIDUAL_NAMES",
    "CacheObjective",
    "efficiency_over",
    "mean_keys_over",
    "relative_efficiency",
    "memory_fraction",
]
