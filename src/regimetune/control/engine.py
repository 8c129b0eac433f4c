"""The online loop of the service: ingest -> windows -> regimes -> decisions -> outbox.

Every acknowledged batch is in the store before the engine sees it. The windows it closes are
fed to the regime detector; each closed window, the detector's checkpoint and any decision are
committed in one transaction. On start the engine restores the detector from its checkpoint
and replays the stored batches through a fresh aggregator: windows already committed only
rebuild the aggregator (keyspace); later ones go through detection as if live, so a restart
after SIGKILL loses no acknowledged batch and keeps the same regime ids.

Event time (``control/lateness.py``): a window stays open for late batches of other daemons while
it is within ``ingest.allowed_lateness_windows`` of the newest; a batch that is too late or
dated too far ahead is refused before it is stored. Windows nobody reported are skipped in
O(1) (silence is not zero load); a stored batch that the rules refuse (e.g. from an older
version) is skipped on replay with the reason logged. When no batch arrives for
``engine.stale_after_windows`` windows the telemetry is stale: nothing is decided, the policy
in force stays, and the decision log, a metric and ``/readyz`` say so.

Modes (as Kubernetes' VPA): ``off`` stores windows and regimes only; ``recommend`` logs a
decision (with the policy it would choose) and pushes nothing; ``auto`` stores a new policy
version and enqueues it for the push worker. ``pause`` acts as ``recommend`` until resumed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from regimetune.control.lateness import Part, WindowBuffer
from regimetune.control.settings import BoundsSettings, ControlSettings
from regimetune.control.telemetry import TelemetryWatch
from regimetune.models import (
    BoundsError,
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

if TYPE_CHECKING:  # the service's types, for annotations only (no import cycle)
    from regimetune.api.metrics import Metrics
    from regimetune.api.store import Store, StoredBatch
    from regimetune.regimes import OnlineRegimeDetector

log = logging.getLogger(__name__)
Mode = Literal["off", "recommend", "auto"]
_CHECKPOINT = "engine"
_SNAPSHOT = "aggregator"
_SNAPSHOT_FORMAT = 2  # 2: absolute window indices and the open windows of the lateness buffer
_ORIGIN = (
    "engine.detector_origin"  # fingerprint of the policy file's detector state the detector started from
)
_HELD = "engine.held"
_HOUR = 3600.0


def _fingerprint(state: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(state, sort_keys=True, default=str).encode()).hexdigest()[:16]


def check_bounds(policy: Policy, bounds: BoundsSettings) -> None:
    """Raise :class:`BoundsError` naming the first knob of ``policy`` outside its hard bounds."""
    c, w = policy.cache, policy.weights
    knobs: list[tuple[str, float | None, tuple[float, float]]] = [
        ("cache.limit_keys", c.limit_keys, bounds.limit_keys),
        ("cache.high_watermark_keys", c.high_watermark_keys, bounds.high_watermark_keys),
        ("cache.switch_time_s", c.switch_time_s, bounds.switch_time_s),
        ("weights.w_load", w.w_load, bounds.w_load),
        ("weights.w_data", w.w_data, bounds.w_data),
        ("weights.w_time", w.w_time, bounds.w_time),
    ]
    for name, value, (lo, hi) in knobs:
        if value is not None and not lo <= value <= hi:
            raise BoundsError(f"{name}={value} is outside its hard bounds [{lo}, {hi}]")


@dataclass(frozen=True, slots=True)
class IngestResult:
    seq: int
    rows: int
    windows: tuple[WindowStats, ...]
    duplicate: bool = False


def _make_buffer(settings: ControlSettings) -> WindowBuffer:
    return WindowBuffer(
        window_s=settings.engine.window_s,
        lateness=settings.ingest.allowed_lateness_windows,
        max_future_s=settings.ingest.max_future_s,
    )


_BUFFER = "buffer."  # prefix of the lateness buffer's arrays in the snapshot


def _make_aggregator(
    settings: ControlSettings, snapshot: tuple[int, dict[str, Any], dict[str, np.ndarray]] | None
) -> tuple[Any, WindowBuffer, int]:
    """The windowing aggregator (windows numbered from time 0, so a window's index is its
    start over ``window_s`` whatever was pruned), the lateness buffer and the last batch they
    have taken: restored from ``snapshot`` when one was taken by this version with the same
    settings, else fresh ones that the stored batches then rebuild."""
    from regimetune.collectors import WindowAggregator

    fresh = WindowAggregator(
        window_s=settings.engine.window_s, n_buckets=settings.engine.n_buckets, origin=0.0
    )
    buffer = _make_buffer(settings)
    if snapshot is None:
        return fresh, buffer, 0
    seq, meta, arrays = snapshot
    if meta.get("format") != _SNAPSHOT_FORMAT or meta["aggregator"].get("params") != fresh.get_params():
        log.warning(
            "the aggregator snapshot was taken with other settings or by an older version (%s); "
            "starting from the stored batches",
            meta["aggregator"].get("params"),
        )
        return fresh, buffer, 0
    mine = {n: a for n, a in arrays.items() if not n.startswith(_BUFFER)}
    buffer.restore(meta["buffer"], {n[len(_BUFFER) :]: a for n, a in arrays.items() if n.startswith(_BUFFER)})
    return WindowAggregator.from_state(meta["aggregator"], mine), buffer, seq


def batch_digest(kind: str, window_start: float, columns: dict[str, np.ndarray]) -> str:
    """A hash of a batch's content: the same Idempotency-Key with another body is refused."""
    h = hashlib.sha256(f"{kind}\n{window_start!r}\n".encode())
    for name in sorted(columns):
        arr = np.ascontiguousarray(columns[name])
        h.update(f"{name}:{arr.dtype.str}:{len(arr)}\n".encode())
        h.update(arr.data)
    return h.hexdigest()


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


