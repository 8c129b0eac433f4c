"""The application: the online engine and the tuning jobs over one store, and the rules that
connect them. The service's routes call it; so can a Python program, without HTTP.

- a policy set by an operator is checked (a regime the detector can name, the hard bounds),
  stored, and applied at once if its regime is the current one;
- a tuning job that asked to apply its result replaces the part of each regime's policy it
  tuned (:func:`~regimetune.control.policies.merge_tuned`), applied at once for the
  current regime;
- a change to a regime without a policy may start a tuning job on a configured trace
  (``engine.tune_unknown_regimes``), once per regime; the safe default is in force meanwhile;
- what became of each push is recorded on the decision that made the version.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any

from regimetune.control.delivery import record_delivery
from regimetune.control.engine import Engine
from regimetune.control.jobs import JobManager, run_tuning
from regimetune.control.policies import merge_tuned, operator_policy
from regimetune.control.recorder import Recorder
from regimetune.control.settings import ControlSettings
from regimetune.control.store import Store
from regimetune.models import (
    CachePolicy,
    NotFoundError,
    Objective,
    Policy,
    PolicyVersion,
    PufferscaleWeights,
    TuningRun,
)
from regimetune.push import DeliveryEvent

log = logging.getLogger(__name__)


class Controller:
    """The engine (:attr:`engine`) and the tuning jobs (:attr:`jobs`). :meth:`restore` is
    quick and fails on bad settings (a policy file, a detector state that disagrees with the
    store's); :meth:`start` replays the stored batches and starts the background work;
    :meth:`stop` stops it.

    ``pushing``: a push worker delivers queued versions (``on_version`` wakes it); without
    one, backends poll. ``executor`` and ``runner`` replace the tuning pool and the function
    a job runs (tests)."""

    def __init__(
        self,
        *,
        settings: ControlSettings,
        store: Store,
        recorder: Recorder,
        pushing: bool,
        on_version: Callable[[PolicyVersion], None] | None = None,
        executor: Executor | None = None,
        runner: Callable[..., dict[str, Any]] = run_tuning,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.store = store
        self.recorder = recorder
        self.engine = Engine(
            settings=settings,
            store=store,
            recorder=recorder,
            pushing=pushing,
            on_version=on_version,
            on_unknown_regime=self._unknown_regime,
            clock=clock,
        )
        self.jobs = JobManager(
            store=store,
            settings=settings.tuning,
            recorder=recorder,
            executor=executor,
            runner=runner,
            on_success=self._tuned,
            detector_state=self.engine.detector_state,
            window_s=settings.engine.window_s,
        )
        self._tuning_for: set[int] = set()

    # -- life cycle -----------------------------------------------------------------------------
    def restore(self) -> None:
        """Take the engine's state from the store (see :meth:`Engine.restore`)."""
        self.engine.restore()

    def start(self) -> None:
        """Mark the jobs a crash left running as interrupted, then start the engine (which
        replays the stored batches)."""
        self.jobs.recover()
        self.engine.start()

    def stop(self) -> None:
        """Apply what is queued, stop the engine, and stop the tuning pool (running jobs are
        recorded as interrupted)."""
        self.engine.stop()
        self.jobs.shutdown()

    # -- policies -------------------------------------------------------------------------------
    def regime_policy(self, regime_id: int) -> Policy:
        """The policy ``regime_id`` gets (the safe default when none is stored)."""
        self._known(regime_id)
        return self.engine.choose_policy(regime_id)[0]

    def set_policy(
        self,
        regime_id: int,
        *,
        cache: CachePolicy,
        weights: PufferscaleWeights,
        score: float | None = None,
    ) -> Policy:
        """An operator sets the policy of ``regime_id``: refused for a regime the detector
        cannot name (it would silently apply to whatever regime later gets that id) or a
        knob outside its hard bounds; applied at once when it is the current regime's."""
        self._known(regime_id)
        policy = operator_policy(
            regime_id, cache=cache, weights=weights, score=score, bounds=self.settings.engine.bounds
        )
        self.store.put_regime_policy(policy)
        self.engine.apply_policy_now(regime_id, "operator set the policy of the current regime")
        return policy

    def _known(self, regime_id: int) -> None:
        if not self.engine.knows_regime(regime_id):
            raise NotFoundError(
                f"no regime {regime_id}: the detector does not know it and no policy names it "
                "(GET /v1/regimes lists the regimes)"
            )

    def _tuned(self, run: TuningRun, apply: bool) -> None:
        """A tuning job succeeded: store its policies if it asked to ``apply`` them."""
        if not apply:
            return
        for rid, tuned in run.policies.items():
            self.store.put_regime_policy(merge_tuned(tuned, self.store.regime_policy(rid), run.objective))
            self.engine.apply_policy_now(rid, f"tuning job {run.id} tuned the policy of the current regime")

    def _unknown_regime(self, regime_id: int) -> None:
        """A change to a regime without a policy: tune on the configured trace (once per
        regime); the safe default stays in force meanwhile."""
        e = self.settings.engine
        if not e.tune_unknown_regimes or e.tuning_trace is None or regime_id in self._tuning_for:
            return
        self._tuning_for.add(regime_id)
        try:
            self.jobs.submit(
                trace=e.tuning_trace, objective=Objective.CACHE, budget=None, optimizer="auto", apply=True
            )
        except Exception:
            log.exception("cannot start a tuning job for regime %d", regime_id)

    # -- delivery -------------------------------------------------------------------------------
    def delivered(self, ev: DeliveryEvent) -> None:
        """The push worker's report on a version: counted, and said on its decision; a
        version conflict (the backend holds a version this one cannot follow) is resolved
        by a new version above the backend's."""
        self.recorder.push_event(ev.kind)
        record_delivery(self.store, ev)
        if ev.kind == "conflict" and ev.backend_version is not None:
            self.engine.resolve_conflict(ev.backend_version, f"version conflict at the backend ({ev.error})")


__all__ = ["Controller"]
