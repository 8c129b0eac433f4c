"""Stale telemetry: when no daemon sent a batch for ``engine.stale_after_windows`` windows
(on the service's clock), say so instead of reading the silence as zero load.

Silence produces no windows (the engine skips windows nobody reported), so no regime change
can happen and the policy in force is held. This watch makes that visible: the recorder
hears it (the ``regimetune_telemetry_stale`` gauge, and the hold counted as a change held
back), one decision-log entry when telemetry turns stale and one when it resumes, and a line
for ``/readyz``. A batch with no keys is an idle window, not
silence: it counts as a batch.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from regimetune.control.recorder import Recorder
from regimetune.control.settings import EngineSettings
from regimetune.control.store import Store
from regimetune.models import Decision, PushOutcome

log = logging.getLogger(__name__)


class TelemetryWatch:
    """``heard()`` on every batch; ``check()`` (also every window or second from a
    background thread between ``start()`` and ``stop()``) says ``ok`` or why it is stale."""

    def __init__(
        self,
        *,
        settings: EngineSettings,
        store: Store,
        recorder: Recorder,
        clock: Callable[[], float],
        current_regime: Callable[[], int | None],
    ) -> None:
        self.settings = settings
        self.store = store
        self.recorder = recorder
        self.clock = clock
        self.current_regime = current_regime
        self._lock = threading.Lock()
        self._last = clock()
        self._stale_since: float | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def stale(self) -> bool:
        return self._stale_since is not None

    def heard(self) -> None:
        """A batch arrived (an idle window counts: the daemon is idle, not silent)."""
        with self._lock:
            self._last = self.clock()
            if self._stale_since is None:
                return
            silent = self._last - self._stale_since
            self._stale_since = None
            self.recorder.telemetry_state(stale=False)
        self._log(f"telemetry resumed after {silent:.1f} s stale")

    def check(self) -> str:
        """``ok: ...`` or ``telemetry stale: ...`` with why; on turning stale, the decision log
        says so once."""
        ws = self.settings.window_s
        limit = self.settings.stale_after_windows * ws
        with self._lock:
            age = self.clock() - self._last
            if age <= limit:
                return f"ok: last batch {age:.1f} s ago"
            newly = self._stale_since is None
            if newly:
                self._stale_since = self.clock()
                self.recorder.telemetry_state(stale=True)
                self.recorder.change_held("stale_telemetry")
        latest = self.store.in_force_version()
        held = "no policy yet" if latest is None else f"policy version {latest.version}"
        detail = (
            f"telemetry stale: no ingest batch for {age:.1f} s ({age / ws:.1f} windows of {ws:g} s; "
            f"engine.stale_after_windows={self.settings.stale_after_windows:g}): "
            f"holding {held}, silence is not read as zero load"
        )
        if newly:
            self._log(detail)
        return detail

    def _log(self, detail: str) -> None:
        cur = self.current_regime()
        decision = Decision(
            at=self.clock(),
            regime_from=cur,
            regime_to=-1 if cur is None else cur,
            outcome=PushOutcome.NOT_PUSHED,
            detail=detail,
        )
        self.store.record_decision(decision, None, make_version=False, enqueue=False)
        log.warning("%s", detail)

    # -- life cycle ---------------------------------------------------------------------------
    def start(self) -> None:
        """Check in the background, every window (at most every second, at least every 50 ms)."""
        if self._thread is not None:
            return
        self._last = self.clock()
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="regimetune-telemetry", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout)
            self._thread = None

    def _run(self) -> None:
        every = max(0.05, min(1.0, self.settings.window_s))
        while not self._stop.wait(every):
            try:
                self.check()
            except Exception:  # a store hiccup must not end the watch
                log.exception("checking telemetry staleness failed")


__all__ = ["TelemetryWatch"]
