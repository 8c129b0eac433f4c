"""The policy pushed to a storage service: cache thresholds and rescaling weights."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from regimetune.models.rescale import PufferscaleWeights

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class CacheMode(StrEnum):
    UNLIMITED = "unlimited"
    LRU = "lru"  # a static n-key LRU
    TWO_PHASE = "two_phase"  # Mantle: unlimited until H keys (or a time), then an n-key LRU


class CachePolicy(BaseModel):
    """Cache thresholds of a Mantle-style cache tier (Sevilla et al.).

    ``limit_keys`` is n, the LRU limit; ``high_watermark_keys`` is H, the cache size at which
    a two-phase policy switches from unlimited growth to the n-key limit; ``switch_time_s``
    switches at a time instead (e.g. the start of a detected regime).
    """

    model_config = _FROZEN
    mode: CacheMode = CacheMode.UNLIMITED
    limit_keys: Annotated[int, Field(ge=1)] | None = None
    high_watermark_keys: Annotated[int, Field(ge=1)] | None = None
    switch_time_s: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None

    @model_validator(mode="after")
    def _shape(self) -> CachePolicy:
        if self.mode is CacheMode.UNLIMITED and (
            self.limit_keys or self.high_watermark_keys or self.switch_time_s is not None
        ):
            raise ValueError("an unlimited cache takes no thresholds")
        if self.mode is not CacheMode.UNLIMITED and self.limit_keys is None:
            raise ValueError(f"a {self.mode.value} cache needs limit_keys")
        if self.mode is CacheMode.LRU and (self.high_watermark_keys or self.switch_time_s is not None):
            raise ValueError("a static LRU cache takes no switch point")
        if self.mode is CacheMode.TWO_PHASE:
            if (self.high_watermark_keys is None) == (self.switch_time_s is None):
                raise ValueError(
                    "a two-phase cache switches at high_watermark_keys or at switch_time_s, not both"
                )
        return self


PolicySource = Literal["default", "tuned", "operator"]


class Policy(BaseModel):
    """What the service decides for a regime (``regime_id`` None: regardless of regime)."""

    model_config = _FROZEN
    regime_id: Annotated[int, Field(ge=0)] | None = None
    cache: CachePolicy = CachePolicy()
    weights: PufferscaleWeights = PufferscaleWeights()
    source: PolicySource = "default"
    score: float | None = None


class PolicyVersion(BaseModel):
    """A policy as stored and pushed: versions increase by one with every decision and are
    the idempotency key of a push."""

    model_config = _FROZEN
    version: Annotated[int, Field(ge=1)]
    policy: Policy
    created_at: float


class PolicyFile(BaseModel):
    """What ``regimetune tune --out`` writes and the service loads: a policy per regime id, a
    default for regimes without one, and optionally the detector state the ids refer to."""

    model_config = _FROZEN
    format_version: Literal[1] = 1
    trace: str | None = None
    default: Policy = Policy()
    regimes: dict[int, Policy] = {}
    detector_state: dict[str, Any] | None = None


__all__ = ["CacheMode", "CachePolicy", "Policy", "PolicyFile", "PolicySource", "PolicyVersion"]
