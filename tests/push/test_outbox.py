"""Outbox delivery on a fake clock: order, retries, backoff, reports."""

from __future__ import annotations

import random
import time
from collections.abc import Callable

import pytest

from regimetune.models import ConfigError, Policy, PolicyVersion, PushOutcome
from regimetune.push import (
    DeliveryEvent,
    InMemoryOutboxStore,
    OutboxWorker,
    PushReceipt,
    RecordingBackend,
    RetryPolicy,
)
from regimetune.push.checks import OUTBOX_STORE_CHECKS


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds >= 0
        self.sleeps.append(seconds)
        self.now += seconds


def pv(n: int) -> PolicyVersion:
    return PolicyVersion(version=n, policy=Policy(regime_id=n % 4), created_at=float(n))


def setup(*, retry: RetryPolicy | None = None, reject: tuple[int, ...] = (), report_after: int = 3):
    clock = FakeClock()
    store = InMemoryOutboxStore()
    backend = RecordingBackend(clock=clock, reject=reject)
    events: list[DeliveryEvent] = []
    worker = OutboxWorker(
        store,
        backend,
        retry=retry,
        report_after=report_after,
        on_event=events.append,
        clock=clock,
        sleep=clock.sleep,
        seed=1,
    )
    return clock, store, backend, worker, events


@pytest.mark.parametrize("check", OUTBOX_STORE_CHECKS, ids=lambda c: c.__name__)
def test_in_memory_store_conformance(check: Callable) -> None:
    check(InMemoryOutboxStore)


def test_delivers_in_order_once() -> None:
    _, store, backend, worker, events = setup()
    for n in (1, 2, 3):
        store.append(pv(n))
    returned = worker.step()
    assert backend.received_versions == [1, 2, 3] == backend.attempted_versions
    assert [e.kind for e in returned] == ["delivered"] * 3 and returned == events
    assert [e.outcome for e in events] == [PushOutcome.DELIVERED] * 3
    assert store.pending() == [] and store.last_delivered() == pv(3)
    assert worker.step() == []  # nothing left: no further pushes
    assert backend.attempted_versions == [1, 2, 3]


def test_backend_down_for_a_while_gets_every_version_once_in_order() -> None:
    clock, store, backend, worker, events = setup(retry=RetryPolicy(base=0.5, cap=8.0))
    store.append(pv(1))
    worker.step()
    backend.go_down(until=clock.now + 120.0)
    for n in range(2, 7):
        store.append(pv(n))
    worker.drain()
    assert clock.now >= 1120.0  # waited for the backend, dropped nothing
    assert backend.received_versions == [1, 2, 3, 4, 5, 6]
    # while down only the head (2) was tried: 3.. never went before 2 was delivered
    first_ok = backend.attempted_versions.index(3)
    assert set(backend.attempted_versions[1:first_ok]) == {2}
    assert backend.attempted_versions[first_ok:] == [3, 4, 5, 6]
    stalled = [e for e in events if e.kind == "stalled"]
    assert len(stalled) == 1 and stalled[0].version == 2 and stalled[0].in_force == 1
    assert all(s <= 8.0 for s in clock.sleeps)


def test_backoff_grows_and_is_jittered_within_bounds() -> None:
    policy = RetryPolicy(base=0.5, cap=30.0)
    rng = random.Random(3)
    for attempt in range(1, 12):
        ceiling = min(30.0, 0.5 * 2 ** (attempt - 1))
        assert policy.ceiling(attempt) == ceiling
        draws = [policy.delay(attempt, rng) for _ in range(400)]
        assert all(0.0 <= d <= ceiling for d in draws)
        assert max(draws) > 0.8 * ceiling and min(draws) < 0.2 * ceiling  # full jitter spreads
    assert policy.delay(1, rng, retry_after=12.0) >= 12.0
    assert policy.delay(1, rng, retry_after=500.0) <= 30.0

    # the worker uses it: gaps between attempts stay under the growing ceiling
    clock, store, backend, worker, events = setup(retry=RetryPolicy(base=1.0, cap=1000.0))
    backend.go_down()
    store.append(pv(1))
    for _ in range(10):
        worker.step()
        clock.now = worker.next_due()
    waits = [e.next_attempt_at - e.at for e in events if e.kind == "retrying"]
    assert len(waits) == 10
    assert all(0 <= w <= 2 ** (k) for k, w in enumerate(waits))
    assert sum(waits[5:]) > sum(waits[:5])  # grows (with overwhelming probability, seeded)


