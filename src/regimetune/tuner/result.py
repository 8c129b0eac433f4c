"""What a tuning returns, whichever objective it tuned: :class:`TuningResult`."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from regimetune.models import Evaluation, Objective, Policy, PolicyFile
from regimetune.tuner.config import WarmStart
from regimetune.tuner.workload import NO_REGIME

if TYPE_CHECKING:
    from regimetune.tuner.cache.session import CacheDetail
    from regimetune.tuner.rescale.tuning import WeightTuningReport


@dataclass(frozen=True)
class Search:
    """One optimizer run: the regimes it tuned (all at once for the cache, one for the
    weights) and its evaluations in the order they were told.

    >>> s = Search(regimes=(0,), optimizer="Pounders", evaluations=(
    ...     Evaluation(params={"x": 1.0}, value=3.0), Evaluation(params={"x": 2.0}, error="boom"),
    ...     Evaluation(params={"x": 3.0}, value=1.0)))
    >>> s.best_so_far()
    [3.0, 3.0, 1.0]
    """

    regimes: tuple[int, ...]
    optimizer: str
    evaluations: tuple[Evaluation, ...]

    def best_so_far(self) -> list[float]:
        """The convergence history: the least value found after each evaluation (``inf``
        until one succeeds)."""
        values = [math.inf if e.value is None or e.failed else float(e.value) for e in self.evaluations]
        return np.minimum.accumulate(values).tolist() if values else []


@dataclass(frozen=True)
class Verdict:
    """The held-apart validation of one regime's tuned policy: ``adopted`` (it replaces the
    current one), why, and the scores there (lower is better; None when not measured)."""

    adopted: bool
    reason: str
    tuned_held_out: float | None = None
    current_held_out: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "adopted": self.adopted,
            "reason": self.reason,
            "tuned_held_out": _finite(self.tuned_held_out),
            "current_held_out": _finite(self.current_held_out),
        }


def _finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


@dataclass(frozen=True, eq=False)
class TuningResult:
    """The outcome of :func:`regimetune.tuner.tune`, for either objective.

    - ``policy_file``: what to use per regime (and by default): the tuned policy where its
      verdict adopted it, else the current one (or, for the weights, the best preset);
    - ``candidates``: what the tuning found per regime, adopted or not (:data:`NO_REGIME`:
      the default, for the windows before the first regime);
    - ``searches``: the optimizer runs, whose evaluations give the convergence history;
    - ``verdicts``: the held-apart validation per regime;
    - ``baselines``: the comparison table, a row of figures per policy (tuned first);
    - ``binds``: which constraints bound, with notes in plain words;
    - ``report``: all of it as JSON data (what ``tune --json`` prints and a job stores);
    - ``detail``: the objective's own figures (the cache's simulations, or the weights'
      per-regime reports).

    Nothing here is printed or written: the command line and the reports do that."""

    objective: Objective
    policy_file: PolicyFile
    candidates: Mapping[int, Policy]
    searches: tuple[Search, ...]
    verdicts: Mapping[int, Verdict]
    baselines: Mapping[str, Mapping[str, float]]
    binds: Mapping[str, Any]
    report: dict[str, Any] = field(default_factory=dict)
    detail: CacheDetail | Mapping[int, WeightTuningReport] | None = None

    @property
    def evaluations(self) -> tuple[Evaluation, ...]:
        """Every evaluation of every search, in order."""
        return tuple(e for s in self.searches for e in s.evaluations)

    @property
    def push(self) -> bool:
        """Whether any regime's tuned policy passed validation (the service applies those)."""
        return any(v.adopted for v in self.verdicts.values())

    @property
    def tuned_file(self) -> PolicyFile:
        """The candidates as a policy file (what the tuning found, whatever the verdicts)."""
        return self.policy_file.model_copy(
            update={
                "regimes": {r: p for r, p in self.candidates.items() if r != NO_REGIME},
                "default": self.candidates.get(NO_REGIME, self.policy_file.default),
            }
        )

    def as_warm_start(self) -> WarmStart:
        """This result as the starting point of a re-tuning of the same workload."""
        return WarmStart(
            policies=self.tuned_file,
            evaluations={s.regimes: s.evaluations for s in self.searches},
            objective=self.objective,
        )


__all__ = ["Search", "TuningResult", "Verdict"]
