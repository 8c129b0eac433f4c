"""The adapter contract: one method that sends a policy version to a rescaling backend.

Shaped like an httpx transport: ``push`` sends, ``close`` releases what the adapter holds,
and every adapter is a context manager. An adapter reports the outcome of one attempt:

* it returns a :class:`PushReceipt` when the backend holds the version afterwards, either
  because it applied it now (``status="applied"``) or because it had applied the same
  version before (``status="duplicate"``; the version is the idempotency key);
* it raises :class:`TransientPushError` when trying again later may succeed (backend down,
  timeout, 5xx, 429);
* it raises :class:`PermanentPushError` when the backend refused the version for good (other
  4xx: a version older than the one in force, invalid weights, bad credentials...).

Both errors are :class:`~regimetune.models.errors.BackendError`, so callers that do not care
about the difference catch one type.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import TracebackType
from typing import Literal, Protocol, Self, runtime_checkable

from regimetune.models import BackendError, PolicyVersion
from regimetune.push.redact import redact

PushStatus = Literal["applied", "duplicate"]


@dataclass(frozen=True, slots=True)
class PushReceipt:
    """A backend's acknowledgement that it holds ``version``.

    >>> PushReceipt(version=3, status="duplicate", backend="recording").status
    'duplicate'
    """

    version: int
    status: PushStatus = "applied"
    backend: str = ""
    detail: str = ""


class PushError(BackendError):
    """One push attempt failed. ``retryable`` tells the outbox whether to try again;
    ``status_code`` is the HTTP status when there was a response; ``retry_after`` the delay
    (seconds) the backend asked for, if any. The message is redacted (URL userinfo,
    tokens): it is written to the decision log and to logs."""

    retryable: bool = False

    def __init__(
        self,
        message: str,
        *,
        version: int | None = None,
        status_code: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        message = redact(message)
        super().__init__(message)
        self.reason = message
        self.version = version
        self.status_code = status_code
        self.retry_after = retry_after


class TransientPushError(PushError):
    """The backend could not take the version now; trying again later may succeed."""

    retryable = True


class PermanentPushError(PushError):
    """The backend refused the version; sending it again will not change that."""

    retryable = False


class VersionConflictError(PermanentPushError):
    """The backend holds ``current_version``, at or above this version (``stale_version``)
    or this number with other content (``version_conflict``): the version number is used up
    at the backend, and the policy needs a new version above ``current_version``."""

    def __init__(self, message: str, *, version: int | None = None, current_version: int, code: str) -> None:
        super().__init__(message, version=version, status_code=409)
        self.current_version = current_version
        self.code = code


@runtime_checkable
class Backend(Protocol):
    """What the outbox needs from an adapter."""

    name: str

    def push(self, version: PolicyVersion) -> PushReceipt: ...

    def close(self) -> None: ...

    def __enter__(self) -> Self: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


class BaseBackend:
    """Convenience base: context-manager support and a no-op ``close``; subclasses
    implement :meth:`push`."""

    name: str = "backend"

    def push(self, version: PolicyVersion) -> PushReceipt:  # pragma: no cover - abstract
        raise NotImplementedError

    def close(self) -> None:
        """Release held resources; calling it twice is harmless."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


__all__ = [
    "Backend",
    "BaseBackend",
    "PermanentPushError",
    "PushError",
    "PushReceipt",
    "PushStatus",
    "TransientPushError",
    "VersionConflictError",
]
