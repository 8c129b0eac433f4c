"""The online loop of the service: ingest -> windows -> regimes -> decisions -> outbox.

Every acknowledged batch is in the store before the engine sees it. The windows it closes are
fed to the regime detector; each closed window, the detector's checkpoint and any decision are
committed in one transaction. On start the engine restores the detector from its checkpoint
and replays the stored batches through the windowing state of the last snapshot: windows
already committed only rebuild the aggregator (keyspace); later ones go through detection as
if live, so a restart after SIGKILL loses no acknowledged batch and keeps the same regime ids.

A store that cannot write (a full or read-only disk) loses nothing either: a closed window
whose commit fails stays owed, in order, and is committed again (every
``RETRY_COMMIT_S`` seconds, and with every batch) until the store takes it; no later window
is committed before it, and no windowing snapshot is saved while one is owed, so the
checkpoint never passes a window that is not stored and a restart replays it.

Event time (:mod:`~regimetune.control.lateness`): a window stays open for late batches of
other daemons while it is within ``ingest.allowed_lateness_windows`` of the newest; a batch
that is too late or dated too far ahead is refused before it is stored. Windows nobody
reported are skipped in O(1) (silence is not zero load); a stored batch that the rules refuse
(e.g. from an older version) is skipped on replay with the reason logged. When no batch
arrives for ``engine.stale_after_windows`` windows the telemetry is stale
(:mod:`~regimetune.control.telemetry`): nothing is decided, the policy in force stays.

What a change does (modes, pause, the flap budget) is the :mod:`~regimetune.control.decisions`
module's; which policy a regime gets, :mod:`~regimetune.control.policies`'.
"""

from __future__ import annotations

import dataclasses
import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from regimetune.control.batches import batch_digest, check_batch
from regimetune.control.decisions import Decider, Mode, Verdict
from regimetune.control.policy_file import detector_start, load_policy_file
from regimetune.control.recorder import Recorder
from regimetune.control.settings import ControlSettings
from regimetune.control.store import ENGINE_CHECKPOINT, Store, StoreUnavailable
from regimetune.control.telemetry import TelemetryWatch
from regimetune.control.windowing import SNAPSHOT, Windowing, lateness_buffer
from regimetune.models import (
    ConfigError,
    ConflictError,
    Decision,
    InputError,
    Policy,
    PolicyFile,
    PolicyVersion,
    PushOutcome,
    RegimeChange,
    WindowStats,
)

if TYPE_CHECKING:
    from regimetune.regimes import OnlineRegimeDetector

log = logging.getLogger(__name__)

RETRY_COMMIT_S = 1.0
"""How often the engine tries again to commit the windows it owes a store that failed."""


@dataclass(frozen=True, slots=True)
class _Detected:
    """A closed window run through detection (and decisions), ready to commit."""

    window: WindowStats
    regime: int | None
    kind: str
    checkpoint: dict[str, Any]
    change: RegimeChange | None
    verdict: Verdict | None


@dataclass(frozen=True, slots=True)
class IngestResult:
    seq: int
    rows: int
    windows: tuple[WindowStats, ...]
    duplicate: bool = False


def _make_detector(settings: ControlSettings, state: dict[str, Any] | None) -> OnlineRegimeDetector:
    """The regime detector, restored from ``state`` when given, else new with the settings'
    parameters (windows of the engine's length unless they name another)."""
    from regimetune.regimes import OnlineRegimeDetector

    if state is not None:
        return OnlineRegimeDetector.from_state(state)
    params = settings.engine.detector
    if params.window_s is None:
        params = dataclasses.replace(params, window_s=settings.engine.window_s)
    return OnlineRegimeDetector.from_params(params)


def _regime_in_force(detector: OnlineRegimeDetector) -> tuple[int | None, str]:
    """The regime in force and its kind (``""`` before the first regime)."""
    regime = detector.current
    return regime, "" if regime is None else detector.regimes[regime].kind


