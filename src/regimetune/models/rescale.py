"""The rescaling vocabulary: buckets, Pufferscale weights, rescale operations and plans."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, model_validator

_FROZEN = ConfigDict(frozen=True, extra="forbid")
Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]
NonNegative = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class Bucket(BaseModel):
    """A collection of objects that moves as one: its load (requests, any unit) and size
    (bytes)."""

    model_config = _FROZEN
    id: int = Field(ge=0)
    load: NonNegative
    size: NonNegative


class PufferscaleWeights(BaseModel):
    """W_L, W_D, W_T of the Pufferscale heuristic (Cheriere et al. 2020, Eq. 17-20):
    all > 0 and max(W_L, W_D) = 1."""

    model_config = _FROZEN
    w_load: Positive = 1.0
    w_data: Positive = 1.0
    w_time: Positive = 1.0

    @model_validator(mode="after")
    def _convention(self) -> PufferscaleWeights:
        if abs(max(self.w_load, self.w_data) - 1.0) > 1e-9:
            raise ValueError(
                f"max(W_L, W_D) must be 1 (paper convention), got W_L={self.w_load}, W_D={self.w_data}"
            )
        return self

    @classmethod
    def normalised(cls, w_load: float, w_data: float, w_time: float) -> PufferscaleWeights:
        """Scale (W_L, W_D) so the larger is 1; W_T is kept as given."""
        m = max(w_load, w_data)
        if not m > 0:
            raise ValueError("W_L and W_D cannot both be zero")
        return cls(w_load=w_load / m, w_data=w_data / m, w_time=w_time)

    @classmethod
    def preset(cls, name: str) -> PufferscaleWeights:
        try:
            return PRESETS[name.upper()]
        except KeyError:
            raise ValueError(f"unknown weight preset {name!r}; choose from {sorted(PRESETS)}") from None


# The paper names its strategies by the objectives they weigh; an objective left out gets a
# weight small enough not to matter (the paper requires every weight > 0).
_EPS = 1e-3
PRESETS: dict[str, PufferscaleWeights] = {
    "L": PufferscaleWeights(w_load=1.0, w_data=_EPS, w_time=_EPS),
    "LT": PufferscaleWeights(w_load=1.0, w_data=_EPS, w_time=1.0),
    "DT": PufferscaleWeights(w_load=_EPS, w_data=1.0, w_time=1.0),
    "LDT": PufferscaleWeights(w_load=1.0, w_data=1.0, w_time=1.0),
}


class RescaleKind(StrEnum):
    COMMISSION = "commission"
    DECOMMISSION = "decommission"


class RescaleOperation(BaseModel):
    """Commission ``count`` new servers, or decommission the servers in ``servers``."""

    model_config = _FROZEN
    kind: RescaleKind
    count: int = Field(default=0, ge=0)
    servers: tuple[int, ...] = ()

    @model_validator(mode="after")
    def _shape(self) -> RescaleOperation:
        if self.kind is RescaleKind.COMMISSION and (self.count < 1 or self.servers):
            raise ValueError("a commission names a count >= 1 of new servers and no server ids")
        if self.kind is RescaleKind.DECOMMISSION:
            if not self.servers:
                raise ValueError("a decommission names the servers to remove")
            if len(set(self.servers)) != len(self.servers):
                raise ValueError("a decommission names each server once")
        return self


class Migration(BaseModel):
    model_config = _FROZEN
    bucket: int
    source: int
    target: int
    bytes: NonNegative


class PlanMetrics(BaseModel):
    """Objectives of a plan beside their targets (Eq. 2-4, 8-11). Durations in seconds."""

    model_config = _FROZEN
    l_max: float
    l_target: float
    d_max: float
    d_target: float
    t_max: float
    t_target: float
    t_lower_bound: float | None = None
    bytes_moved: float = 0.0


class RescalePlan(BaseModel):
    """The placement after an operation (bucket id -> server id), the migrations that get
    there, and the plan's metrics."""

    model_config = _FROZEN
    placement: dict[int, int]
    migrations: tuple[Migration, ...]
    metrics: PlanMetrics


__all__ = [
    "PRESETS",
    "Bucket",
    "Migration",
    "PlanMetrics",
    "PufferscaleWeights",
    "RescaleKind",
    "RescaleOperation",
    "RescalePlan",
]
