"""The reference backend's durable state: one SQLite file in WAL mode. Every change is one
``BEGIN IMMEDIATE`` transaction (atomic, serialised between threads and processes), with
``synchronous=FULL``, so a killed process loses nothing it acknowledged.

>>> import tempfile, pathlib
>>> from regimetune.models import Policy, PolicyVersion
>>> st = StateStore(pathlib.Path(tempfile.mkdtemp()) / "b.db")
>>> v = PolicyVersion(version=1, policy=Policy(), created_at=0.0)
>>> st.apply_policy(v, now=1.0), st.apply_policy(v, now=2.0)
('applied', 'duplicate')
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

from regimetune.backend.schemas import Placement, PolicyLogEntry
from regimetune.models import ConfigError, ConflictError, PolicyVersion

_SCHEMA = """
CREATE TABLE IF NOT EXISTS policies (
    version INTEGER PRIMARY KEY,
    body TEXT NOT NULL,
    received_at REAL NOT NULL,
    duplicates INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS placement (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    revision INTEGER NOT NULL,
    body TEXT NOT NULL
);
"""


class VersionConflict(ConflictError):
    """A pushed version the backend refuses: older than the one in force
    (``code="stale_version"``) or the same number with other content
    (``code="version_conflict"``)."""

    def __init__(self, message: str, *, code: str, current_version: int) -> None:
        super().__init__(message)
        self.code = code
        self.current_version = current_version


class RevisionConflict(ConflictError):
    """A rescale order made against a placement revision that is no longer current."""

    code = "stale_revision"


class StateStore:
    """Policies received (a log; the newest is in force) and the bucket placement."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._lock = threading.RLock()
        self._con: sqlite3.Connection | None = None

    def _open(self) -> sqlite3.Connection:
        """One connection, kept open (closing the last one checkpoints the WAL each time),
        shared by the threads of this process under a lock."""
        if self._con is None:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                con = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=False)
                con.execute("PRAGMA journal_mode=WAL")
                con.execute("PRAGMA synchronous=FULL")
                con.executescript(_SCHEMA)
            except (sqlite3.Error, OSError) as exc:
                raise ConfigError(f"cannot open backend state {self.path}: {exc}") from exc
            self._con = con
        return self._con

    @contextmanager
    def _connect(self, *, write: bool = False) -> Iterator[sqlite3.Connection]:
        with self._lock:
            con = self._open()
            if not write:
                yield con
                return
            con.execute("BEGIN IMMEDIATE")  # also serialises writers of other processes
            try:
                yield con
            except BaseException:
                con.execute("ROLLBACK")
                raise
            con.execute("COMMIT")

    def close(self) -> None:
        with self._lock:
            if self._con is not None:
                self._con.close()
                self._con = None

    # -- policies --------------------------------------------------------------------------
    def current_policy(self) -> PolicyVersion | None:
        with self._connect() as con:
            row = con.execute("SELECT body FROM policies ORDER BY version DESC LIMIT 1").fetchone()
        return PolicyVersion.model_validate_json(row[0]) if row else None

    def apply_policy(self, version: PolicyVersion, *, now: float) -> Literal["applied", "duplicate"]:
        """Apply ``version`` if newer than the one in force; the same version again is a
        duplicate (counted, nothing changes); anything else raises :class:`VersionConflict`."""
        body = version.model_dump_json()
        n = version.version
        with self._connect(write=True) as con:
            row = con.execute("SELECT version, body FROM policies ORDER BY version DESC LIMIT 1").fetchone()
            if row is not None:
                current, current_body = int(row[0]), row[1]
                if n < current:
                    raise VersionConflict(
                        f"version {n} is older than version {current} in force",
                        code="stale_version",
                        current_version=current,
                    )
                if n == current:
                    if PolicyVersion.model_validate_json(current_body) != version:
                        raise VersionConflict(
                            f"version {n} is in force with other content; a new policy needs a new version",
                            code="version_conflict",
                            current_version=current,
                        )
                    con.execute("UPDATE policies SET duplicates = duplicates + 1 WHERE version = ?", (n,))
                    return "duplicate"
            con.execute("INSERT INTO policies (version, body, received_at) VALUES (?, ?, ?)", (n, body, now))
        return "applied"

    def policy_log(self, *, after: int = 0) -> list[PolicyLogEntry]:
        """Versions above ``after``, in order."""
        with self._connect() as con:
            rows = con.execute(
                "SELECT body, received_at, duplicates FROM policies WHERE version > ? ORDER BY version",
                (after,),
            ).fetchall()
        return [
            PolicyLogEntry(version=PolicyVersion.model_validate_json(b), received_at=t, duplicates=d)
            for b, t, d in rows
        ]

    # -- placement -------------------------------------------------------------------------
    def placement(self) -> Placement | None:
        with self._connect() as con:
            row = con.execute("SELECT body FROM placement WHERE id = 1").fetchone()
        return Placement.model_validate_json(row[0]) if row else None

    def set_placement(self, placement: Placement, *, expected_revision: int | None) -> Placement:
        """Store ``placement`` as the next revision, if the stored revision is still
        ``expected_revision`` (None: there must be no placement yet)."""
        with self._connect(write=True) as con:
            row = con.execute("SELECT revision FROM placement WHERE id = 1").fetchone()
            stored = int(row[0]) if row else None
            if stored != expected_revision:
                if expected_revision is None:
                    raise RevisionConflict(
                        f"a placement exists already (revision {stored}); send replace=true to replace it"
                    )
                raise RevisionConflict(
                    f"the placement changed meanwhile: revision {stored}, expected {expected_revision}"
                )
            new = placement.model_copy(update={"revision": 0 if stored is None else stored + 1})
            con.execute(
                "INSERT INTO placement (id, revision, body) VALUES (1, ?, ?) "
                "ON CONFLICT(id) DO UPDATE SET revision = excluded.revision, body = excluded.body",
                (new.revision, new.model_dump_json()),
            )
        return new


__all__ = ["RevisionConflict", "StateStore", "VersionConflict"]
