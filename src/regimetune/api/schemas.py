"""Wire models of the REST API (requests and responses that are not domain types)."""

from __future__ import annotations

from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from regimetune.models import CachePolicy, Objective, PufferscaleWeights

_IN = ConfigDict(extra="forbid", frozen=True)
T = TypeVar("T")
Finite = Annotated[float, Field(allow_inf_nan=False)]
NonNegFinite = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class ErrorOut(BaseModel):
    """Every 4xx/5xx body: ``detail`` says why (a sentence, or FastAPI's list of field errors)."""

    detail: str | list[dict[str, Any]]


class CountsIn(BaseModel):
    """Per-key request counts of one window, as parallel arrays (keys are unsigned 64-bit)."""

    model_config = _IN
    keys: list[Annotated[int, Field(ge=0, le=2**64 - 1)]]
    reads: list[Annotated[int, Field(ge=0, le=2**32 - 1)]]
    writes: list[Annotated[int, Field(ge=0, le=2**32 - 1)]] | None = None


class EventsIn(BaseModel):
    """Raw events as parallel arrays: time (s), key, op (0 read, 1 write), size (bytes)."""

    model_config = _IN
    ts: list[NonNegFinite]
    key: list[Annotated[int, Field(ge=0, le=2**64 - 1)]]
    op: list[Literal[0, 1]] | None = None
    size: list[Annotated[int, Field(ge=0, le=2**32 - 1)]] | None = None


class BucketsIn(BaseModel):
    """Per-bucket load (requests) and size (bytes) in the window."""

    model_config = _IN
    ids: list[Annotated[int, Field(ge=0, le=2**31 - 1)]]
    load: list[NonNegFinite]
    bytes: list[NonNegFinite]


class IngestIn(BaseModel):
    """One batch from a storage daemon: counts or events (or both) for the window starting at
    ``window_start`` (seconds on the daemon's clock), and optionally per-bucket figures."""

    model_config = _IN
    window_start: NonNegFinite
    counts: CountsIn | None = None
    events: EventsIn | None = None
    buckets: BucketsIn | None = None


class IngestAck(BaseModel):
    """The batch is durable under sequence number ``seq`` (``duplicate``: it was already,
    under the same Idempotency-Key, and was not applied again)."""

    seq: int
    rows: int
    windows_closed: int = Field(description="Windows this batch closed (0 when applied in the background).")
    duplicate: bool = False


class CurrentRegime(BaseModel):
    regime_id: int | None
    kind: str = Field(
        "",
        description="level (a level it holds), transition (it moves, a decline), or empty before the first",
    )
    since: float | None = None
    since_window: int | None = None
    windows: int = 0
    detector: str


class SegmentOut(BaseModel):
    regime_id: int
    start_window: int
    end_window: int
    start: float
    end: float
    summary: dict[str, float] = {}
    kind: str = Field("", description="level, transition, or empty for a segment stored before kinds were")


class WindowOut(BaseModel):
    index: int
    start: float
    length: float
    requests: int
    regime_id: int | None


class Page(BaseModel, Generic[T]):
    items: list[T]
    total: int
    offset: int
    limit: int


class PolicyIn(BaseModel):
    """An operator-set policy for one regime; every knob is checked against the hard bounds."""

    model_config = _IN
    cache: CachePolicy = CachePolicy()
    weights: PufferscaleWeights = PufferscaleWeights()
    score: Finite | None = None


class EngineStatus(BaseModel):
    mode: Literal["off", "recommend", "auto"]
    paused: bool
    current_regime: int | None
    windows: int
    last_seq: int = Field(description="Sequence number of the last durable batch.")
    applied_seq: int = Field(description="Sequence number of the last batch applied to windows and regimes.")
    detector: str
    aggregator: str
    push_backend: str
    outbox_pending: int


class EngineModeIn(BaseModel):
    model_config = _IN
    mode: Literal["off", "recommend", "auto"]


class TuningJobIn(BaseModel):
    """Tune on a recorded trace on the server (``trace``: a path under one of the
    configured ``tuning.trace_dirs``)."""

    model_config = _IN
    trace: Annotated[str, Field(min_length=1, max_length=4096)]
    objective: Objective = Objective.CACHE
    budget: Annotated[int, Field(ge=1, le=10_000)] | None = None
    optimizer: Annotated[str, Field(min_length=1, max_length=64)] = "auto"
    apply: bool = False


class Health(BaseModel):
    """``checks``: what must hold for readiness; ``detail``: what an operator should know
    (e.g. ``telemetry``: stale when no daemon sent a batch for a while, the policy held)."""

    status: Literal["ok", "unavailable"]
    checks: dict[str, bool] = {}
    detail: dict[str, str] = {}


__all__ = [
    "BucketsIn",
    "CountsIn",
    "CurrentRegime",
    "EngineModeIn",
    "EngineStatus",
    "ErrorOut",
    "EventsIn",
    "Health",
    "IngestAck",
    "IngestIn",
    "Page",
    "PolicyIn",
    "SegmentOut",
    "TuningJobIn",
    "WindowOut",
]
