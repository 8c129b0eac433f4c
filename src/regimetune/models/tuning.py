"""Tuning runs and the decision log."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from regimetune.models.policy import Policy

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class Objective(StrEnum):
    CACHE = "cache"
    RESCALE = "rescale"


class RunStatus(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    INTERRUPTED = "interrupted"  # the service stopped while it ran; it can be restarted


class Evaluation(BaseModel):
    """One candidate evaluated by an optimizer: its parameters, residuals (least-squares
    objectives), scalar value, or the error that made it fail."""

    model_config = _FROZEN
    params: dict[str, float]
    residuals: tuple[float, ...] | None = None
    value: float | None = None
    error: str | None = None

    @property
    def failed(self) -> bool:
        return self.error is not None


class TuningRun(BaseModel):
    """A tuning session over a trace: what was asked and what it found."""

    model_config = _FROZEN
    id: str
    objective: Objective
    optimizer: str
    budget: int = Field(ge=1)
    status: RunStatus = RunStatus.PENDING
    trace: str | None = None
    n_evaluations: int = 0
    best_value: float | None = None
    policies: dict[int, Policy] = {}
    report: dict[str, Any] = {}
    error: str | None = None


class PushOutcome(StrEnum):
    NOT_PUSHED = "not_pushed"  # mode off/recommend, or paused
    PENDING = "pending"
    DELIVERED = "delivered"
    FAILED = "failed"  # given up after retries; the last known-good policy stays in force
    REFUSED = "refused"  # the backend refused it for good (a 4xx); later versions go on
    SUPERSEDED = "superseded"  # a newer version was delivered before this one could be
    HELD = "held"  # the flap budget held the push back


class Decision(BaseModel):
    """One entry of the decision log: why a policy version was chosen and what became of it.
    ``policy`` is the policy chosen (also when it was only recommended, without a version)."""

    model_config = _FROZEN
    id: int | None = None
    at: float
    regime_from: int | None
    regime_to: int
    inputs: dict[str, float] = {}
    policy_version: int | None = None
    policy: Policy | None = None
    score: float | None = None
    outcome: PushOutcome = PushOutcome.NOT_PUSHED
    detail: str = ""


__all__ = ["Decision", "Evaluation", "Objective", "PushOutcome", "RunStatus", "TuningRun"]
