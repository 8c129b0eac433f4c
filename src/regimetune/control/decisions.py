"""What the engine does about a confirmed regime change, or about a new policy for the
current regime: which policy, and whether it becomes a version that is pushed.

Modes (as Kubernetes' VPA): ``off`` decides nothing; ``recommend`` logs a decision (with the
policy it would choose) and makes no version; ``auto`` makes a new policy version, queued
for the push worker when a backend is configured (else served to pollers only). ``pause``
acts as ``recommend`` until resumed. The flap budget (``push.max_per_hour``) holds a change
back when that many versions were made in the last hour; the held change is applied once
the budget allows. Mode, pause and the held change survive a restart (in the store).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from regimetune.control.policies import choose
from regimetune.control.recorder import Recorder
from regimetune.control.settings import ControlSettings
from regimetune.control.store import Store
from regimetune.models import Decision, Policy, PushOutcome, RegimeChange, WindowStats

Mode = Literal["off", "recommend", "auto"]
_HOUR = 3600.0
_MODE, _PAUSED, _HELD = "engine.mode", "engine.paused", "engine.held"  # keys in the store


@dataclass(frozen=True, slots=True)
class Verdict:
    """A decision to log, the policy it chose, and whether it makes a new version
    (``make_version``) that goes to the push worker (``enqueue``)."""

    decision: Decision
    policy: Policy
    make_version: bool
    enqueue: bool


class Decider:
    """Decides for the engine, under the engine's lock (it is not thread-safe itself)."""

    def __init__(
        self,
        *,
        settings: ControlSettings,
        store: Store,
        recorder: Recorder,
        pushing: bool,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.store = store
        self.recorder = recorder
        self.pushing = pushing
        self.clock = clock
        self.default = Policy()
        self._mode: Mode = settings.engine.mode
        self._paused = settings.engine.paused
        self._held: int | None = None

    def restore(self, default: Policy) -> None:
        """Take the switches and the held change from the store; ``default`` is the safe
        policy (a policy file's, else the built-in one)."""
        self.default = default
        self._mode = self.store.get_kv(_MODE, self.settings.engine.mode)
        self._paused = bool(self.store.get_kv(_PAUSED, self.settings.engine.paused))
        self._held = self.store.get_kv(_HELD)

    # -- switches -------------------------------------------------------------------------------
    @property
    def mode(self) -> Mode:
        return self._mode

    @property
    def paused(self) -> bool:
        return self._paused

    @property
    def auto(self) -> bool:
        """New versions are made (mode auto, not paused)."""
        return self._mode == "auto" and not self._paused

    @property
    def mode_label(self) -> str:
        """The mode a decision is counted under (``paused`` while paused)."""
        return "paused" if self._paused else self._mode

    def set_mode(self, mode: Mode) -> None:
        self.store.set_kv(_MODE, mode)
        self._mode = mode

    def set_paused(self, paused: bool) -> None:
        self.store.set_kv(_PAUSED, paused)
        self._paused = paused

    # -- decisions ------------------------------------------------------------------------------
    def choose_policy(self, regime_id: int) -> tuple[Policy, str]:
        """The policy for ``regime_id`` and where it came from (:func:`policies.choose`)."""
        stored = self.store.regime_policy(regime_id)
        return choose(regime_id, stored=stored, default=self.default, bounds=self.settings.engine.bounds)

    def on_change(self, change: RegimeChange, w: WindowStats) -> Verdict:
        """What a confirmed change, seen in window ``w``, does."""
        policy, why = self.choose_policy(change.to_id)
        held = self._budget_check(change.to_id)
        if held is not None:
            outcome, detail, make_version, enqueue = PushOutcome.HELD, f"{why}; {held}", False, False
        elif not self.auto:
            state = "engine paused" if self._paused else "mode recommend"
            outcome, detail = PushOutcome.NOT_PUSHED, f"{why}; {state}: not pushed"
            make_version = enqueue = False
        elif self.pushing:
            outcome, detail, make_version, enqueue = (
                PushOutcome.PENDING,
                f"{why}; queued for push",
                True,
                True,
            )
        else:
            outcome, detail = PushOutcome.NOT_PUSHED, f"{why}; pull-only (GET /v1/policy)"
            make_version, enqueue = True, False
        decision = Decision(
            at=self.clock(),
            regime_from=change.from_id,
            regime_to=change.to_id,
            inputs=_inputs(change, w),
            score=policy.score,
            outcome=outcome,
            detail=detail,
        )
        return Verdict(decision, policy, make_version, enqueue)

    def on_new_policy(self, regime_id: int, reason: str) -> Verdict:
        """What a new policy for the current regime ``regime_id`` (an operator's, a tuning
        job's, or one the flap budget held back) does; ``reason`` says where it came from."""
        policy, why = self.choose_policy(regime_id)
        held = self._budget_check(regime_id)
        auto = self.auto and held is None
        if held is not None:
            outcome, why = PushOutcome.HELD, f"{why}; {held}"
        else:
            outcome = PushOutcome.PENDING if auto and self.pushing else PushOutcome.NOT_PUSHED
        decision = Decision(
            at=self.clock(),
            regime_from=regime_id,
            regime_to=regime_id,
            score=policy.score,
            outcome=outcome,
            detail=f"{reason}: {why}" + ("" if auto or held else "; not pushed"),
        )
        return Verdict(decision, policy, auto, auto and self.pushing)

    def held_may_go(self, regime: int) -> bool:
        """Whether the change held back for the current ``regime`` may be applied now."""
        return self._held is not None and self._held == regime and self._over_budget() is None

    @property
    def held(self) -> int | None:
        """The regime whose change the flap budget holds back, if any."""
        return self._held

    def _budget_check(self, regime_id: int) -> str | None:
        """In auto mode, why the flap budget holds back a change to ``regime_id`` (None: it
        does not); remembers the held regime (in the store: a restart keeps it)."""
        held = self._over_budget() if self.auto else None
        now_held = regime_id if held is not None else None
        if now_held != self._held:
            self.store.set_kv(_HELD, now_held)
            self._held = now_held
        if held is not None:
            self.recorder.change_held("flap_budget")
        return held

    def _over_budget(self) -> str | None:
        """Why a new version would break the flap budget (``push.max_per_hour``), or None."""
        cap = self.settings.push.max_per_hour
        if cap is None:
            return None
        made = self.store.count_versions_since(self.clock() - _HOUR)
        if made < cap:
            return None
        return (
            f"flap budget spent ({made} versions in the last hour, push.max_per_hour={cap}): "
            "held back, applied once the budget allows"
        )


def _inputs(change: RegimeChange, w: WindowStats) -> dict[str, float]:
    """What a change decision logs of the window that confirmed it."""
    return {
        "reads_per_s": w.reads_per_s,
        "writes_per_s": w.writes_per_s,
        "active_keys": float(w.active_keys),
        "keyspace_size": float(w.keyspace_size),
        "entropy": w.entropy,
        "topk_share": w.topk_share,
        "window": float(w.index),
        "at_window": float(change.at_window),
        "delay_windows": float(change.delay_windows),
    }


__all__ = ["Decider", "Mode", "Verdict"]
