"""The outbox: every policy version is stored first, then delivered to the backend in
order, with retries, by an :class:`OutboxWorker`. The version store holds what the engine
wants (desired); the outbox records what the backend acknowledged (delivered), as a
Kubernetes object has a spec and a status.

Delivery rules (what a storage operator can rely on):

* **In order.** The backend only ever sees increasing version numbers. Version N+1 is not
  sent before N is finished (delivered, refused, superseded or given up).
* **Never given up while the backend is unreachable.** A transient failure (connection
  refused, timeout, 5xx, 429, or a 409 conflict that does not say which version the backend
  holds, which a retry or a newer version may resolve) keeps the version pending and retries it with
  capped exponential backoff and full jitter: attempt k waits ``uniform(0, min(cap, base *
  2**(k-1)))`` seconds (at least the backend's ``Retry-After``, at most ``cap``). By default
  (``max_attempts=None``) it retries forever, however long the outage.
* **Superseded only by a delivered newer version.** With ``supersede=True`` the worker
  sends the newest pending version of the head's scope (each version is a whole policy)
  and, only once the backend acknowledged it, records the older pending versions of that
  scope as ``superseded`` by it: after an outage the backend goes straight to what the
  engine wants now instead of replaying stale regimes. Backoff carries over from the
  older versions, so a new version does not restart it. Without it every version is sent.
  A service has one scope today (:func:`scope_of`).
* **Exactly once at the backend.** The version number is the idempotency key: if the
  worker dies between a push and ``mark_delivered``, the re-push is acknowledged as a
  duplicate and counts as delivered.
* **Refusals do not block.** A version the backend refuses for good (a 4xx other than a
  409 conflict: invalid weights, bad credentials) is recorded ``refused`` with the reason
  at once, and delivery moves on; sending it again would not help. With ``max_attempts``
  set, a version that keeps failing transiently is given up (``failed``) after that many.
* **A version number the backend holds otherwise is never re-sent.** A 409 that says the
  backend holds a version at or above this one (``stale_version``, ``version_conflict``)
  reports a ``conflict`` with the backend's version, which the service resolves by making
  the policy it wants a new version above it, and then refuses the version. At the first
  pass the worker also asks the backend which version it holds (when the adapter can say)
  and reports a ``conflict`` when it is above every version in the outbox (the store lost
  some). A conflict is reported until its handler returns: when the resolution fails (a
  store that cannot write), the pass fails, the version stays pending, and the next pass
  (or the first after a restart) meets the same 409, or the same answer to its question,
  and reports it again; the refusal is recorded only once the resolution is.
* **A delivery that cannot be recorded is not pushed again.** When the store fails to
  record an acknowledged push, the worker keeps the receipt and records it on the next pass
  (backing off, as on any failing pass) before it pushes anything.
* **Reported.** Every outcome is a :class:`DeliveryEvent` (returned by :meth:`step` and
  passed to ``on_event``) that the service writes to its decision log: ``delivered``,
  ``superseded``, ``retrying`` (each failed attempt), ``stalled`` (once, when a version has
  failed ``report_after`` times in a row: the backend is behind), ``refused``, ``failed``
  and ``conflict``. Events carry ``in_force``, the last delivered version, which stays in
  force at the backend.

The storage is a protocol, :class:`OutboxStore`; :class:`InMemoryOutboxStore` serves tests
and one-shot CLI runs; the service keeps its outbox in its SQL store.
``regimetune.push.checks.check_outbox_store`` is the conformance suite for implementations.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from regimetune.models import ConfigError, ConflictError, NotFoundError, PolicyVersion, PushOutcome
from regimetune.push.base import Backend, PushError, PushReceipt, VersionConflictError

log = logging.getLogger(__name__)

EntryState = Literal["pending", "delivered", "failed", "refused", "superseded"]
EventKind = Literal["delivered", "superseded", "retrying", "stalled", "failed", "refused", "conflict"]
FINISHED: frozenset[str] = frozenset({"delivered", "failed", "refused", "superseded"})


def scope_of(version: PolicyVersion) -> str:
    """The scope a version belongs to: only a newer version of the same scope supersedes
    an older one. A service pushes one policy for all its servers today, so one scope."""
    return "service"


@dataclass(frozen=True, slots=True)
class OutboxEntry:
    """A version in the outbox and how its delivery stands. ``attempts`` counts failed
    attempts; ``next_attempt_at`` is when the worker may try again (clock seconds)."""

    version: PolicyVersion
    state: EntryState = "pending"
    attempts: int = 0
    next_attempt_at: float = 0.0
    last_error: str | None = None
    finished_at: float | None = None


@runtime_checkable
class OutboxStore(Protocol):
    """Where the outbox lives. Implementations return frozen entries that later writes do
    not change, and make each call atomic.

    * ``append``: add a pending version. The same version again with the same content is a
      no-op (returns the stored entry); the same number with other content, or a number
      not above every stored one, raises ``ConflictError``.
    * ``pending``: the pending entries, in increasing version order.
    * ``mark_delivered`` / ``mark_failed`` / ``mark_refused`` / ``mark_superseded``: finish
      a version (``NotFoundError`` if unknown); ``error`` says why (for ``superseded``:
      which version was delivered instead).
    * ``record_attempt``: one more failed attempt, its error, and when to try again.
    * ``last_delivered``: the newest delivered version (the one in force), or None.
    * ``newest_version``: the newest version number in the outbox, whatever its state.
    """

    def append(self, version: PolicyVersion) -> OutboxEntry: ...

    def pending(self) -> Sequence[OutboxEntry]: ...

    def mark_delivered(self, version: int, *, at: float) -> None: ...

    def record_attempt(self, version: int, *, error: str, next_attempt_at: float) -> None: ...

    def mark_failed(self, version: int, *, error: str, at: float) -> None: ...

    def mark_refused(self, version: int, *, error: str, at: float) -> None: ...

    def mark_superseded(self, version: int, *, error: str, at: float) -> None: ...

    def last_delivered(self) -> PolicyVersion | None: ...

    def newest_version(self) -> int | None: ...


class InMemoryOutboxStore:
    """A thread-safe outbox in a dict, for tests and one-shot runs.

    >>> from regimetune.models import Policy
    >>> store = InMemoryOutboxStore()
    >>> _ = store.append(PolicyVersion(version=1, policy=Policy(), created_at=0.0))
    >>> [e.version.version for e in store.pending()]
    [1]
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[int, OutboxEntry] = {}

    def append(self, version: PolicyVersion) -> OutboxEntry:
        with self._lock:
            n = version.version
            old = self._entries.get(n)
            if old is not None:
                if old.version != version:
                    raise ConflictError(f"outbox already holds version {n} with other content")
                return old
            newest = max(self._entries, default=0)
            if n < newest:
                raise ConflictError(f"version {n} is older than version {newest} in the outbox")
            entry = OutboxEntry(version=version)
            self._entries[n] = entry
            return entry

    def pending(self) -> list[OutboxEntry]:
        with self._lock:
            return [self._entries[n] for n in sorted(self._entries) if self._entries[n].state == "pending"]

    def _update(self, version: int, change: Callable[[OutboxEntry], OutboxEntry]) -> None:
        with self._lock:
            try:
                entry = self._entries[version]
            except KeyError:
                raise NotFoundError(f"outbox holds no version {version}") from None
            self._entries[version] = change(entry)

    def mark_delivered(self, version: int, *, at: float) -> None:
        self._update(version, lambda e: dataclasses.replace(e, state="delivered", finished_at=at))

    def record_attempt(self, version: int, *, error: str, next_attempt_at: float) -> None:
        self._update(
            version,
            lambda e: dataclasses.replace(
                e, attempts=e.attempts + 1, last_error=error, next_attempt_at=next_attempt_at
            ),
        )

    def _finish(self, version: int, state: EntryState, error: str, at: float) -> None:
        self._update(version, lambda e: dataclasses.replace(e, state=state, last_error=error, finished_at=at))

    def mark_failed(self, version: int, *, error: str, at: float) -> None:
        self._finish(version, "failed", error, at)

    def mark_refused(self, version: int, *, error: str, at: float) -> None:
        self._finish(version, "refused", error, at)

    def mark_superseded(self, version: int, *, error: str, at: float) -> None:
        self._finish(version, "superseded", error, at)

    def last_delivered(self) -> PolicyVersion | None:
        with self._lock:
            done = [n for n, e in self._entries.items() if e.state == "delivered"]
            return self._entries[max(done)].version if done else None

    def newest_version(self) -> int | None:
        with self._lock:
            return max(self._entries, default=None)

    # not part of the protocol: for tests and reports
    def entries(self) -> list[OutboxEntry]:
        with self._lock:
            return [self._entries[n] for n in sorted(self._entries)]


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Exponential backoff with full jitter (AWS architecture blog, "Exponential Backoff
    and Jitter"): attempt ``k`` (1-based) waits ``uniform(0, min(cap, base * 2**(k-1)))``.
    ``max_attempts=None`` retries transient failures forever.

    >>> RetryPolicy(base=1.0, cap=5.0).ceiling(4)
    5.0
    """

    base: float = 0.5
    cap: float = 60.0
    max_attempts: int | None = None

    def __post_init__(self) -> None:
        if not self.base > 0:
            raise ConfigError(f"backoff base must be > 0 seconds, got {self.base}")
        if not self.cap >= self.base:
            raise ConfigError(f"backoff cap ({self.cap}) must be >= base ({self.base})")
        if self.max_attempts is not None and self.max_attempts < 1:
            raise ConfigError(f"max_attempts must be >= 1 or None, got {self.max_attempts}")

    def ceiling(self, attempt: int) -> float:
        """The largest delay after the ``attempt``-th failure."""
        exponent = min(max(attempt - 1, 0), 62)  # 2**62 * base is far past any cap
        return min(self.cap, self.base * 2.0**exponent)

    def delay(self, attempt: int, rng: random.Random, *, retry_after: float | None = None) -> float:
        """A jittered delay; never below the backend's ``retry_after`` (itself capped)."""
        d = rng.uniform(0.0, self.ceiling(attempt))
        if retry_after is not None:
            d = max(d, min(retry_after, self.cap))
        return d


@dataclass(frozen=True, slots=True)
class DeliveryEvent:
    """One outcome of the outbox, for the decision log. ``in_force`` is the newest
    version the backend holds as far as the outbox knows; ``backend_version`` (a
    ``conflict``) the version the backend says it holds."""

    kind: EventKind
    version: int
    at: float
    attempts: int
    error: str | None = None
    next_attempt_at: float | None = None
    in_force: int | None = None
    duplicate: bool = False
    permanent: bool = False
    backend_version: int | None = None

    @property
    def outcome(self) -> PushOutcome:
        """The decision-log outcome of the version after this event."""
        if self.kind == "delivered":
            return PushOutcome.DELIVERED
        if self.kind == "failed":
            return PushOutcome.FAILED
        if self.kind == "refused":
            return PushOutcome.REFUSED
        if self.kind == "superseded":
            return PushOutcome.SUPERSEDED
        return PushOutcome.PENDING


class OutboxWorker:
    """Deliver the versions of ``store`` to ``backend`` by the rules in the module doc.

    ``clock`` (seconds, wall clock by default since ``next_attempt_at`` is persisted) and
    ``sleep`` are injectable so tests run on a fake clock; ``seed`` fixes the jitter;
    ``supersede`` sends the newest pending version of a scope (see the module doc).
    Call :meth:`step` from your own loop, :meth:`drain` to deliver everything now, or
    :meth:`start` a background thread and :meth:`notify` it when a version is appended.
    Run one worker per outbox: two workers on the same store could push a version twice
    (harmless at the backend, which answers a duplicate, but noisy in the log).
    """

    def __init__(
        self,
        store: OutboxStore,
        backend: Backend,
        *,
        retry: RetryPolicy | None = None,
        report_after: int = 3,
        on_event: Callable[[DeliveryEvent], None] | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        seed: int | None = None,
        supersede: bool = False,
    ) -> None:
        self.store = store
        self.backend = backend
        self.retry = retry
        self.report_after = report_after
        self.on_event = on_event
        self.clock = clock
        self.sleep = sleep
        self.seed = seed
        self.supersede = supersede
        self._rng: random.Random | None = None
        self._unrecorded: tuple[list[OutboxEntry], int, PushReceipt, float, bool] | None = None
        self._asked_backend = False
        self.last_failure: str | None = None  # why the last pass failed (None: it did not)
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def _retry(self) -> RetryPolicy:
        return self.retry if self.retry is not None else RetryPolicy()

    def _emit(self, events: list[DeliveryEvent], event: DeliveryEvent) -> None:
        events.append(event)
        if self.on_event is not None:
            self.on_event(event)

    def _in_force(self) -> int | None:
        last = self.store.last_delivered()
        return last.version if last is not None else None

    # -- one pass ----------------------------------------------------------------------------
    def _batch(self, pending: Sequence[OutboxEntry]) -> list[OutboxEntry]:
        """The versions the next push settles: the head alone, or with ``supersede`` every
        pending version of the head's scope (the newest is sent)."""
        if not self.supersede:
            return [pending[0]]
        scope = scope_of(pending[0].version)
        return [e for e in pending if scope_of(e.version) == scope]

    def step(self) -> list[DeliveryEvent]:
        """Push every pending version that is due, oldest first (or the newest of its scope,
        with ``supersede``), until one fails transiently (it then waits for its backoff) or
        none is left."""
        if self._rng is None:
            self._rng = random.Random(self.seed)
        events: list[DeliveryEvent] = []
        if not self._asked_backend:
            self._ask_backend(events)
        if self._unrecorded is not None:  # pushed before, not recorded: record, do not push
            batch, attempt, receipt, at, superseded_done = self._unrecorded
            self._record_delivery(batch, attempt, receipt, at, events, superseded_done)
        while True:
            pending = self.store.pending()
            if not pending:
                return events
            batch = self._batch(pending)
            target, now = batch[-1], self.clock()
            if max(e.next_attempt_at for e in batch) > now:
                return events
            attempt = max(e.attempts for e in batch) + 1
            try:
                receipt = self.backend.push(target.version)
            except PushError as exc:
                if not self._failed(target, attempt, exc, now, events):
                    return events
                continue
            self._record_delivery(batch, attempt, receipt, now, events)

    def _ask_backend(self, events: list[DeliveryEvent]) -> None:
        """Once: a ``conflict`` when the backend holds a version above every one in the
        outbox (an adapter with ``held_version()`` says which; others are not asked)."""
        ask = getattr(self.backend, "held_version", None)
        if ask is None:
            self._asked_backend = True
            return
        try:
            held: int | None = ask()
        except PushError as exc:  # down, or it will not say: asked again on the next pass
            log.info("cannot ask the backend which version it holds: %s", exc)
            return
        newest = self.store.newest_version()
        if held is not None and held > (newest or 0):
            error = (
                f"the backend holds version {held}, above every version the outbox "
                f"has ({newest or 'none'}): the store lost versions it had delivered"
            )
            log.warning("%s", error)
            self._emit(
                events,
                DeliveryEvent(
                    kind="conflict",
                    version=held,
                    at=self.clock(),
                    attempts=0,
                    error=error,
                    in_force=held,
                    backend_version=held,
                ),
            )
        self._asked_backend = True  # not before: a handler that failed hears of it again

    def _record_delivery(
        self,
        batch: list[OutboxEntry],
        attempt: int,
        receipt: PushReceipt,
        now: float,
        events: list[DeliveryEvent],
        superseded_done: bool = False,
    ) -> None:
        """Record ``batch``'s older versions superseded (and say so), then its newest one
        delivered; if the store fails, keep the receipt to finish on the next pass (no
        re-push). The older ones are recorded first: once the delivery shows, so do they."""
        n = batch[-1].version.version
        self._unrecorded = (batch, attempt, receipt, now, superseded_done)
        if not superseded_done:
            reason = f"superseded by version {n}, delivered first"
            for older in batch[:-1]:
                m = older.version.version
                self.store.mark_superseded(m, error=reason, at=now)
                self._emit(
                    events,
                    DeliveryEvent(
                        kind="superseded",
                        version=m,
                        at=now,
                        attempts=older.attempts,
                        error=reason,
                        in_force=n,
                    ),
                )
            self._unrecorded = (batch, attempt, receipt, now, True)
        self.store.mark_delivered(n, at=now)
        self._unrecorded = None
        self._emit(
            events,
            DeliveryEvent(
                kind="delivered",
                version=n,
                at=now,
                attempts=attempt,
                in_force=n,
                duplicate=receipt.status == "duplicate",
            ),
        )

    def _failed(
        self, head: OutboxEntry, attempt: int, exc: PushError, now: float, events: list[DeliveryEvent]
    ) -> bool:
        """Record a failed attempt; True when the version is finished (move on)."""
        n, retry, error = head.version.version, self._retry, str(exc)
        conflict = exc if isinstance(exc, VersionConflictError) else None
        # a 409 that does not say which version the backend holds: not refused for good
        transient = exc.retryable or (exc.status_code == 409 and conflict is None)
        if not transient:
            if conflict is not None:  # resolved before the refusal is recorded (see step)
                self._emit(
                    events,
                    DeliveryEvent(
                        kind="conflict",
                        version=n,
                        at=now,
                        attempts=attempt,
                        error=error,
                        in_force=self._in_force(),
                        backend_version=conflict.current_version,
                    ),
                )
            self.store.mark_refused(n, error=error, at=now)
            self._emit(
                events,
                DeliveryEvent(
                    kind="refused",
                    version=n,
                    at=now,
                    attempts=attempt,
                    error=error,
                    in_force=self._in_force(),
                    permanent=True,
                ),
            )
            return True
        if retry.max_attempts is not None and attempt >= retry.max_attempts:
            error = f"gave up after {attempt} attempts: {error}"
            self.store.mark_failed(n, error=error, at=now)
            self._emit(
                events,
                DeliveryEvent(
                    kind="failed", version=n, at=now, attempts=attempt, error=error, in_force=self._in_force()
                ),
            )
            return True
        assert self._rng is not None
        due = now + retry.delay(attempt, self._rng, retry_after=exc.retry_after)
        self.store.record_attempt(n, error=error, next_attempt_at=due)
        kinds: tuple[EventKind, ...] = (
            ("retrying", "stalled") if attempt == self.report_after else ("retrying",)
        )
        for kind in kinds:
            self._emit(
                events,
                DeliveryEvent(
                    kind=kind,
                    version=n,
                    at=now,
                    attempts=attempt,
                    error=error,
                    next_attempt_at=due,
                    in_force=self._in_force(),
                ),
            )
        return False

    def next_due(self) -> float | None:
        """When the next push may be tried (None: nothing pending)."""
        pending = self.store.pending()
        return max(e.next_attempt_at for e in self._batch(pending)) if pending else None

    # -- loops -------------------------------------------------------------------------------
    def drain(self, *, timeout: float | None = None) -> list[DeliveryEvent]:
        """Step and sleep until the outbox is empty or ``timeout`` clock seconds passed."""
        start = self.clock()
        events: list[DeliveryEvent] = []
        while True:
            events.extend(self.step())
            due = self.next_due()
            if due is None:
                return events
            now = self.clock()
            if timeout is not None and now - start >= timeout:
                return events
            wait = max(due - now, 0.0)
            if timeout is not None:
                wait = min(wait, start + timeout - now)
            self.sleep(wait)

    def notify(self) -> None:
        """Wake the background thread (call after appending a version)."""
        self._wake.set()

    def run(self, *, idle: float = 1.0) -> None:
        """Deliver until :meth:`stop`; wakes on :meth:`notify`, when the head is due, or
        every ``idle`` seconds. A failing pass (a store that cannot write, an adapter bug)
        is logged and retried with the retry policy's backoff (a notify does not cut it
        short), never fatal."""
        failures = 0
        while not self._stop.is_set():
            try:
                self.step()
                due = self.next_due()
            except Exception as exc:  # the loop must outlive a failing store or adapter bug
                failures += 1
                wait = self._retry.ceiling(failures)
                if failures == 1:
                    log.exception("outbox delivery pass failed; backing off (%.1f s)", wait)
                else:
                    log.warning(
                        "outbox delivery pass %d failed (%s); backing off %.1f s", failures, exc, wait
                    )
                self.last_failure = str(exc)
                self._stop.wait(wait)
                continue
            failures = 0
            self.last_failure = None
            wait = idle if due is None else min(idle, max(due - self.clock(), 0.0))
            self._wake.wait(wait)
            self._wake.clear()

    def start(self, *, idle: float = 1.0) -> threading.Thread:
        """Run :meth:`run` in a daemon thread."""
        if self._thread is not None and self._thread.is_alive():
            return self._thread
        self._stop.clear()
        self._thread = threading.Thread(
            target=self.run, kwargs={"idle": idle}, name="regimetune-outbox", daemon=True
        )
        self._thread.start()
        return self._thread

    def stop(self, *, timeout: float | None = 5.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None


__all__ = [
    "DeliveryEvent",
    "EntryState",
    "EventKind",
    "FINISHED",
    "InMemoryOutboxStore",
    "OutboxEntry",
    "OutboxStore",
    "OutboxWorker",
    "RetryPolicy",
    "scope_of",
]