def test_permanent_refusal_is_reported_and_does_not_block() -> None:
    _, store, backend, worker, events = setup(reject=(2,))
    for n in (1, 2, 3):
        store.append(pv(n))
    worker.step()
    assert backend.received_versions == [1, 3]
    refused = [e for e in events if e.kind == "refused"]
    assert len(refused) == 1 and refused[0].version == 2 and refused[0].permanent
    assert refused[0].outcome is PushOutcome.REFUSED and refused[0].in_force == 1
    assert "refuses version 2" in (refused[0].error or "")
    assert backend.attempted_versions.count(2) == 1  # not retried
    assert [e.state for e in store.entries()] == ["delivered", "refused", "delivered"]


def test_default_retries_forever_through_a_long_outage() -> None:
    # issue 13, finding 2: the service gave each version up after 8 attempts (~10 s)
    clock, store, backend, worker, events = setup(retry=RetryPolicy(base=0.2, cap=10.0))
    backend.go_down()
    for n in (1, 2, 3):
        store.append(pv(n))
    worker.drain(timeout=3600.0)  # an hour down: hundreds of attempts
    assert backend.received_versions == [] and len(backend.attempts) > 300
    assert not [e for e in events if e.kind in ("failed", "refused")]
    assert max(clock.sleeps) <= 10.0  # the cap holds
    backend.come_up()
    worker.drain(timeout=60.0)
    assert backend.received_versions == [1, 2, 3]


def test_supersede_sends_the_newest_and_records_the_older_once_it_is_delivered() -> None:
    clock, store, backend, worker, events = setup(retry=RetryPolicy(base=0.5, cap=4.0))
    worker.supersede = True
    store.append(pv(1))
    worker.step()
    backend.go_down()
    for n in (2, 3, 4):
        store.append(pv(n))
        worker.step()
        clock.now += 1.0
    # nothing is superseded while the newest has not been delivered
    assert [e.state for e in store.entries()] == ["delivered", "pending", "pending", "pending"]
    assert set(backend.attempted_versions[1:]) <= {2, 3, 4}
    backend.come_up()
    worker.drain(timeout=60.0)
    assert backend.received_versions == [1, 4]
    assert [e.state for e in store.entries()] == ["delivered", "superseded", "superseded", "delivered"]
    sup = [e for e in events if e.kind == "superseded"]
    assert [e.version for e in sup] == [2, 3] and all(e.in_force == 4 for e in sup)
    assert all(e.outcome is PushOutcome.SUPERSEDED and "version 4" in (e.error or "") for e in sup)


def test_supersede_keeps_the_backoff_of_the_older_versions() -> None:
    clock, store, backend, worker, _ = setup(retry=RetryPolicy(base=1.0, cap=64.0))
    worker.supersede = True
    backend.go_down()
    store.append(pv(1))
    for _ in range(6):
        clock.now = worker.next_due() or clock.now
        worker.step()
    due = worker.next_due()
    assert due is not None and due > clock.now
    store.append(pv(2))  # a new version does not restart the backoff
    assert worker.next_due() == due
    n = len(backend.attempts)
    worker.step()
    assert len(backend.attempts) == n


def test_refused_newest_falls_back_to_the_older_pending_version() -> None:
    _, store, backend, worker, events = setup(reject=(3,))
    worker.supersede = True
    for n in (1, 2, 3):
        store.append(pv(n))
    worker.step()
    # 3 was refused (not delivered), so it superseded nothing: 2 goes out after it
    assert backend.attempted_versions == [3, 2] and backend.received_versions == [2]
    assert [e.state for e in store.entries()] == ["superseded", "delivered", "refused"]
    assert [e.kind for e in events] == ["refused", "superseded", "delivered"]


