"""The shared vocabulary of regimetune: domain types and errors. No I/O, no imports of
the project's other packages."""

from regimetune.models.errors import (
    BackendError,
    BoundsError,
    ConfigError,
    ConflictError,
    InfeasibleError,
    InputError,
    NotFoundError,
    RegimetuneError,
    TraceFormatError,
    TuningError,
)
from regimetune.models.events import NO_BUCKET, NO_LABEL, EventBatch, Op, RequestEvent
from regimetune.models.policy import CacheMode, CachePolicy, Policy, PolicyFile, PolicySource, PolicyVersion
from regimetune.models.regimes import Regime, RegimeChange, RegimeSegment
from regimetune.models.rescale import (
    PRESETS,
    Bucket,
    Migration,
    PlanMetrics,
    PufferscaleWeights,
    RescaleKind,
    RescaleOperation,
    RescalePlan,
)
from regimetune.models.tuning import Decision, Evaluation, Objective, PushOutcome, RunStatus, TuningRun
from regimetune.models.windows import (
    DEFAULT_WINDOW_S,
    SCALAR_COLUMNS,
    SERIES_STEP_S,
    WindowFrame,
    WindowStats,
)

__all__ = [
    "NO_BUCKET",
    "NO_LABEL",
    "PRESETS",
    "SCALAR_COLUMNS",
    "SERIES_STEP_S",
    "BackendError",
    "BoundsError",
    "Bucket",
    "CacheMode",
    "CachePolicy",
    "ConfigError",
    "ConflictError",
    "Decision",
    "Evaluation",
    "EventBatch",
    "InfeasibleError",
    "InputError",
    "Migration",
    "NotFoundError",
    "Objective",
    "Op",
    "PlanMetrics",
    "Policy",
    "PolicyFile",
    "PolicySource",
    "PolicyVersion",
    "PufferscaleWeights",
    "PushOutcome",
    "Regime",
    "RegimeChange",
    "RegimeSegment",
    "RegimetuneError",
    "RequestEvent",
    "RescaleKind",
    "RescaleOperation",
    "RescalePlan",
    "RunStatus",
    "TraceFormatError",
    "TuningError",
    "TuningRun",
    "WindowFrame",
    "WindowStats",
    "DEFAULT_WINDOW_S",
]
