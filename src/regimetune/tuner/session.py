"""The one way to tune: :func:`tune`, for either objective, from a notebook as from the
command line or the service.

>>> from regimetune.collectors import GeneratorConfig, generate
>>> from regimetune.regimes import OnlineRegimeDetector
>>> from regimetune.tuner import CacheConfig, Workload, tune
>>> run = generate(GeneratorConfig(duration_s=600, seed=1, preset="classic"))  # ten minutes:
>>> work = Workload.from_batches(run, detector=OnlineRegimeDetector(min_regime_s=300))  # 5-min regimes
>>> res = tune(work, "cache", config=CacheConfig(budget=6), workers=0)
>>> res.objective.value, len(res.evaluations) <= 6, sorted(res.policy_file.regimes) == list(work.regime_ids)
('cache', True, True)
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor
from typing import Any

from regimetune.models import EventBatch, Objective, WindowFrame
from regimetune.models.errors import ConfigError, InputError
from regimetune.tuner.config import CacheConfig, RescaleConfig, Validation, WarmStart
from regimetune.tuner.result import TuningResult
from regimetune.tuner.workload import Workload


def _objective(objective: Objective | str) -> Objective:
    try:
        return Objective(objective)
    except ValueError:
        raise ConfigError(f"the objective is 'cache' or 'rescale', got {objective!r}") from None


def _workload(data: Any, objective: Objective) -> Any:
    """``data`` as what the objective tunes on: a :class:`Workload` (built from a trace path,
    event batches or windows), or a campaign for the weights."""
    from regimetune.tuner.rescale.campaign import CampaignSpec

    if isinstance(data, Workload):
        return data
    if isinstance(data, CampaignSpec):
        if objective is not Objective.RESCALE:
            raise ConfigError("a campaign is tuned for the rescale objective only")
        return data
    if isinstance(data, WindowFrame):
        return Workload.from_frame(data)
    if isinstance(data, str | os.PathLike):
        return Workload.read(data)
    if isinstance(data, EventBatch):
        return Workload.from_batches([data])
    if isinstance(data, Iterable):
        return Workload.from_batches(data)
    raise InputError(
        "tune() takes a Workload, a trace path, event batches, a WindowFrame or (rescale) a "
        f"CampaignSpec, not {type(data).__name__}"
    )


def tune(
    data: Workload | str | os.PathLike[str] | Iterable[EventBatch] | WindowFrame | Any,
    objective: Objective | str = Objective.CACHE,
    *,
    config: CacheConfig | RescaleConfig | None = None,
    validation: Validation | None = None,
    warm_start: Any = None,
    executor: Executor | str | None = None,
    workers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    on_evaluation: Callable[[Any], None] | None = None,
    resume: Sequence[Any] = (),
) -> TuningResult:
    """Tune one objective's policy per regime of ``data`` and return a :class:`TuningResult`.

    ``data`` is a :class:`Workload` (prepared once, e.g. to tune both objectives on it), a
    trace path, event batches, a :class:`WindowFrame` (rescale only) or a
    :class:`~regimetune.tuner.rescale.CampaignSpec` (rescale only, one regime). Windows are
    labelled by the regime whose policy the service would have in force (a change counts
    from its confirmation). ``objective`` is ``"cache"`` (a key limit per regime and the
    two-phase switch) or ``"rescale"`` (W_L, W_D, W_T per regime); ``config`` is its
    :class:`CacheConfig` or :class:`RescaleConfig` (default: the defaults).

    ``validation`` (:class:`Validation`) holds data apart and states the current policies a
    tuned one must beat there; ``warm_start`` (an earlier :class:`TuningResult`, a
    :class:`~regimetune.models.PolicyFile` or the service's policies per regime) starts the
    search from the last tuned policy and past evaluations. Evaluations run in ``executor``
    (an executor, ``"process"``, ``"thread"`` or a Dask address) or, by default, a local
    pool of ``workers`` processes (0: in this process); the same ``config.seed`` gives the
    same result on any of them. ``progress(done, total)`` and ``on_evaluation(evaluation)``
    follow the search; ``resume`` (cache only) holds the evaluations of an interrupted run
    on the same trace, told to the optimizer rather than repeated.

    Nothing is printed or written: the result carries the policy file and the report.
    """
    obj = _objective(objective)
    kind = CacheConfig if obj is Objective.CACHE else RescaleConfig
    cfg = kind() if config is None else config
    if not isinstance(cfg, kind):
        raise ConfigError(f"the {obj.value} objective takes a {kind.__name__}, not {type(cfg).__name__}")
    if validation is not None and not isinstance(validation, Validation):
        raise ConfigError(f"validation is a Validation, not {type(validation).__name__}")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 0):
        raise ConfigError(f"workers must be an integer >= 0, got {workers!r}")
    val = validation or Validation()
    warm = None if warm_start is None else WarmStart.of(warm_start)
    if warm is not None and warm.objective not in (None, obj):
        raise ConfigError(f"a {warm.objective.value} tuning cannot warm-start a {obj.value} tuning")
    work = _workload(data, obj)
    if isinstance(cfg, CacheConfig):
        from regimetune.tuner.cache.session import tune_cache

        return tune_cache(
            work,
            cfg,
            validation=val,
            warm_start=warm,
            executor=executor,
            workers=workers,
            progress=progress,
            resume=resume,
            on_evaluation=on_evaluation,
        )
    if resume:
        raise ConfigError("a rescale tuning cannot resume from evaluations; start it again")
    from regimetune.tuner.rescale.session import tune_rescale

    return tune_rescale(
        work,
        cfg,
        validation=val,
        warm_start=warm,
        executor=executor,
        workers=workers,
        progress=progress,
        on_evaluation=on_evaluation,
    )


__all__ = ["tune"]