def test_a_409_naming_the_backends_version_is_refused_and_reported_not_retried() -> None:
    _, store, backend, worker, events = setup(retry=RetryPolicy(base=0.1, cap=1.0))
    backend.push(pv(5))  # the backend holds a version the outbox never sent
    for n in (1, 6):
        store.append(pv(n))
    worker.drain(timeout=5.0)
    assert [e.state for e in store.entries()] == ["refused", "delivered"]
    assert backend.attempted_versions == [5, 1, 6]  # version 1 once: never retried
    (conflict,) = [e for e in events if e.kind == "conflict"]
    assert conflict.version == 1 and conflict.backend_version == 5
    assert "older than version 5" in (conflict.error or "")


def test_a_backend_ahead_of_the_outbox_is_reported_at_the_first_pass() -> None:
    _, store, backend, worker, events = setup()
    backend.push(pv(7))  # delivered once; the store that knew it was lost
    store.append(pv(2))
    worker.step()
    assert events[0].kind == "conflict" and events[0].backend_version == 7
    assert backend.attempted_versions[0] == 7  # reported before version 2 went out


def _failing_once(events: list[DeliveryEvent], kind: str) -> Callable[[DeliveryEvent], None]:
    """An event handler that records every event and fails on the first of ``kind`` (the
    service's store could not record what it does about it)."""
    failed: list[DeliveryEvent] = []

    def handle(ev: DeliveryEvent) -> None:
        events.append(ev)
        if ev.kind == kind and not failed:
            failed.append(ev)
            raise OSError("database or disk is full")

    return handle


def test_a_conflict_whose_handler_failed_is_reported_again_and_refused_only_after() -> None:
    _, store, backend, worker, events = setup()
    backend.push(pv(5))
    store.append(pv(1))
    worker.backend = _Silent(backend)  # cannot say which version it holds: the 409 tells
    worker.on_event = _failing_once(events, "conflict")
    with pytest.raises(OSError):
        worker.step()
    assert [e.state for e in store.entries()] == ["pending"]  # not refused while unresolved
    worker.step()
    assert [e.kind for e in events] == ["conflict", "conflict", "refused"]
    assert [e.state for e in store.entries()] == ["refused"]
    assert backend.attempted_versions == [5, 1, 1]


def test_a_backend_ahead_whose_handler_failed_is_reported_again() -> None:
    _, store, backend, worker, events = setup()
    backend.push(pv(7))
    store.append(pv(2))
    worker.on_event = _failing_once(events, "conflict")
    with pytest.raises(OSError):
        worker.step()
    assert backend.attempted_versions == [7]  # nothing pushed while the conflict is unresolved
    worker.step()
    assert [e.kind for e in events[:2]] == ["conflict", "conflict"]
    assert events[1].backend_version == 7


class _Silent:
    """``backend`` without ``held_version``."""

    def __init__(self, backend: RecordingBackend) -> None:
        self.push = backend.push
        self.close = backend.close