class Engine:
    """Owns the windowing state and the detector; thread-safe (one lock around the stateful
    steps). :meth:`restore` takes the state from the store (quick: a bad policy file fails
    here); :meth:`start` replays the stored batches and starts the background threads.

    ``on_version`` is called after a version was enqueued (the service wakes the push
    worker); ``on_unknown_regime`` after a change to a regime without a stored policy (it may
    start a tuning job).
    """

    def __init__(
        self,
        *,
        settings: ControlSettings,
        store: Store,
        recorder: Recorder,
        pushing: bool,
        on_version: Callable[[PolicyVersion], None] | None = None,
        on_unknown_regime: Callable[[int], None] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.store = store
        self.recorder = recorder
        self.pushing = pushing
        self.on_version = on_version
        self.on_unknown_regime = on_unknown_regime
        self.clock = clock
        self.decider = Decider(
            settings=settings, store=store, recorder=recorder, pushing=pushing, clock=clock
        )
        self.telemetry = TelemetryWatch(
            settings=settings.engine,
            store=store,
            recorder=recorder,
            clock=clock,
            current_regime=lambda: self.current_regime,
        )
        self._lock = threading.RLock()  # the stateful steps: windowing, detector, decisions
        self._ingest_lock = threading.Lock()  # sequence order of durable batches
        self._applied = threading.Condition()
        self._restored = self._started = False
        # (regime, kind) in force, replaced whole after each detection: other threads (routes,
        # metrics) read it, never the detector that the engine's thread is moving
        self._in_force: tuple[int | None, str] = (None, "")
        self._queue: queue.Queue[tuple[int, str, float, dict[str, np.ndarray]] | None] | None = None
        self._owed: deque[WindowStats] = deque()  # closed windows the store has not taken yet
        self._detected: _Detected | None = None  # the first owed one, detected, not committed
        self._store_error: str | None = None
        self._thread: threading.Thread | None = None

    # -- life cycle ---------------------------------------------------------------------------
    def restore(self) -> None:
        """Load the policy file, the switches, the detector and the windowing snapshot."""
        with self._lock:
            if self._restored:
                return
            s = self.settings
            self._file: PolicyFile | None = (
                None if s.policy_file is None else load_policy_file(s.policy_file, s.engine.bounds)
            )
            self.decider.restore(self._file.default if self._file is not None else Policy())
            state, last_window = self.store.load_checkpoint(ENGINE_CHECKPOINT)
            self._committed_window = last_window if state is not None else -1
            stored = None if state is None else state["detector"]
            if self._file is not None and s.policy_file is not None:
                stored = detector_start(
                    self._file,
                    stored,
                    store=self.store,
                    path=s.policy_file,
                    detector_from=s.detector_from,
                    committed_window=self._committed_window,
                )
            self._detector = _make_detector(s, stored)
            self._detector_state = self._detector.to_state()  # as of the last detected window
            self._in_force = _regime_in_force(self._detector)
            self._windows = Windowing.restore(s, self.store.load_snapshot(SNAPSHOT))
            self._gate = lateness_buffer(s)  # admission: the buffer as of every acknowledged batch
            self._gate.newest = self._windows.buffer.newest
            self._n_windows = self.store.count_windows()  # windows are numbered by time: count them
            self._last_seq = self._applied_seq = self._windows.seq
            self._restored = True

    def start(self) -> None:
        """Replay the stored batches after the snapshot, then take ingest (restoring first
        if :meth:`restore` was not called)."""
        self.restore()
        with self._lock:
            self._snapshot_at = time.monotonic()
            self._replay(self._windows.seq)
            first = self._first_version()
            self._started = True
        latest = self.store.latest_version()
        self.recorder.newest_version(0 if latest is None else latest.version)
        if first is not None and self.on_version is not None:
            self.on_version(first)
        if self.settings.ingest.apply == "async" and self._thread is None:
            self._queue = queue.Queue(maxsize=self.settings.ingest.queue_batches)
            self._thread = threading.Thread(target=self._run, name="regimetune-engine", daemon=True)
            self._thread.start()
        self.telemetry.start()

    def _replay(self, seq0: int) -> None:
        """Apply the stored batches after ``seq0``; one that today's rules refuse (stored by an
        older version, e.g. a time in milliseconds) is skipped with the reason logged, so a
        restart never replays into a dead end."""
        now = self.clock()
        for batch in self.store.batches_after(seq0):
            self._last_seq = self._applied_seq = batch.seq
            try:
                last = self._admit(batch.kind, batch.window_start, batch.columns, now=now)
            except InputError as exc:
                log.warning("stored ingest batch %d skipped on replay: %s", batch.seq, exc)
                continue
            self._gate.note(last)
            self._apply(batch.seq, batch.kind, batch.window_start, batch.columns)

    def _first_version(self) -> PolicyVersion | None:
        """With a policy file, its default is the policy in force before the first change."""
        if self._file is None:
            return None
        return self.store.first_version(self._file.default, enqueue=self.pushing and self.decider.auto)

    def stop(self, timeout: float = 10.0) -> None:
        """Apply what is queued, then stop the background threads."""
        if self._thread is not None and self._queue is not None:
            self._queue.put(None)
            self._thread.join(timeout)
            self._thread = None
        self.telemetry.stop(timeout)

    def _run(self) -> None:
        assert self._queue is not None
        while True:
            try:
                item = self._queue.get(timeout=RETRY_COMMIT_S if self._owed else None)
            except queue.Empty:  # windows are owed and no batch came: try the store again
                with self._lock:
                    self._settle()
                    self._maybe_snapshot()
                continue
            if item is None:
                return
            seq, kind, window_start, columns = item
            try:
                with self._lock:
                    self._apply(seq, kind, window_start, columns)
                    self._maybe_snapshot()
            except Exception:  # a batch that cannot be applied must not stop the engine
                log.exception("applying ingest batch %d failed; it stays in the store", seq)
            with self._applied:
                self._applied_seq = seq
                self._applied.notify_all()

    def wait_applied(self, seq: int | None = None, timeout: float | None = None) -> bool:
        """Wait until batch ``seq`` (default: the last acknowledged one) is applied."""
        target = self._last_seq if seq is None else seq
        with self._applied:
            return self._applied.wait_for(lambda: self._applied_seq >= target, timeout)

    # -- ingest -------------------------------------------------------------------------------
    def ingest(
        self, *, kind: str, window_start: float, columns: dict[str, np.ndarray], client_key: str | None = None
    ) -> IngestResult:
        """Make a batch durable, then apply it; returns its sequence number and the windows
        it closed. Invalid input (including a window beyond the allowed lateness or too far
        ahead) is refused before anything is stored. A batch sent again with the same
        ``client_key`` (the daemon's Idempotency-Key) is acknowledged, not applied; another
        batch under a key already used is a :class:`ConflictError`."""
        if not self._started:
            raise ConfigError("engine not started")
        digest = None if client_key is None else batch_digest(kind, window_start, columns)
        with self._ingest_lock:
            if client_key is not None:
                known = self.store.batch_by_key(client_key)
                if known is not None:
                    seq0, rows0, digest0 = known
                    if digest0 is not None and digest0 != digest:
                        raise ConflictError(
                            f"Idempotency-Key {client_key!r} was already used for another batch "
                            f"(seq {seq0}); a new batch needs a new key"
                        )
                    self.telemetry.heard()
                    return IngestResult(seq=seq0, rows=rows0, windows=(), duplicate=True)
            last = self._admit(kind, window_start, columns, now=self.clock())
            seq = self.store.append_batch(
                kind=kind, window_start=window_start, columns=columns, client_key=client_key, digest=digest
            )
            self._last_seq = seq
            self._gate.note(last)
            self.telemetry.heard()
            if self._queue is not None:
                self._queue.put((seq, kind, window_start, columns))  # blocks when full: backpressure
                closed: list[WindowStats] = []
            else:
                with self._lock:
                    closed = self._apply(seq, kind, window_start, columns)
                    self._maybe_snapshot()
                with self._applied:
                    self._applied_seq = seq
                    self._applied.notify_all()
        rows = max((len(c) for c in columns.values()), default=0)
        self.recorder.batch_ingested(kind, rows)
        return IngestResult(seq=seq, rows=rows, windows=tuple(closed))

    def _admit(self, kind: str, window_start: float, columns: dict[str, np.ndarray], *, now: float) -> int:
        """The last window of a batch that is accepted now, else :class:`InputError`."""
        check_batch(kind, window_start, columns, n_buckets=self.settings.engine.n_buckets)
        return self._gate.admit(kind, window_start, columns, now=now)[1]

    def _apply(
        self, seq: int, kind: str, window_start: float, columns: dict[str, np.ndarray]
    ) -> list[WindowStats]:
        """Batch ``seq`` through the windowing state, and the windows it closed through the
        detector and the decisions; called with the engine lock held. A window the store
        cannot take now stays owed (:meth:`_settle`)."""
        closed = self._windows.add(seq, kind, window_start, columns)
        self._owed.extend(w for w in closed if w.index > self._committed_window)  # replay: committed
        self._settle()
        return closed

    # -- snapshots ----------------------------------------------------------------------------
    def _maybe_snapshot(self) -> None:
        every = self.settings.ingest.snapshot_every_s
        if every > 0 and time.monotonic() - self._snapshot_at >= every:
            try:
                self.snapshot()
            except StoreUnavailable as exc:  # the batches stay; the next batch tries again
                log.warning("windowing snapshot not saved: %s", exc)

    def snapshot(self) -> int:
        """Save the windowing state as it is (with the last batch it took), then prune the
        batches it covers that are older than ``ingest.keep_batches_s``. Returns how many
        batches were pruned. Windows closed by those batches are already committed (with the
        detector's checkpoint), so a restart replays only what follows; while a window is
        owed (the store failed) nothing is saved: the batches that closed it must replay."""
        with self._lock:
            if self._owed:
                return 0
            seq, meta, arrays = self._windows.snapshot()
            self.store.save_snapshot(SNAPSHOT, seq, meta, arrays)
            self._snapshot_at = time.monotonic()
        pruned = self.store.prune_batches(
            through_seq=seq, received_before=time.time() - self.settings.ingest.keep_batches_s
        )
        self.recorder.batches_pruned(pruned)
        return pruned

    # -- windows and decisions ----------------------------------------------------------------
    def _settle(self) -> None:
        """Commit the owed windows in order, each with the detector's checkpoint and any
        decision; stop at the first the store refuses (it stays owed, detected once)."""
        try:
            while self._owed:
                if self._detected is None:
                    self._detected = self._detect(self._owed[0])
                done = self._detected
                saved, version = self._commit(done)
                self._owed.popleft()
                self._detected = None
                self._after_commit(done, saved is not None, version)
        except StoreUnavailable as exc:
            if self._store_error is None:
                log.warning(
                    "the store cannot take closed windows (%d owed); retrying every %.0f s: %s",
                    len(self._owed),
                    RETRY_COMMIT_S,
                    exc,
                )
            self._store_error = str(exc)
            return
        if self._store_error is not None:
            log.warning("the store takes windows again: every owed window is committed")
        self._store_error = None

    def _detect(self, w: WindowStats) -> _Detected:
        """``w`` through the detector and the decisions; if the store fails meanwhile, the
        detector is put back as it was before ``w``, so detecting again gives the same."""
        try:
            change = self._detector.update(w)
            verdict = None
            if change is not None and self.decider.mode != "off":
                verdict = self.decider.on_change(change, w)
        except StoreUnavailable:
            self._detector = _make_detector(self.settings, self._detector_state)
            raise
        self._detector_state = self._detector.to_state()
        self._in_force = regime, kind = _regime_in_force(self._detector)
        return _Detected(w, regime, kind, {"detector": self._detector_state}, change, verdict)

    def _commit(self, d: _Detected) -> tuple[Any, PolicyVersion | None]:
        verdict = d.verdict
        return self.store.commit_window(
            d.window,
            d.regime,
            regime_kind=d.kind,
            checkpoint=d.checkpoint,
            decision=None if verdict is None else verdict.decision,
            policy=None if verdict is None else verdict.policy,
            make_version=verdict is not None and verdict.make_version,
            enqueue=verdict is not None and verdict.enqueue,
        )

    def _after_commit(self, d: _Detected, logged: bool, version: PolicyVersion | None) -> None:
        """What follows a committed window: counts, the push worker woken, a tuning job for
        an unknown regime, a held-back change applied (which may itself wait for the store)."""
        self._committed_window = d.window.index
        self._n_windows += 1
        self.recorder.window_closed(changed=d.change is not None)
        if logged:
            self.recorder.decision_logged(self.decider.mode_label)
        self._made(version, d.verdict)
        try:
            if d.change is not None and self.store.regime_policy(d.change.to_id) is None:
                if self.on_unknown_regime is not None:
                    self.on_unknown_regime(d.change.to_id)
            if d.change is None and d.regime is not None and self.decider.held_may_go(d.regime):
                self.apply_policy_now(
                    d.regime, "the flap budget allows again: the held-back change is applied"
                )
        except StoreUnavailable as exc:  # tried again after the next window
            log.warning("after window %d: %s", d.window.index, exc)

    def _made(self, version: PolicyVersion | None, verdict: Verdict | None) -> None:
        """A version was stored: say so, and wake the push worker when it is queued."""
        if version is None:
            return
        self.recorder.newest_version(version.version)
        if verdict is not None and verdict.enqueue and self.on_version is not None:
            self.on_version(version)

    def choose_policy(self, regime_id: int) -> tuple[Policy, str]:
        """The policy ``regime_id`` gets and where it came from."""
        return self.decider.choose_policy(regime_id)

    def apply_policy_now(self, regime_id: int, reason: str) -> PolicyVersion | None:
        """After a policy of the current regime changed (operator PUT, tuning job): decide
        again for the current regime. Returns the new version, if one was made."""
        with self._lock:
            if self._detector.current != regime_id or self.decider.mode == "off":
                return None
            verdict = self.decider.on_new_policy(regime_id, reason)
            _, version = self.store.record_decision(
                verdict.decision, verdict.policy, make_version=verdict.make_version, enqueue=verdict.enqueue
            )
        self._made(version, verdict)
        return version

    def resolve_conflict(self, backend_version: int, reason: str) -> PolicyVersion | None:
        """The backend holds ``backend_version``: no version number up to it is handed out
        again, and when no version of this service is above it (none could be delivered),
        the newest version's policy is made a new version above it (pushed: the backend and
        ``GET /v1/policy`` agree again). Returns the new version, if any. Called again for
        the same conflict (the store failed half-way, and the push worker reports the
        conflict until this returns), it finishes what is left and makes no second version."""
        with self._lock:
            self.store.raise_version_floor(backend_version)
            latest = self.store.latest_version()
            if latest is None or latest.version > backend_version:
                return None  # a version above the backend's goes out anyway
            policy = latest.policy
            regime = self._detector.current
            decision = Decision(
                at=self.clock(),
                regime_from=regime,
                regime_to=regime if regime is not None else (policy.regime_id or 0),
                score=policy.score,
                outcome=PushOutcome.PENDING if self.pushing else PushOutcome.NOT_PUSHED,
                detail=f"{reason}: the policy of version {latest.version} again, above the backend's "
                f"version {backend_version}",
            )
            _, made = self.store.record_decision(decision, policy, make_version=True, enqueue=self.pushing)
        if made is not None:
            self.recorder.newest_version(made.version)
            if self.pushing and self.on_version is not None:
                self.on_version(made)
        return made

    def knows_regime(self, regime_id: int) -> bool:
        """Whether ``regime_id`` can name a regime: an id the detector may give out (below its
        cap ``max_regimes``, so an operator can set a policy before the regime is seen) or
        one that already has a policy."""
        with self._lock:
            cap = self._detector.max_regimes
        return regime_id < cap or self.store.regime_policy(regime_id) is not None

    # -- control ------------------------------------------------------------------------------
    @property
    def mode(self) -> Mode:
        return self.decider.mode

    @property
    def paused(self) -> bool:
        return self.decider.paused

    def set_mode(self, mode: Mode) -> None:
        with self._lock:
            self.decider.set_mode(mode)

    def set_paused(self, paused: bool) -> None:
        with self._lock:
            self.decider.set_paused(paused)

    def check_telemetry(self) -> str:
        """``ok`` or why telemetry is stale (see :class:`TelemetryWatch`)."""
        return self.telemetry.check()

    # -- what it holds ------------------------------------------------------------------------
    def detector_state(self) -> dict[str, Any]:
        """A copy of the detector's state (JSON data), e.g. for a tuning job."""
        with self._lock:
            return self._detector.to_state()

    @property
    def current_regime(self) -> int | None:
        return self._in_force[0]

    @property
    def current_kind(self) -> str:
        """What the regime in force is: ``level``, ``transition`` (it moved and never levelled
        off), or ``""`` before the first regime."""
        return self._in_force[1]

    @property
    def detector_name(self) -> str:
        return type(self._detector).__name__

    @property
    def aggregator_name(self) -> str:
        return type(self._windows.aggregator).__name__

    @property
    def n_windows(self) -> int:
        """Windows committed (a gap nobody reported holds none)."""
        return self._n_windows

    @property
    def last_seq(self) -> int:
        return self._last_seq

    @property
    def applied_seq(self) -> int:
        return self._applied_seq

    @property
    def committed_window(self) -> int:
        return self._committed_window

    @property
    def owed_windows(self) -> int:
        """Closed windows the store has not taken yet (it failed); committed in order."""
        return len(self._owed)

    @property
    def store_error(self) -> str | None:
        """Why the store did not take the owed windows (None: none owed)."""
        return self._store_error if self._owed else None

    @property
    def open_windows(self) -> int:
        """Windows held open for late batches."""
        return self._windows.open_windows


__all__ = ["Engine", "IngestResult"]
