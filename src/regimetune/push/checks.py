"""Conformance checks for the two plugin families of ``push`` (as river's ``checks``):
adapters (:class:`~regimetune.push.base.Backend`) and outbox stores
(:class:`~regimetune.push.outbox.OutboxStore`).

Each check takes a factory that returns a fresh object (a fresh backend behind an adapter)
and raises ``AssertionError`` when the contract is broken. Parametrise a test over
``BACKEND_CHECKS`` / ``OUTBOX_STORE_CHECKS`` and your factories::

    @pytest.mark.parametrize("check", OUTBOX_STORE_CHECKS, ids=lambda c: c.__name__)
    def test_my_store(check):
        check(lambda: MySqlOutboxStore(url))
"""

from __future__ import annotations

from collections.abc import Callable

from regimetune.models import ConflictError, NotFoundError, Policy, PolicyVersion, PufferscaleWeights
from regimetune.push.base import Backend, PermanentPushError, PushError
from regimetune.push.outbox import OutboxStore


def _version(n: int, *, w_time: float = 1.0) -> PolicyVersion:
    policy = Policy(regime_id=n % 3, weights=PufferscaleWeights(w_time=w_time), source="tuned")
    return PolicyVersion(version=n, policy=policy, created_at=1000.0 + n)


def _refused(backend: Backend, version: PolicyVersion) -> PushError:
    try:
        backend.push(version)
    except PushError as exc:
        return exc
    raise AssertionError(f"{backend.name} accepted version {version.version}, which it must refuse")


# -- adapters -------------------------------------------------------------------------------
def check_push_applies_in_order(make: Callable[[], Backend]) -> None:
    with make() as backend:
        for n in (1, 2, 3):
            receipt = backend.push(_version(n))
            assert receipt.version == n, receipt
            assert receipt.status == "applied", receipt


def check_same_version_is_duplicate(make: Callable[[], Backend]) -> None:
    with make() as backend:
        assert backend.push(_version(1)).status == "applied"
        again = backend.push(_version(1))
        assert again.version == 1 and again.status == "duplicate", again


def check_older_version_refused_for_good(make: Callable[[], Backend]) -> None:
    with make() as backend:
        backend.push(_version(1))
        backend.push(_version(2))
        exc = _refused(backend, _version(1))
        assert isinstance(exc, PermanentPushError) and not exc.retryable, exc
        assert "1" in str(exc)
        # the refusal changed nothing: version 2 is still a duplicate
        assert backend.push(_version(2)).status == "duplicate"


def check_same_number_other_content_refused(make: Callable[[], Backend]) -> None:
    with make() as backend:
        backend.push(_version(1))
        exc = _refused(backend, _version(1, w_time=2.0))
        assert isinstance(exc, PermanentPushError), exc


def check_context_manager_and_close(make: Callable[[], Backend]) -> None:
    backend = make()
    with backend as entered:
        assert entered is backend
        assert isinstance(backend.name, str) and backend.name
    backend.close()  # a second close is harmless


BACKEND_CHECKS: tuple[Callable[[Callable[[], Backend]], None], ...] = (
    check_push_applies_in_order,
    check_same_version_is_duplicate,
    check_older_version_refused_for_good,
    check_same_number_other_content_refused,
    check_context_manager_and_close,
)


# -- outbox stores ----------------------------------------------------------------------------
def _pending_versions(store: OutboxStore) -> list[int]:
    return [e.version.version for e in store.pending()]


def check_store_pending_in_version_order(make: Callable[[], OutboxStore]) -> None:
    store = make()
    assert list(store.pending()) == [] and store.last_delivered() is None
    for n in (1, 2, 5):
        entry = store.append(_version(n))
        assert entry.state == "pending" and entry.attempts == 0 and entry.version == _version(n)
    assert _pending_versions(store) == [1, 2, 5]


def check_store_append_idempotent_and_conflicts(make: Callable[[], OutboxStore]) -> None:
    store = make()
    store.append(_version(1))
    store.append(_version(2))
    store.append(_version(2))  # same content: no-op
    assert _pending_versions(store) == [1, 2]
    store.append(_version(4))
    for bad in (_version(2, w_time=3.0), _version(1, w_time=3.0), _version(3)):
        try:
            store.append(bad)
        except ConflictError:
            pass
        else:
            raise AssertionError(f"append accepted conflicting version {bad.version}")
    assert _pending_versions(store) == [1, 2, 4]


def check_store_attempts_and_finish(make: Callable[[], OutboxStore]) -> None:
    store = make()
    for n in (1, 2, 3):
        store.append(_version(n))
    before = store.pending()[0]
    store.record_attempt(1, error="down", next_attempt_at=50.0)
    store.record_attempt(1, error="still down", next_attempt_at=80.0)
    head = store.pending()[0]
    assert (head.attempts, head.last_error, head.next_attempt_at) == (2, "still down", 80.0), head
    assert before.attempts == 0, "a returned entry changed after a later write"
    store.mark_delivered(1, at=90.0)
    assert _pending_versions(store) == [2, 3]
    store.mark_failed(2, error="refused", at=91.0)
    assert _pending_versions(store) == [3]
    last = store.last_delivered()
    assert last is not None and last.version == 1, "a failed version is not in force"
    store.mark_delivered(3, at=92.0)
    last = store.last_delivered()
    assert last is not None and last == _version(3)
    assert list(store.pending()) == []


def check_store_refused_and_superseded(make: Callable[[], OutboxStore]) -> None:
    store = make()
    for n in (1, 2, 3, 4):
        store.append(_version(n))
    store.mark_refused(1, error="422 invalid weights", at=10.0)
    store.mark_delivered(3, at=11.0)
    store.mark_superseded(2, error="superseded by version 3", at=11.0)
    assert _pending_versions(store) == [4]
    last = store.last_delivered()
    assert last is not None and last.version == 3, "refused and superseded versions are not in force"
    store.mark_superseded(4, error="superseded by version 9", at=12.0)
    assert list(store.pending()) == []
    last = store.last_delivered()
    assert last is not None and last.version == 3


def check_store_unknown_version(make: Callable[[], OutboxStore]) -> None:
    store = make()
    store.append(_version(1))
    for call in (
        lambda: store.mark_delivered(7, at=1.0),
        lambda: store.mark_failed(7, error="x", at=1.0),
        lambda: store.mark_refused(7, error="x", at=1.0),
        lambda: store.mark_superseded(7, error="x", at=1.0),
        lambda: store.record_attempt(7, error="x", next_attempt_at=1.0),
    ):
        try:
            call()
        except NotFoundError:
            pass
        else:
            raise AssertionError("an unknown version was accepted")


OUTBOX_STORE_CHECKS: tuple[Callable[[Callable[[], OutboxStore]], None], ...] = (
    check_store_pending_in_version_order,
    check_store_append_idempotent_and_conflicts,
    check_store_attempts_and_finish,
    check_store_refused_and_superseded,
    check_store_unknown_version,
)

__all__ = ["BACKEND_CHECKS", "OUTBOX_STORE_CHECKS"]
