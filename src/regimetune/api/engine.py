"""The online loop of the service: ingest -> windows -> regimes -> decisions -> outbox.

Every acknowledged batch is in the store before the engine sees it. The windows it closes are
fed to the regime detector; each closed window, the detector's checkpoint and any decision are
committed in one transaction. On start the engine restores the detector from its checkpoint
and replays the stored batches through a fresh aggregator: windows already committed only
rebuild the aggregator (keyspace); later ones go through detection as if live, so a restart
after SIGKILL loses no acknowledged batch and keeps the same regime ids.

Modes (as Kubernetes' VPA): ``off`` stores windows and regimes only; ``recommend`` logs a
decision (with the policy it would choose) and pushes nothing; ``auto`` stores a new policy
version and enqueues it for the push worker. ``pause`` acts as ``recommend`` until resumed.
"""

from __future__ import annotations

import logging
import math
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from regimetune.api.metrics import Metrics
from regimetune.api.settings import BoundsSettings, Settings
from regimetune.api.store import Store, StoredBatch
from regimetune.models import (
    BoundsError,
    ConfigError,
    Decision,
    InputError,
    Policy,
    PolicyFile,
    PolicyVersion,
    PushOutcome,
    RegimeChange,
    WindowStats,
)

log = logging.getLogger(__name__)
Mode = Literal["off", "recommend", "auto"]
_CHECKPOINT = "engine"
_SNAPSHOT = "aggregator"


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


def _make_aggregator(
    settings: Settings, snapshot: tuple[int, dict[str, Any], dict[str, np.ndarray]] | None
) -> tuple[Any, int, float]:
    """The windowing aggregator, the last batch it has taken and the engine's ingest frontier:
    restored from ``snapshot`` when one was taken with the same settings, else a fresh one
    that the stored batches then rebuild."""
    from regimetune.collectors import WindowAggregator

    fresh = WindowAggregator(window_s=settings.engine.window_s, n_buckets=settings.engine.n_buckets)
    if snapshot is None:
        return fresh, 0, -math.inf
    seq, meta, arrays = snapshot
    if meta["aggregator"].get("params") != fresh.get_params():
        log.warning(
            "the aggregator snapshot was taken with other settings (%s); starting from the stored batches",
            meta["aggregator"].get("params"),
        )
        return fresh, 0, -math.inf
    frontier = -math.inf if meta.get("frontier") is None else float(meta["frontier"])
    return WindowAggregator.from_state(meta["aggregator"], arrays), seq, frontier


def _make_detector(settings: Settings, state: dict[str, Any] | None) -> Any:
    """The regime detector (``regimetune.regimes``), restored from ``state`` when given; None
    when the regimes package has no online detector (windows are still stored)."""
    try:
        from regimetune.regimes import OnlineRegimeDetector
    except ImportError:  # pragma: no cover - only while regimes is being built
        log.warning("regimetune.regimes.OnlineRegimeDetector is unavailable: no regime detection")
        return None
    if state is not None:
        return OnlineRegimeDetector.from_state(state)
    try:
        return OnlineRegimeDetector(**settings.engine.detector)
    except TypeError as exc:
        raise ConfigError(f"engine.detector: {exc}") from exc


