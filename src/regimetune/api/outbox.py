"""The outbox in the service's SQL store: :class:`regimetune.push.OutboxStore` over the
``rt_outbox`` table, so a version enqueued with its decision (one transaction) survives a
restart and is delivered by the push package's :class:`~regimetune.push.OutboxWorker`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlalchemy as sa

from regimetune.api.store import SqlStore
from regimetune.api.store import schema as t
from regimetune.models import ConflictError, NotFoundError, PolicyVersion
from regimetune.push import OutboxEntry


def _entry(r: Any) -> OutboxEntry:
    return OutboxEntry(
        version=PolicyVersion.model_validate(r.payload),
        state=r.state,
        attempts=r.attempts,
        next_attempt_at=r.next_attempt_at,
        last_error=r.last_error,
        finished_at=r.delivered_at,
    )


class SqlOutbox:
    """The push package's outbox contract on the service's store (each call one transaction)."""

    def __init__(self, store: SqlStore, *, on_change: Callable[[], None] | None = None) -> None:
        self.store = store
        self.on_change = on_change

    def append(self, version: PolicyVersion) -> OutboxEntry:
        payload = version.model_dump(mode="json")
        with self.store.writing() as conn:
            row = conn.execute(sa.select(t.outbox).where(t.outbox.c.version == version.version)).first()
            if row is not None:
                if PolicyVersion.model_validate(row.payload) != version:
                    raise ConflictError(f"outbox already holds version {version.version} with other content")
                return _entry(row)
            newest = conn.execute(sa.select(sa.func.max(t.outbox.c.version))).scalar()
            if newest is not None and version.version < newest:
                raise ConflictError(f"version {version.version} is older than version {newest} in the outbox")
            conn.execute(
                t.outbox.insert().values(
                    version=version.version, payload=payload, state="pending", attempts=0, next_attempt_at=0.0
                )
            )
        return OutboxEntry(version=version)

    def pending(self) -> list[OutboxEntry]:
        with self.store.reading() as conn:
            rows = conn.execute(
                sa.select(t.outbox).where(t.outbox.c.state == "pending").order_by(t.outbox.c.version)
            ).all()
        return [_entry(r) for r in rows]

    def entries(self) -> list[OutboxEntry]:
        with self.store.reading() as conn:
            rows = conn.execute(sa.select(t.outbox).order_by(t.outbox.c.version)).all()
        return [_entry(r) for r in rows]

    def _update(self, version: int, **values: Any) -> None:
        with self.store.writing() as conn:
            if "attempts" in values and values["attempts"] is None:
                values["attempts"] = t.outbox.c.attempts + 1
            n = conn.execute(t.outbox.update().where(t.outbox.c.version == version).values(**values)).rowcount
        self.store.invalidate()
        if not n:
            raise NotFoundError(f"outbox holds no version {version}")
        if self.on_change is not None:
            self.on_change()

    def mark_delivered(self, version: int, *, at: float) -> None:
        self._update(version, state="delivered", delivered_at=at)

    def record_attempt(self, version: int, *, error: str, next_attempt_at: float) -> None:
        self._update(version, attempts=None, last_error=error, next_attempt_at=next_attempt_at)

    def mark_failed(self, version: int, *, error: str, at: float) -> None:
        self._update(version, state="failed", last_error=error, delivered_at=at)

    def mark_refused(self, version: int, *, error: str, at: float) -> None:
        self._update(version, state="refused", last_error=error, delivered_at=at)

    def mark_superseded(self, version: int, *, error: str, at: float) -> None:
        self._update(version, state="superseded", last_error=error, delivered_at=at)

    def last_delivered(self) -> PolicyVersion | None:
        with self.store.reading() as conn:
            row = conn.execute(
                sa.select(t.outbox.c.payload)
                .where(t.outbox.c.state == "delivered")
                .order_by(t.outbox.c.version.desc())
                .limit(1)
            ).first()
        return None if row is None else PolicyVersion.model_validate(row.payload)

    def refused(self, *, limit: int = 20) -> list[OutboxEntry]:
        """The versions the backend refused or the worker gave up on, newest first."""
        with self.store.reading() as conn:
            rows = conn.execute(
                sa.select(t.outbox)
                .where(t.outbox.c.state.in_(("refused", "failed")))
                .order_by(t.outbox.c.version.desc())
                .limit(limit)
            ).all()
        return [_entry(r) for r in rows]

    def newest_version(self) -> int | None:
        with self.store.reading() as conn:
            n = conn.execute(sa.select(sa.func.max(t.outbox.c.version))).scalar()
        return None if n is None else int(n)

    def count(self, *states: str) -> int:
        """How many versions are in one of ``states`` (e.g. ``"pending"``)."""
        with self.store.reading() as conn:
            return int(
                conn.execute(
                    sa.select(sa.func.count()).select_from(t.outbox).where(t.outbox.c.state.in_(states))
                ).scalar()
                or 0
            )


__all__ = ["SqlOutbox"]