class Engine:
    """Owns the aggregator and detector; thread-safe (one lock around the stateful steps).

    ``on_version`` is called after a version was enqueued (the app wakes the push worker);
    ``on_unknown_regime`` after a change to a regime without a stored policy (the app may
    start a tuning job).
    """

    def __init__(
        self,
        *,
        settings: ControlSettings,
        store: Store,
        metrics: Metrics,
        pushing: bool,
        on_version: Callable[[PolicyVersion], None] | None = None,
        on_unknown_regime: Callable[[int], None] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.store = store
        self.metrics = metrics
        self.pushing = pushing
        self.on_version = on_version
        self.on_unknown_regime = on_unknown_regime
        self.clock = clock
        self._lock = threading.RLock()  # the stateful steps: aggregator, detector, decisions
        self._ingest_lock = threading.Lock()  # sequence order of durable batches
        self._applied = threading.Condition()
        self._started = False
        self._queue: queue.Queue[tuple[int, str, float, dict[str, np.ndarray]] | None] | None = None
        self._thread: threading.Thread | None = None
        self.telemetry = TelemetryWatch(
            settings=settings.engine,
            store=store,
            metrics=metrics,
            clock=clock,
            current_regime=lambda: self.current_regime,
        )

    # -- life cycle ---------------------------------------------------------------------------
    def start(self) -> None:
        """Load the policy file, restore the detector and replay the stored batches."""
        with self._lock:
            self._file = self._load_policy_file()
            self._held: int | None = self.store.get_kv(_HELD)  # the flap budget held its policy back
            self._mode: Mode = self.store.get_kv("engine.mode", self.settings.engine.mode)
            self._paused: bool = bool(self.store.get_kv("engine.paused", self.settings.engine.paused))
            state, last_window = self.store.load_checkpoint(_CHECKPOINT)
            self._committed_window = last_window if state is not None else -1
            detector_state = self._detector_state(None if state is None else state["detector"])
            self._detector = _make_detector(self.settings, detector_state)
            self._aggregator, self._buffer, seq0 = _make_aggregator(
                self.settings, self.store.load_snapshot(_SNAPSHOT)
            )
            self._gate = _make_buffer(self.settings)  # admission: the buffer as of every acknowledged batch
            self._gate.newest = self._buffer.newest
            self._n_windows = self.store.count_windows()  # windows are numbered by time: count them
            self._last_seq = self._applied_seq = self._agg_seq = seq0
            self._snapshot_at = time.monotonic()
            self._started = True
            self._replay(seq0)
            first = self._first_version()
            self._update_gauges()
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
                self._validate(batch.kind, batch.window_start, batch.columns, now=now)
                _, last = self._gate.admit(batch.kind, batch.window_start, batch.columns, now=now)
            except InputError as exc:
                log.warning("stored ingest batch %d skipped on replay: %s", batch.seq, exc)
                continue
            self._gate.note(last)
            self._apply(batch.seq, batch.kind, batch.window_start, batch.columns)

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
            item = self._queue.get()
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

    @property
    def applied_seq(self) -> int:
        return self._applied_seq

    def _load_policy_file(self) -> PolicyFile | None:
        path = self.settings.policy_file
        if path is None:
            return None
        try:
            with open(path, "rb") as f:
                pf = PolicyFile.model_validate_json(f.read())
        except OSError as exc:
            raise ConfigError(f"cannot read policy file {path}: {exc.strerror}") from exc
        except ValueError as exc:
            raise ConfigError(f"policy file {path} is not a valid PolicyFile: {exc}") from exc
        for p in (*pf.regimes.values(), pf.default):
            check_bounds(p, self.settings.engine.bounds)
        return pf

    def _detector_state(self, stored: dict[str, Any] | None) -> dict[str, Any] | None:
        """The state the detector starts from. A policy file's ``detector_state`` named its
        regime ids, so the service starts from it (offline and online ids then mean the same
        regimes) unless the store's detector already started from it. A store whose detector
        learnt otherwise is refused, unless ``detector_from`` says which wins. The file's
        per-regime policies are stored unless the store's detector wins."""
        pf = self._file
        if pf is None:
            return stored
        if pf.detector_state is None:
            self._store_file_policies(overwrite=False)
            return stored
        origin = _fingerprint(pf.detector_state)
        same = self.store.get_kv(_ORIGIN) == origin
        if stored is not None and not same:
            how = self.settings.detector_from
            if how == "refuse":
                raise ConfigError(
                    f"the detector state in policy file {self.settings.policy_file} is not the one the "
                    "store's detector started from, so their regime ids may name different regimes; "
                    "choose which wins: --detector-from policy-file (detection restarts from the file) "
                    "or --detector-from store (the file's per-regime policies are not loaded)"
                )
            if how == "store":
                log.warning(
                    "the store's detector wins over the policy file's: its per-regime policies are ignored"
                )
                return stored
        if stored is not None and not same:  # the file wins: its state is the checkpoint from now on
            self.store.save_checkpoint(_CHECKPOINT, {"detector": pf.detector_state}, self._committed_window)
        if not same:
            self.store.set_kv(_ORIGIN, origin)
        self._store_file_policies(overwrite=stored is not None and not same)
        return stored if same and stored is not None else pf.detector_state

    def _store_file_policies(self, *, overwrite: bool) -> None:
        assert self._file is not None
        for rid, p in self._file.regimes.items():
            if overwrite or self.store.regime_policy(rid) is None:
                self.store.put_regime_policy(p.model_copy(update={"regime_id": rid, "source": "tuned"}))

    def _first_version(self) -> PolicyVersion | None:
        """With a policy file, its default is the policy in force before the first change."""
        if self._file is None:
            return None
        push = self.pushing and self._mode == "auto" and not self._paused
        return self.store.first_version(self._file.default, enqueue=push)

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

    def _hold(self, regime_id: int | None) -> None:
        """Remember (in the store: a restart keeps it) which regime's change is held back."""
        if regime_id != self._held:
            self.store.set_kv(_HELD, regime_id)
            self._held = regime_id

    def knows_regime(self, regime_id: int) -> bool:
        """Whether ``regime_id`` can name a regime: an id the detector may give out (below its
        cap ``k`` or ``max_regimes``, so an operator can set a policy before the regime is
        seen) or one that already has a policy."""
        with self._lock:
            det = self._detector
            params = {} if det is None else det.get_params()
        cap = params.get("k") or params.get("max_regimes") or 0
        return regime_id < cap or self.store.regime_policy(regime_id) is not None

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
            now = self.clock()
            self._validate(kind, window_start, columns, now=now)
            _, last = self._gate.admit(kind, window_start, columns, now=now)
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
        self.metrics.ingest_batches.inc()
        (self.metrics.ingest_keys if kind == "counts" else self.metrics.ingest_events).inc(rows)
        return IngestResult(seq=seq, rows=rows, windows=tuple(closed))

    # -- snapshots ----------------------------------------------------------------------------
    def _maybe_snapshot(self) -> None:
        every = self.settings.ingest.snapshot_every_s
        if every > 0 and time.monotonic() - self._snapshot_at >= every:
            self.snapshot()

    def snapshot(self) -> int:
        """Save the aggregator as it is (with the sequence number of the last batch it took),
        then prune the batches it covers that are older than ``ingest.keep_batches_s``.
        Returns how many batches were pruned. Windows closed by those batches are already
        committed (with the detector's checkpoint), so a restart replays only what follows."""
        with self._lock:
            seq = self._agg_seq
            meta, arrays = self._aggregator.to_state()
            bmeta, barrays = self._buffer.to_state()
            arrays |= {_BUFFER + n: a for n, a in barrays.items()}
            snap = {"format": _SNAPSHOT_FORMAT, "aggregator": meta, "buffer": bmeta}
            self.store.save_snapshot(_SNAPSHOT, seq, snap, arrays)
            self._snapshot_at = time.monotonic()
        pruned = self.store.prune_batches(
            through_seq=seq, received_before=time.time() - self.settings.ingest.keep_batches_s
        )
        self.metrics.pruned_batches.inc(pruned)
        return pruned

    def _validate(
        self, kind: str, window_start: float, columns: dict[str, np.ndarray], *, now: float
    ) -> None:
        """What the aggregator would refuse, checked before the batch is stored (the lateness
        rules are the admission buffer's)."""
        if kind not in ("counts", "events"):
            raise InputError(f"unknown batch kind {kind!r}")
        if not math.isfinite(window_start) or window_start < 0:
            raise InputError("window_start must be a finite number >= 0")
        if kind == "events" and len(columns.get("ts", ())):
            ts = columns["ts"]
            if not np.isfinite(ts).all() or ts[0] < 0:
                raise InputError("events.ts must be finite numbers >= 0")
        nb = self.settings.engine.n_buckets
        for name in ("bucket_load", "bucket_bytes"):
            if name in columns:
                col = columns[name]
                if len(col) != nb:
                    raise InputError(f"{name} must hold engine.n_buckets={nb} values")
                if not np.isfinite(col).all() or (col < 0).any():
                    raise InputError(f"{name} must hold finite values >= 0")

    def _apply(
        self, seq: int, kind: str, window_start: float, columns: dict[str, np.ndarray]
    ) -> list[WindowStats]:
        """Batch ``seq`` into the lateness buffer, the windows the watermark passed through
        the aggregator and those through the rest; called with the engine lock held."""
        self._agg_seq = seq
        closed: list[WindowStats] = []
        for k, parts in self._buffer.add(kind, window_start, columns):
            closed.extend(self._close(k, parts))
        for w in closed:
            self._on_window(w)
        return closed

    def _close(self, k: int, parts: list[Part]) -> list[WindowStats]:
        """Window ``k`` from every part that arrived for it; the windows before it that nobody
        reported are skipped in O(1), not closed as empty."""
        from regimetune.models import EventBatch

        agg = self._aggregator
        start = k * self.settings.engine.window_s
        agg.skip_to(start)
        for kind, cols in parts:
            if kind == "counts":
                agg.push_counts(
                    start,
                    cols["keys"],
                    cols["reads"],
                    cols.get("writes"),
                    bucket_load=cols.get("bucket_load"),
                    bucket_bytes=cols.get("bucket_bytes"),
                )
            elif len(cols.get("ts", ())):
                agg.push(
                    EventBatch.from_columns(
                        ts=cols["ts"], key=cols["key"], op=cols.get("op"), size=cols.get("size")
                    )
                )
        return agg.close_window()

    # -- stale telemetry ----------------------------------------------------------------------
    def check_telemetry(self) -> str:
        """``ok`` or why telemetry is stale (see :class:`TelemetryWatch`)."""
        return self.telemetry.check()

    # -- windows and decisions ----------------------------------------------------------------
    def _on_window(self, w: WindowStats) -> None:
        if w.index <= self._committed_window:
            return  # replay: already committed before the restart, only the aggregator needed it
        change: RegimeChange | None = None
        regime: int | None = None
        checkpoint = None
        if self._detector is not None:
            change = self._detector.update(w)
            regime = self._detector.current
            checkpoint = {"detector": self._detector.to_state()}
        decision = policy = None
        make_version = enqueue = False
        if change is not None and self._mode != "off":
            decision, policy, make_version, enqueue = self._decide(change, w)
        saved, version = self.store.commit_window(
            w,
            regime,
            checkpoint=checkpoint,
            decision=decision,
            policy=policy,
            make_version=make_version,
            enqueue=enqueue,
        )
        self._committed_window = w.index
        self._n_windows += 1
        m = self.metrics
        m.windows.inc()
        m.current_regime.set(-1 if regime is None else regime)
        if change is not None:
            m.regime_changes.inc()
        if saved is not None:
            m.decisions.labels(mode="paused" if self._paused else self._mode).inc()
        if version is not None:
            m.policy_version.set(version.version)
            if enqueue and self.on_version is not None:
                self.on_version(version)
        if change is not None and self.store.regime_policy(change.to_id) is None:
            if self.on_unknown_regime is not None:
                self.on_unknown_regime(change.to_id)
        if change is None and self._held is not None and self._held == regime and self._over_budget() is None:
            self.apply_policy_now(self._held, "the flap budget allows again: the held-back change is applied")

    def choose_policy(self, regime_id: int) -> tuple[Policy, str]:
        """The policy for ``regime_id`` and where it came from: the stored (tuned or operator)
        policy if within the hard bounds, else the safe default."""
        stored = self.store.regime_policy(regime_id)
        default = self._file.default if self._file is not None else Policy()
        default = default.model_copy(update={"regime_id": regime_id, "source": "default"})
        if stored is None:
            return default, f"no policy for regime {regime_id} yet: safe default"
        try:
            check_bounds(stored, self.settings.engine.bounds)
        except BoundsError as exc:
            return default, f"stored policy of regime {regime_id} refused ({exc}): safe default"
        return stored, f"{stored.source} policy of regime {regime_id}"

    def _decide(self, change: RegimeChange, w: WindowStats) -> tuple[Decision, Policy, bool, bool]:
        policy, why = self.choose_policy(change.to_id)
        inputs = {
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
        auto = self._mode == "auto" and not self._paused
        held = self._over_budget() if auto else None
        self._hold(change.to_id if held is not None else None)
        if held is not None:
            outcome, detail, make_version, enqueue = PushOutcome.HELD, f"{why}; {held}", False, False
        elif not auto:
            state = "engine paused" if self._paused else "mode recommend"
            outcome, detail, make_version, enqueue = (
                PushOutcome.NOT_PUSHED,
                f"{why}; {state}: not pushed",
                False,
                False,
            )
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
            inputs=inputs,
            score=policy.score,
            outcome=outcome,
            detail=detail,
        )
        return decision, policy, make_version, enqueue

    def apply_policy_now(self, regime_id: int, reason: str) -> PolicyVersion | None:
        """After a policy of the current regime changed (operator PUT, tuning job): decide
        again for the current regime. Returns the new version, if one was made."""
        with self._lock:
            if self._detector is None or self._detector.current != regime_id or self._mode == "off":
                return None
            policy, why = self.choose_policy(regime_id)
            auto = self._mode == "auto" and not self._paused
            outcome = PushOutcome.PENDING if auto and self.pushing else PushOutcome.NOT_PUSHED
            held = self._over_budget() if auto else None
            self._hold(regime_id if held is not None else None)
            if held is not None:
                outcome, why, auto = PushOutcome.HELD, f"{why}; {held}", False
            decision = Decision(
                at=self.clock(),
                regime_from=regime_id,
                regime_to=regime_id,
                score=policy.score,
                outcome=outcome,
                detail=f"{reason}: {why}" + ("" if auto or held else "; not pushed"),
            )
            _, version = self.store.record_decision(
                decision, policy, make_version=auto, enqueue=auto and self.pushing
            )
        if version is not None:
            self.metrics.policy_version.set(version.version)
            if auto and self.pushing and self.on_version is not None:
                self.on_version(version)
        return version

    # -- control ------------------------------------------------------------------------------
    @property
    def mode(self) -> Mode:
        return self._mode

    @property
    def paused(self) -> bool:
        return self._paused

    def set_mode(self, mode: Mode) -> None:
        with self._lock:
            self.store.set_kv("engine.mode", mode)
            self._mode = mode

    def set_paused(self, paused: bool) -> None:
        with self._lock:
            self.store.set_kv("engine.paused", paused)
            self._paused = paused

    def detector_state(self) -> dict[str, Any] | None:
        """A copy of the detector's state (JSON data), e.g. for a tuning job."""
        with self._lock:
            return None if self._detector is None else self._detector.to_state()

    @property
    def current_regime(self) -> int | None:
        return None if self._detector is None else self._detector.current

    @property
    def detector_name(self) -> str:
        return "unavailable" if self._detector is None else type(self._detector).__name__

    @property
    def aggregator_name(self) -> str:
        return type(self._aggregator).__name__

    @property
    def n_windows(self) -> int:
        """Windows committed (a gap nobody reported holds none)."""
        return self._n_windows

    @property
    def last_seq(self) -> int:
        return self._last_seq

    @property
    def committed_window(self) -> int:
        return self._committed_window

    def _update_gauges(self) -> None:
        cur = self.current_regime
        self.metrics.current_regime.set(-1 if cur is None else cur)
        latest = self.store.latest_version()
        self.metrics.policy_version.set(0 if latest is None else latest.version)

    def stored_batches(self) -> list[StoredBatch]:  # for tests
        return list(self.store.batches_after(0))

    @property
    def open_windows(self) -> int:
        """Windows held open for late batches."""
        return self._buffer.open_windows


__all__ = ["Engine", "IngestResult", "check_bounds"]
