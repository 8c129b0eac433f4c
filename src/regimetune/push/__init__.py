"""Outbound: adapters that push policy versions to rescaling backends, and the outbox that
delivers every version in order with retries.

Adapters (``Backend`` protocol, httpx-transport shaped): :class:`RestBackend` (any REST
backend, with a payload mapping), :class:`ReferenceBackend` (``regimetune backend``) and
:class:`RecordingBackend` (for tests). Delivery: :class:`OutboxWorker` over an
:class:`OutboxStore`; conformance checks for both families live in ``regimetune.push.checks``.
"""

from regimetune.push.base import (
    Backend,
    BaseBackend,
    PermanentPushError,
    PushError,
    PushReceipt,
    PushStatus,
    TransientPushError,
    VersionConflictError,
)
from regimetune.push.outbox import (
    DeliveryEvent,
    EntryState,
    EventKind,
    InMemoryOutboxStore,
    OutboxEntry,
    OutboxStore,
    OutboxWorker,
    RetryPolicy,
)
from regimetune.push.recording import RecordingBackend
from regimetune.push.redact import redact
from regimetune.push.registry import ADAPTERS, backend_for, build_backend
from regimetune.push.rest import ReferenceBackend, RestBackend

__all__ = [
    "ADAPTERS",
    "Backend",
    "BaseBackend",
    "DeliveryEvent",
    "EntryState",
    "EventKind",
    "InMemoryOutboxStore",
    "OutboxEntry",
    "OutboxStore",
    "OutboxWorker",
    "PermanentPushError",
    "VersionConflictError",
    "PushError",
    "PushReceipt",
    "PushStatus",
    "RecordingBackend",
    "ReferenceBackend",
    "RestBackend",
    "RetryPolicy",
    "TransientPushError",
    "backend_for",
    "build_backend",
    "redact",
]
