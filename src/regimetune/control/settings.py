"""The settings the application layer reads: the sections of the service's one ``Settings``
(:mod:`regimetune.api.settings`) that configure the online engine, ingest and tuning jobs,
and :class:`ControlSettings`, the view of the whole that :mod:`regimetune.control` takes.

>>> EngineSettings(detector={"max_regimes": 8}).detector.max_regimes, IngestSettings().allowed_lateness_windows
(8, 3)
"""

from __future__ import annotations

from typing import Annotated, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, model_validator

from regimetune.models.windows import DEFAULT_WINDOW_S
from regimetune.regimes.params import DetectorParams

_SECTION = ConfigDict(extra="forbid", frozen=True)


class IngestSettings(BaseModel):
    """``apply``: ``async`` acknowledges a batch once it is durable and applies it to the
    windows and the detector in a background thread (in sequence order; at most
    ``queue_batches`` waiting, then ingest blocks); ``sync`` applies it before answering.
    Every ``snapshot_every_s`` (0: never) the windowing state is saved and the batches it
    covers are pruned once older than ``keep_batches_s`` (until then a resend with the same
    Idempotency-Key is still recognised): the store no longer grows with every batch.
    Event time: a window stays open for batches (of any daemon) while it is at most
    ``allowed_lateness_windows`` behind the newest window reported; older batches, and batches
    dated more than ``max_future_s`` after the service's clock, are refused before storing."""

    model_config = _SECTION
    max_body_bytes: Annotated[int, Field(ge=1024)] = 64 * 1024 * 1024
    max_keys_per_batch: Annotated[int, Field(ge=1)] = 4_000_000
    apply: Literal["sync", "async"] = "async"
    queue_batches: Annotated[int, Field(ge=1)] = 256
    snapshot_every_s: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 300.0
    keep_batches_s: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 3600.0
    allowed_lateness_windows: Annotated[int, Field(ge=0, le=10_000)] = 3
    max_future_s: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 3600.0


class BoundsSettings(BaseModel):
    """Hard bounds on every knob: no policy outside them is stored or pushed."""

    model_config = _SECTION
    limit_keys: tuple[int, int] = (1, 100_000_000)
    high_watermark_keys: tuple[int, int] = (1, 1_000_000_000)
    switch_time_s: tuple[float, float] = (0.0, 30 * 86400.0)
    w_load: tuple[float, float] = (1e-6, 1.0)
    w_data: tuple[float, float] = (1e-6, 1.0)
    w_time: tuple[float, float] = (1e-6, 1e6)

    @model_validator(mode="after")
    def _ordered(self) -> BoundsSettings:
        for name in type(self).model_fields:
            lo, hi = getattr(self, name)
            if not lo <= hi:
                raise ValueError(f"bounds.{name}: lower bound {lo} above upper bound {hi}")
        return self


class EngineSettings(BaseModel):
    """The online loop. ``mode``: ``off`` (ingest and store only), ``recommend`` (detect,
    decide and log, push nothing), ``auto`` (push every decision). When no batch arrived
    for ``stale_after_windows`` windows (service clock), telemetry is stale: the policy in
    force is held, and the metric, the decision log and ``/readyz`` say so. ``detector``
    holds the regime detector's own parameters (:class:`~regimetune.regimes.DetectorParams`,
    validated by it; an unknown key is refused); its ``window_s`` defaults to the engine's."""

    model_config = _SECTION
    # tune_unknown_regimes: on a change to a regime without a stored policy, start a tuning
    # job on tuning_trace (a trace file path) that applies its policies; the safe default
    # stays in force meanwhile.
    mode: Literal["off", "recommend", "auto"] = "auto"
    paused: bool = False
    window_s: Annotated[float, Field(gt=0)] = DEFAULT_WINDOW_S
    n_buckets: Annotated[int, Field(ge=0)] = 0
    detector: DetectorParams = DetectorParams()
    tune_unknown_regimes: bool = False
    tuning_trace: str | None = None
    bounds: BoundsSettings = BoundsSettings()
    stale_after_windows: Annotated[float, Field(gt=0, allow_inf_nan=False)] = 5.0


_EXECUTOR = r"^(process|thread|(tcp|tls|ws|wss|inproc|ucx)://\S+)$"
"""A local pool, or a Dask scheduler address."""


class TuningSettings(BaseModel):
    """Tuning jobs: a local process pool by default. ``executor`` is ``process``,
    ``thread``, or a Dask scheduler address (``tcp://host:8786``: evaluations run on that
    cluster; needs the ``dask`` extra). ``trace_dirs`` lists the directories a job may read a
    server-side trace from (none: server-side paths are refused). ``upload_dir`` holds each
    store's uploads and checkpoints (default: the system's temp dir)."""

    model_config = _SECTION
    executor: Annotated[str, Field(pattern=_EXECUTOR)] = "process"
    max_workers: Annotated[int, Field(ge=1)] = 1
    trace_dirs: tuple[str, ...] = ()
    upload_dir: str | None = None
    max_upload_bytes: Annotated[int, Field(ge=1)] = 512 * 1024 * 1024
    budget: Annotated[int, Field(ge=1)] = 40


class PushBudget(Protocol):
    """The one push setting the engine reads: the flap budget."""

    @property
    def max_per_hour(self) -> int | None: ...


class ControlSettings(Protocol):
    """What :mod:`regimetune.control` reads of the service's settings (the api's
    ``Settings`` is one): its sections, the flap budget, and the policy file to start from
    with the rule for a detector state that disagrees with the store's."""

    @property
    def engine(self) -> EngineSettings: ...

    @property
    def ingest(self) -> IngestSettings: ...

    @property
    def tuning(self) -> TuningSettings: ...

    @property
    def push(self) -> PushBudget: ...

    @property
    def policy_file(self) -> str | None: ...

    @property
    def detector_from(self) -> Literal["refuse", "policy-file", "store"]: ...


__all__ = [
    "BoundsSettings",
    "ControlSettings",
    "EngineSettings",
    "IngestSettings",
    "PushBudget",
    "TuningSettings",
]