class _RecordingFails(InMemoryOutboxStore):
    """An outbox whose store cannot record the next ``n`` deliveries (a full disk)."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.fail = n

    def mark_delivered(self, version: int, *, at: float) -> None:
        if self.fail:
            self.fail -= 1
            raise OSError("database or disk is full")
        super().mark_delivered(version, at=at)


def test_a_delivery_the_store_cannot_record_is_recorded_later_not_pushed_again() -> None:
    clock = FakeClock()
    store, backend = _RecordingFails(2), RecordingBackend(clock=clock)
    events: list[DeliveryEvent] = []
    worker = OutboxWorker(store, backend, on_event=events.append, clock=clock, sleep=clock.sleep)
    store.append(pv(1))
    for _ in range(2):
        with pytest.raises(OSError):
            worker.step()
    assert backend.attempted_versions == [1] and [e.state for e in store.entries()] == ["pending"]
    worker.step()
    assert backend.attempted_versions == [1]
    assert [e.state for e in store.entries()] == ["delivered"]
    assert [e.kind for e in events] == ["delivered"]


def test_a_failing_pass_backs_off_instead_of_spinning() -> None:
    class Broken(InMemoryOutboxStore):
        passes = 0

        def pending(self) -> list:
            Broken.passes += 1
            raise OSError("disk I/O error")

    store = Broken()
    worker = OutboxWorker(store, RecordingBackend(), retry=RetryPolicy(base=0.2, cap=5.0))
    worker.start(idle=0.001)
    time.sleep(1.0)
    worker.stop()
    # 0.2, 0.4, 0.8 s apart: 3 passes in a second where an idle loop would make hundreds
    assert 2 <= Broken.passes <= 4
    assert worker.last_failure == "disk I/O error"


def test_max_attempts_gives_up_and_moves_on() -> None:
    _, store, backend, worker, events = setup(retry=RetryPolicy(base=0.1, cap=1.0, max_attempts=4))
    store.append(pv(1))
    store.append(pv(2))
    backend.fail_next(4)
    worker.drain()
    assert backend.attempted_versions == [1, 1, 1, 1, 2]
    assert backend.received_versions == [2]
    (failed,) = [e for e in events if e.kind == "failed"]
    assert failed.version == 1 and failed.attempts == 4 and not failed.permanent
    assert "gave up after 4 attempts" in (failed.error or "") and failed.in_force is None


def test_crash_after_push_is_redelivered_as_duplicate() -> None:
    _, store, backend, worker, events = setup()
    store.append(pv(1))
    backend.push(pv(1))  # the push went out, then the service died before mark_delivered
    worker.step()
    assert backend.received_versions == [1]
    assert events[-1].kind == "delivered" and events[-1].duplicate


def test_drain_timeout_keeps_version_pending() -> None:
    clock, store, backend, worker, _ = setup(retry=RetryPolicy(base=1.0, cap=4.0))
    backend.go_down()
    store.append(pv(1))
    worker.drain(timeout=30.0)
    assert clock.now == pytest.approx(1030.0)
    (entry,) = store.pending()
    assert entry.attempts >= 5 and "down" in (entry.last_error or "")
    assert backend.received_versions == []


def test_bad_retry_settings() -> None:
    with pytest.raises(ConfigError, match="cap"):
        RetryPolicy(base=2.0, cap=1.0)
    with pytest.raises(ConfigError, match="base"):
        RetryPolicy(base=0.0)
    with pytest.raises(ConfigError, match="max_attempts"):
        RetryPolicy(max_attempts=0)


def test_background_thread_delivers_on_notify() -> None:
    store = InMemoryOutboxStore()
    backend = RecordingBackend()
    worker = OutboxWorker(store, backend, retry=RetryPolicy(base=0.01, cap=0.05))
    worker.start(idle=5.0)
    try:
        backend.fail_next(2)
        for n in (1, 2, 3):
            store.append(pv(n))
            worker.notify()
        deadline = time.monotonic() + 5.0
        while backend.received_versions != [1, 2, 3] and time.monotonic() < deadline:
            time.sleep(0.01)
        assert backend.received_versions == [1, 2, 3]
    finally:
        worker.stop()


def test_thread_survives_a_broken_store(caplog: pytest.LogCaptureFixture) -> None:
    class Flaky(InMemoryOutboxStore):
        calls = 0

        def pending(self):  # type: ignore[override]
            Flaky.calls += 1
            if Flaky.calls <= 2:
                raise OSError("disk hiccup")
            return super().pending()

    store = Flaky()
    store.append(pv(1))
    backend = RecordingBackend()
    worker = OutboxWorker(store, backend)
    worker.start(idle=0.01)
    deadline = time.monotonic() + 5.0
    while backend.received_versions != [1] and time.monotonic() < deadline:
        time.sleep(0.01)
    worker.stop()
    assert backend.received_versions == [1]
    assert "disk hiccup" in caplog.text


def test_receipt_is_frozen() -> None:
    r = PushReceipt(version=1)
    with pytest.raises(AttributeError):
        r.version = 2  # type: ignore[misc]