class Engine:
    """Owns the aggregator and detector; thread-safe (one lock around the stateful steps).

    ``on_version`` is called after a version was enqueued (the app wakes the push worker);
    ``on_unknown_regime`` after a change to a regime without a stored policy (the app may
    start a tuning job).
    """

    def __init__(
        self,
        *,
        settings: Settings,
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

    # -- life cycle ---------------------------------------------------------------------------
    def start(self) -> None:
        """Load the policy file, restore the detector and replay the stored batches."""
        with self._lock:
            self._file = self._load_policy_file()
            self._mode: Mode = self.store.get_kv("engine.mode", self.settings.engine.mode)
            self._paused: bool = bool(self.store.get_kv("engine.paused", self.settings.engine.paused))
            state, last_window = self.store.load_checkpoint(_CHECKPOINT)
            self._committed_window = last_window if state is not None else -1
            self._detector = _make_detector(self.settings, None if state is None else state["detector"])
            self._aggregator, seq0, self._frontier = _make_aggregator(
                self.settings, self.store.load_snapshot(_SNAPSHOT)
            )
            self._n_windows = self._committed_window + 1
            self._last_seq = self._applied_seq = self._agg_seq = seq0
            self._snapshot_at = time.monotonic()
            self._started = True
            for batch in self.store.batches_after(seq0):
                self._apply(batch.seq, batch.kind, batch.window_start, batch.columns)
                self._last_seq = self._applied_seq = batch.seq
                self._advance_frontier(batch.kind, batch.window_start, batch.columns)
            self._update_gauges()
        if self.settings.ingest.apply == "async" and self._thread is None:
            self._queue = queue.Queue(maxsize=self.settings.ingest.queue_batches)
            self._thread = threading.Thread(target=self._run, name="regimetune-engine", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Apply what is queued, then stop the background thread."""
        if self._thread is not None and self._queue is not None:
            self._queue.put(None)
            self._thread.join(timeout)
            self._thread = None

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

    def _advance_frontier(self, kind: str, window_start: float, columns: dict[str, np.ndarray]) -> None:
        ws = self.settings.engine.window_s
        if kind == "counts":
            start = window_start
        elif len(columns.get("ts", ())):
            start = math.floor(float(columns["ts"][-1]) / ws) * ws
        else:
            return
        self._frontier = max(self._frontier, start)

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
        for rid, p in pf.regimes.items():
            check_bounds(p, self.settings.engine.bounds)
            if self.store.regime_policy(rid) is None:
                self.store.put_regime_policy(p.model_copy(update={"regime_id": rid, "source": "tuned"}))
        check_bounds(pf.default, self.settings.engine.bounds)
        return pf

    # -- ingest -------------------------------------------------------------------------------
    def ingest(
        self, *, kind: str, window_start: float, columns: dict[str, np.ndarray], client_key: str | None = None
    ) -> IngestResult:
        """Make a batch durable, then apply it; returns its sequence number and the windows
        it closed. Invalid input is refused before anything is stored. A batch sent again with
        the same ``client_key`` (the daemon's Idempotency-Key) is acknowledged, not applied."""
        if not self._started:
            raise ConfigError("engine not started")
        with self._ingest_lock:
            if client_key is not None:
                known = self.store.batch_by_key(client_key)
                if known is not None:
                    return IngestResult(seq=known[0], rows=known[1], windows=(), duplicate=True)
            self._validate(kind, window_start, columns)
            seq = self.store.append_batch(
                kind=kind, window_start=window_start, columns=columns, client_key=client_key
            )
            self._last_seq = seq
            self._advance_frontier(kind, window_start, columns)
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
            frontier = None if self._frontier == -math.inf else self._frontier
            self.store.save_snapshot(_SNAPSHOT, seq, {"aggregator": meta, "frontier": frontier}, arrays)
            self._snapshot_at = time.monotonic()
        pruned = self.store.prune_batches(
            through_seq=seq, received_before=time.time() - self.settings.ingest.keep_batches_s
        )
        self.metrics.pruned_batches.inc(pruned)
        return pruned

    def _validate(self, kind: str, window_start: float, columns: dict[str, np.ndarray]) -> None:
        if kind not in ("counts", "events"):
            raise InputError(f"unknown batch kind {kind!r}")
        if not np.isfinite(window_start) or window_start < 0:
            raise InputError("window_start must be a finite number >= 0")
        ws = self.settings.engine.window_s
        if (
            kind == "counts"
            and self._frontier > -math.inf
            and round((window_start - self._frontier) / ws) < 0
        ):
            raise InputError(
                f"window starting at {window_start} is already closed (open window starts at {self._frontier})"
            )
        nb = self.settings.engine.n_buckets
        for name in ("bucket_load", "bucket_bytes"):
            if name in columns and len(columns[name]) != nb:
                raise InputError(f"{name} must hold engine.n_buckets={nb} values")

    def _apply(
        self, seq: int, kind: str, window_start: float, columns: dict[str, np.ndarray]
    ) -> list[WindowStats]:
        """Batch ``seq`` through the aggregator (and the windows it closes through the rest);
        called with the engine lock held."""
        self._agg_seq = seq
        agg = self._aggregator
        if kind == "counts":
            closed = agg.push_counts(
                window_start,
                columns["keys"],
                columns["reads"],
                columns.get("writes"),
                bucket_load=columns.get("bucket_load"),
                bucket_bytes=columns.get("bucket_bytes"),
            )
        else:
            from regimetune.models import EventBatch

            closed = agg.push(
                EventBatch.from_columns(
                    ts=columns["ts"], key=columns["key"], op=columns.get("op"), size=columns.get("size")
                )
            )
        for w in closed:
            self._on_window(w)
        return closed

    # -- windows and decisions ----------------------------------------------------------------
    def _on_window(self, w: WindowStats) -> None:
        self._n_windows = max(self._n_windows, w.index + 1)
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
        if not auto:
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
            decision = Decision(
                at=self.clock(),
                regime_from=regime_id,
                regime_to=regime_id,
                score=policy.score,
                outcome=outcome,
                detail=f"{reason}: {why}" + ("" if auto else "; not pushed"),
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


__all__ = ["Engine", "IngestResult", "check_bounds"]
