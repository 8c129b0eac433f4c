"""Derivative-free optimisation for tuning: a POUNDERS-like least-squares solver (ask/tell and
as nevergrad's ``"Pounders"``), a declared-once search space, and ``minimize``, which runs any
registered optimizer with evaluations in any ``concurrent.futures`` executor.

Importing this package registers ``"Pounders"`` in ``ng.optimizers.registry``.
"""

from regimetune.tuner.optim.driver import (
    DEFAULT_BATCH_SIZE,
    OptimizationResult,
    available_optimizers,
    minimize,
)
from regimetune.tuner.optim.ngopt import FAILED_LOSS, Pounders
from regimetune.tuner.optim.pounders import PoundersSolver
from regimetune.tuner.optim.space import Param, Space

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "FAILED_LOSS",
    "OptimizationResult",
    "Param",
    "Pounders",
    "PoundersSolver",
    "Space",
    "available_optimizers",
    "minimize",
]
