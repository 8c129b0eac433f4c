"""An in-process backend that records what it receives, for tests (like httpx's
``MockTransport``). It keeps the same contract as a real backend: a version applies once,
the same version again is a duplicate, an older one is refused for good. It can be told to
fail the next N pushes or to be down for a while.

>>> from regimetune.models import Policy, PolicyVersion
>>> rb = RecordingBackend()
>>> v1 = PolicyVersion(version=1, policy=Policy(), created_at=0.0)
>>> rb.push(v1).status, rb.push(v1).status
('applied', 'duplicate')
>>> rb.fail_next(1)
>>> try:
...     rb.push(PolicyVersion(version=2, policy=Policy(), created_at=1.0))
... except TransientPushError as exc:
...     print(exc.retryable)
True
>>> rb.received_versions, rb.attempted_versions
([1], [1, 1, 2])
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable

from regimetune.models import PolicyVersion
from regimetune.push.base import (
    BaseBackend,
    PermanentPushError,
    PushReceipt,
    TransientPushError,
    VersionConflictError,
)


class RecordingBackend(BaseBackend):
    """Records every attempt (``attempts``) and every applied version (``received``).

    ``clock`` decides when a :meth:`go_down` period ends; pass the outbox's clock so a
    fake clock drives both. ``reject`` lists versions refused for good (as a backend
    refuses invalid weights).
    """

    def __init__(
        self,
        *,
        name: str = "recording",
        clock: Callable[[], float] = time.monotonic,
        reject: Iterable[int] = (),
    ) -> None:
        self.name = name
        self.clock = clock
        self.reject = frozenset(reject)
        self._lock = threading.Lock()
        self._attempts: list[PolicyVersion] = []
        self._received: list[PolicyVersion] = []
        self._fail_left = 0
        self._fail_permanent = False
        self._down = False
        self._down_until: float | None = None
        self._closed = False

    # -- steering ---------------------------------------------------------------------
    def fail_next(self, n: int, *, permanent: bool = False) -> None:
        """Fail the next ``n`` pushes (transiently unless ``permanent``)."""
        with self._lock:
            self._fail_left = n
            self._fail_permanent = permanent

    def go_down(self, *, until: float | None = None) -> None:
        """Refuse every push until :meth:`come_up` or until ``clock() >= until``."""
        with self._lock:
            self._down = until is None
            self._down_until = until

    def come_up(self) -> None:
        with self._lock:
            self._down = False
            self._down_until = None

    # -- what happened ----------------------------------------------------------------
    @property
    def attempts(self) -> list[PolicyVersion]:
        with self._lock:
            return list(self._attempts)

    @property
    def received(self) -> list[PolicyVersion]:
        with self._lock:
            return list(self._received)

    @property
    def attempted_versions(self) -> list[int]:
        return [v.version for v in self.attempts]

    @property
    def received_versions(self) -> list[int]:
        return [v.version for v in self.received]

    @property
    def current(self) -> PolicyVersion | None:
        with self._lock:
            return self._received[-1] if self._received else None

    def held_version(self) -> int | None:
        """The version number in force (None before the first push), as a backend says."""
        current = self.current
        return None if current is None else current.version

    @property
    def closed(self) -> bool:
        return self._closed

    # -- the adapter --------------------------------------------------------------------
    def push(self, version: PolicyVersion) -> PushReceipt:
        with self._lock:
            self._attempts.append(version)
            n = version.version
            if self._is_down():
                raise TransientPushError(f"{self.name} is down", version=n)
            if self._fail_left > 0:
                self._fail_left -= 1
                cls = PermanentPushError if self._fail_permanent else TransientPushError
                raise cls(f"{self.name}: injected failure", version=n)
            if n in self.reject:
                raise PermanentPushError(f"{self.name} refuses version {n}", version=n, status_code=422)
            current = self._received[-1] if self._received else None
            if current is not None and n < current.version:
                raise VersionConflictError(
                    f"version {n} is older than version {current.version} in force",
                    version=n,
                    current_version=current.version,
                    code="stale_version",
                )
            if current is not None and n == current.version:
                if current != version:
                    raise VersionConflictError(
                        f"version {n} was already applied with different content",
                        version=n,
                        current_version=n,
                        code="version_conflict",
                    )
                return PushReceipt(version=n, status="duplicate", backend=self.name)
            self._received.append(version)
            return PushReceipt(version=n, status="applied", backend=self.name)

    def _is_down(self) -> bool:
        if self._down:
            return True
        if self._down_until is not None:
            if self.clock() < self._down_until:
                return True
            self._down_until = None
        return False

    def close(self) -> None:
        self._closed = True


__all__ = ["RecordingBackend"]
