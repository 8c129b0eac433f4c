"""The service's persistent store: SQLAlchemy Core over SQLite (WAL) or PostgreSQL.

Every method is one transaction; every read returns frozen objects (the models' types) that
later writes do not change.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from importlib import resources
from typing import Any

import numpy as np
import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from sqlalchemy.engine import Connection, Engine

from regimetune.api.settings import StoreSettings
from regimetune.api.store import schema as t
from regimetune.control.store import ENGINE_CHECKPOINT, StoredBatch, StoreUnavailable
from regimetune.models import (
    ConfigError,
    Decision,
    NotFoundError,
    Policy,
    PolicyVersion,
    PushOutcome,
    RegimeSegment,
    TuningRun,
    WindowStats,
)

_PROBE = "store.probe"  # the row the readiness probe writes
_FLOOR = "versions.floor"  # every new policy version is above it (a backend held this one)
_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
# database errors that are bugs (a constraint, the SQL, a value), not a store that cannot
# read or write now (a full, read-only or failed disk, a database server away): every other
# driver error is the latter
_BUGS = (sa.exc.IntegrityError, sa.exc.ProgrammingError, sa.exc.DataError, sa.exc.NotSupportedError)


_INSERT_BATCH = t.ingest_batches.insert()


def driver_reason(exc: BaseException) -> str:
    """The first line of the driver's message (never the URL, which may hold a password)."""
    orig = getattr(exc, "orig", None) or exc
    lines = [ln.strip() for ln in str(orig).splitlines() if ln.strip()]
    return lines[0][:300] if lines else type(orig).__name__


def pack_columns(columns: dict[str, np.ndarray]) -> bytes:
    """Columns as bytes: a one-line JSON header (name, dtype, length) then raw data."""
    header = [[name, arr.dtype.str, len(arr)] for name, arr in columns.items()]
    parts = [json.dumps(header).encode(), b"\n"]
    parts.extend(np.ascontiguousarray(arr).tobytes() for arr in columns.values())
    return b"".join(parts)


def unpack_columns(blob: bytes) -> dict[str, np.ndarray]:
    nl = blob.index(b"\n")
    header = json.loads(blob[:nl])
    out: dict[str, np.ndarray] = {}
    pos = nl + 1
    for name, dtype, n in header:
        dt = np.dtype(dtype)
        out[name] = np.frombuffer(blob, dtype=dt, count=n, offset=pos)
        pos += dt.itemsize * n
    return out


def _engine(cfg: StoreSettings) -> Engine:
    url = sa.engine.make_url(cfg.url)
    if url.get_backend_name() == "sqlite":
        kw: dict[str, Any] = {"connect_args": {"check_same_thread": False}}
        if url.database in (None, "", ":memory:"):
            kw["poolclass"] = sa.pool.StaticPool
        engine = sa.create_engine(url, **kw)
        sync = cfg.sqlite_synchronous

        @sa.event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn: Any, _rec: Any) -> None:
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute(f"PRAGMA synchronous={sync}")
            cur.execute("PRAGMA busy_timeout=10000")
            cur.close()

        return engine
    if cfg.schema_name is not None:
        if not _SCHEMA_NAME.match(cfg.schema_name):
            raise ConfigError(f"store.schema_name {cfg.schema_name!r} is not a plain lower-case identifier")
        engine = sa.create_engine(url, connect_args={"options": f"-csearch_path={cfg.schema_name}"})
        with engine.begin() as conn:
            conn.execute(sa.text(f'CREATE SCHEMA IF NOT EXISTS "{cfg.schema_name}"'))
        return engine
    return sa.create_engine(url, pool_pre_ping=True)


def migrate(engine: Engine, revision: str = "head") -> None:
    """Bring the schema to ``revision``, by default the newest (alembic, migrations shipped
    in the package)."""
    cfg = Config()
    cfg.set_main_option("script_location", str(resources.files("regimetune.api.store") / "migrations"))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)


class SqlStore:
    """The service's store: what the application layer keeps
    (:class:`regimetune.control.Store`) and what the routes read (windows, segments,
    decisions, versions). Open with :meth:`open` (runs migrations)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._write_error: str | None = None  # why the last write failed; None once one succeeds
        self._version_lock = threading.Lock()
        self._gen = 0  # bumped by every write that may change the policy in force
        self._in_force: tuple[int, PolicyVersion | None, bytes, int | None] | None = None

    def invalidate(self) -> None:
        """Forget the cached policy in force (after a new version or a push outcome)."""
        self._gen += 1
        self._in_force = None

    @classmethod
    def open(cls, cfg: StoreSettings) -> SqlStore:
        """Connect and migrate; a store that cannot be opened is a :class:`ConfigError`
        naming ``store.url`` (password masked) and the driver's reason."""
        try:
            where = sa.engine.make_url(cfg.url).render_as_string()  # the password masked
        except sa.exc.ArgumentError:
            where = "(not a database URL)"
        try:
            engine = _engine(cfg)
            migrate(engine)
        except ImportError as exc:  # e.g. mysql:// without its driver
            raise ConfigError(
                f"cannot open store.url {where}: its database driver is not installed ({exc.name or exc})"
            ) from exc
        except sa.exc.SQLAlchemyError as exc:
            raise ConfigError(
                f"cannot open store.url {where}: {type(exc).__name__}: {driver_reason(exc)}"
            ) from exc
        return cls(engine)

    @contextmanager
    def writing(self) -> Iterator[Connection]:
        """One write transaction; a store that cannot write now raises
        :class:`~regimetune.control.store.StoreUnavailable` with the driver's reason (and
        :attr:`write_error` says it until a write succeeds)."""
        try:
            with self._engine.begin() as conn:
                yield conn
        except sa.exc.DBAPIError as exc:
            if isinstance(exc, _BUGS):
                raise
            self._write_error = driver_reason(exc)
            raise StoreUnavailable(f"the store cannot write: {self._write_error}") from exc
        self._write_error = None

    @contextmanager
    def reading(self) -> Iterator[Connection]:
        """A connection to read with; a store that cannot be read raises
        :class:`~regimetune.control.store.StoreUnavailable`."""
        try:
            with self._engine.connect() as conn:
                yield conn
        except sa.exc.DBAPIError as exc:
            if isinstance(exc, _BUGS):
                raise
            raise StoreUnavailable(f"the store cannot be read: {driver_reason(exc)}") from exc

    @property
    def write_error(self) -> str | None:
        """Why the last write failed, None when it succeeded."""
        return self._write_error

    @property
    def db(self) -> Engine:
        """The SQLAlchemy engine (the push outbox shares its tables)."""
        return self._engine

    @property
    def location(self) -> str:
        """The database URL without its password."""
        return self._engine.url.render_as_string(hide_password=True)

    def close(self) -> None:
        self._engine.dispose()

    def probe(self) -> str | None:
        """Readiness: write a row (a real write, which a full or read-only disk refuses as
        it refuses a batch). None when the store writes, else why not."""
        try:
            self.set_kv(_PROBE, time.time())
        except StoreUnavailable as exc:
            return str(exc)
        return None

    # -- ingest -----------------------------------------------------------------------------
    def append_batch(
        self,
        *,
        kind: str,
        window_start: float,
        columns: dict[str, np.ndarray],
        client_key: str | None = None,
        digest: str | None = None,
    ) -> int:
        """Persist a batch (``digest``: a hash of its content, to tell a resend from another
        batch under the same ``client_key``); returns its sequence number once committed."""
        row = {
            "received_at": time.time(),
            "window_start": window_start,
            "kind": kind,
            "client_key": client_key,
            "n_rows": max((len(c) for c in columns.values()), default=0),
            "payload": pack_columns(columns),
            "digest": digest,
        }
        with self.writing() as conn:
            # one statement with parameters: built and compiled once, not per batch
            return _pk(conn.execute(_INSERT_BATCH, row))

    def batch_by_key(self, client_key: str) -> tuple[int, int, str | None] | None:
        """(sequence number, rows, digest) of the batch sent with ``client_key``, if any."""
        b = t.ingest_batches.c
        with self.reading() as conn:
            row = conn.execute(sa.select(b.seq, b.n_rows, b.digest).where(b.client_key == client_key)).first()
        return None if row is None else (int(row.seq), int(row.n_rows), row.digest)

    def batches_after(self, seq: int, *, chunk: int = 64) -> Iterator[StoredBatch]:
        """Batches with a sequence number above ``seq``, in order."""
        last = seq
        while True:
            with self.reading() as conn:
                rows = conn.execute(
                    sa.select(t.ingest_batches)
                    .where(t.ingest_batches.c.seq > last)
                    .order_by(t.ingest_batches.c.seq)
                    .limit(chunk)
                ).all()
            if not rows:
                return
            for r in rows:
                last = r.seq
                yield StoredBatch(r.seq, r.kind, r.window_start, unpack_columns(r.payload))

    def last_seq(self) -> int:
        with self.reading() as conn:
            return int(conn.execute(sa.select(sa.func.max(t.ingest_batches.c.seq))).scalar() or 0)

    def prune_batches(self, *, through_seq: int, received_before: float) -> int:
        """Delete the batches up to ``through_seq`` that arrived before ``received_before``
        (a snapshot covers them; younger ones still answer resends of their Idempotency-Key).
        The newest batch always stays: SQLite numbers a new row after the largest one left,
        so sequence numbers would start over in an emptied table. Returns how many went."""
        b = t.ingest_batches.c
        newest = sa.select(sa.func.max(b.seq)).scalar_subquery()
        with self.writing() as conn:
            res = conn.execute(
                t.ingest_batches.delete().where(
                    b.seq <= through_seq, b.seq < newest, b.received_at < received_before
                )
            )
        return int(res.rowcount or 0)

    def count_windows(self) -> int:
        with self.reading() as conn:
            return int(conn.execute(sa.select(sa.func.count()).select_from(t.windows)).scalar() or 0)

    def count_batches(self) -> int:
        with self.reading() as conn:
            return int(conn.execute(sa.select(sa.func.count()).select_from(t.ingest_batches)).scalar() or 0)

    # -- snapshots --------------------------------------------------------------------------
    def save_snapshot(self, name: str, seq: int, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        """Keep ``arrays`` and ``meta`` under ``name`` as the state after batch ``seq``
        (replacing the previous one)."""
        values = {"seq": seq, "meta": meta, "payload": pack_columns(arrays), "updated_at": time.time()}
        with self.writing() as conn:
            _upsert(conn, t.snapshots, "name", name, values)

    def load_snapshot(self, name: str) -> tuple[int, dict[str, Any], dict[str, np.ndarray]] | None:
        """(batch sequence number it covers, metadata, arrays) of snapshot ``name``, if any."""
        with self.reading() as conn:
            row = conn.execute(sa.select(t.snapshots).where(t.snapshots.c.name == name)).first()
        return None if row is None else (int(row.seq), row.meta, unpack_columns(row.payload))

    # -- checkpoints ------------------------------------------------------------------------
    @staticmethod
    def _checkpoint(conn: Connection, name: str, state: dict[str, Any], processed: int) -> None:
        values = {"state": state, "position": processed, "updated_at": time.time()}
        _upsert(conn, t.checkpoints, "name", name, values)

    def save_checkpoint(self, name: str, state: dict[str, Any], processed: int) -> None:
        """Replace the state saved under ``name`` (e.g. a detector taken from a policy file)."""
        with self.writing() as conn:
            self._checkpoint(conn, name, state, processed)

    def load_checkpoint(self, name: str) -> tuple[dict[str, Any] | None, int]:
        """The state saved under ``name`` and the position (e.g. last window) it covers."""
        with self.reading() as conn:
            row = conn.execute(sa.select(t.checkpoints).where(t.checkpoints.c.name == name)).first()
        return (None, -1) if row is None else (row.state, int(row.position))

    # -- windows and segments ---------------------------------------------------------------
    def commit_window(
        self,
        w: WindowStats,
        regime_id: int | None,
        *,
        regime_kind: str = "",
        checkpoint: dict[str, Any] | None = None,
        decision: Decision | None = None,
        policy: Policy | None = None,
        make_version: bool = False,
        enqueue: bool = False,
    ) -> tuple[Decision | None, PolicyVersion | None]:
        """Store a closed window, extend the regime segments, save the detector checkpoint
        and log a decision (with a new policy version and its outbox entry) in ONE
        transaction, so a crash leaves either all of it or none."""
        stats = asdict(w)
        stats["bucket_load"] = list(w.bucket_load)
        stats["bucket_bytes"] = list(w.bucket_bytes)
        with self._version_lock, self.writing() as conn:
            conn.execute(t.windows.delete().where(t.windows.c.idx == w.index))
            conn.execute(
                t.windows.insert().values(
                    idx=w.index,
                    start=w.start,
                    length=w.length,
                    requests=w.requests,
                    regime_id=regime_id,
                    stats=stats,
                )
            )
            if regime_id is not None:
                self._extend_segment(conn, regime_id, regime_kind, w)
            if checkpoint is not None:
                self._checkpoint(conn, ENGINE_CHECKPOINT, checkpoint, w.index)
            if decision is None:
                return None, None
            self.invalidate()
            out = self._decide(conn, decision, policy, make_version=make_version, enqueue=enqueue)
        self.invalidate()
        return out

    @staticmethod
    def _extend_segment(conn: Connection, regime_id: int, kind: str, w: WindowStats) -> None:
        last = conn.execute(sa.select(t.segments).order_by(t.segments.c.id.desc()).limit(1)).first()
        if last is not None and last.regime_id == regime_id and last.end_window == w.index:
            n = last.end_window - last.start_window
            rate = float(last.summary.get("requests_per_s", 0.0))
            rate = (rate * n + w.requests / w.length) / (n + 1)
            conn.execute(
                t.segments.update()
                .where(t.segments.c.id == last.id)
                .values(end_window=w.index + 1, end=w.end, summary={"requests_per_s": rate})
            )
        else:
            conn.execute(
                t.segments.insert().values(
                    regime_id=regime_id,
                    start_window=w.index,
                    end_window=w.index + 1,
                    start=w.start,
                    end=w.end,
                    summary={"requests_per_s": w.requests / w.length},
                    kind=kind or None,
                )
            )

    def windows(
        self, *, after: int = -1, limit: int = 1000
    ) -> list[tuple[int, float, float, int, int | None]]:
        """(index, start, length, requests, regime id) of windows after ``after``, oldest first."""
        with self.reading() as conn:
            rows = conn.execute(
                sa.select(
                    t.windows.c.idx,
                    t.windows.c.start,
                    t.windows.c.length,
                    t.windows.c.requests,
                    t.windows.c.regime_id,
                )
                .where(t.windows.c.idx > after)
                .order_by(t.windows.c.idx)
                .limit(limit)
            ).all()
        return [(r[0], r[1], r[2], r[3], r[4]) for r in rows]

    def segments(self, *, offset: int = 0, limit: int = 100) -> tuple[list[RegimeSegment], int]:
        """Segments oldest first, and how many there are in all."""
        with self.reading() as conn:
            total = int(conn.execute(sa.select(sa.func.count()).select_from(t.segments)).scalar() or 0)
            rows = conn.execute(
                sa.select(t.segments).order_by(t.segments.c.id).offset(offset).limit(limit)
            ).all()
        return [
            RegimeSegment(
                regime_id=r.regime_id,
                start_window=r.start_window,
                end_window=r.end_window,
                start=r.start,
                end=r.end,
                summary=dict(r.summary),
                kind=r.kind or "",
            )
            for r in rows
        ], total

    def last_segment(self) -> RegimeSegment | None:
        with self.reading() as conn:
            n = int(conn.execute(sa.select(sa.func.count()).select_from(t.segments)).scalar() or 0)
        segs, _ = self.segments(offset=max(n - 1, 0), limit=1)
        return segs[0] if segs else None

    # -- per-regime policies ----------------------------------------------------------------
    def put_regime_policy(self, policy: Policy) -> Policy:
        if policy.regime_id is None:
            raise ValueError("a per-regime policy names its regime")
        with self.writing() as conn:
            conn.execute(
                t.regime_policies.insert().values(
                    regime_id=policy.regime_id, policy=policy.model_dump(mode="json"), created_at=time.time()
                )
            )
        return policy

    def regime_policy(self, regime_id: int) -> Policy | None:
        with self.reading() as conn:
            row = conn.execute(
                sa.select(t.regime_policies.c.policy)
                .where(t.regime_policies.c.regime_id == regime_id)
                .order_by(t.regime_policies.c.id.desc())
                .limit(1)
            ).first()
        return None if row is None else Policy.model_validate(row.policy)

    def regime_policies(self) -> dict[int, Policy]:
        """The newest policy of every regime."""
        with self.reading() as conn:
            rows = conn.execute(sa.select(t.regime_policies).order_by(t.regime_policies.c.id)).all()
        return {r.regime_id: Policy.model_validate(r.policy) for r in rows}

    # -- versions, decisions, outbox --------------------------------------------------------
    def record_decision(
        self, decision: Decision, policy: Policy | None, *, make_version: bool, enqueue: bool
    ) -> tuple[Decision, PolicyVersion | None]:
        """Store a decision and, with ``make_version``, a new policy version (and its outbox
        entry when ``enqueue``) in one transaction."""
        self.invalidate()
        with self._version_lock, self.writing() as conn:
            out = self._decide(conn, decision, policy, make_version=make_version, enqueue=enqueue)
        self.invalidate()
        return out

    @staticmethod
    def _decide(
        conn: Connection, decision: Decision, policy: Policy | None, *, make_version: bool, enqueue: bool
    ) -> tuple[Decision, PolicyVersion | None]:
        pv = None
        if policy is not None:
            decision = decision.model_copy(update={"policy": policy})
        if policy is not None and make_version:
            pv = PolicyVersion(version=_next_version(conn), policy=policy, created_at=time.time())
            conn.execute(
                t.policy_versions.insert().values(
                    version=pv.version, policy=policy.model_dump(mode="json"), created_at=pv.created_at
                )
            )
            if enqueue:  # the push package's outbox contract, on the same table as SqlOutbox
                conn.execute(
                    t.outbox.insert().values(
                        version=pv.version,
                        payload=pv.model_dump(mode="json"),
                        state="pending",
                        attempts=0,
                        next_attempt_at=0.0,
                    )
                )
            decision = decision.model_copy(update={"policy_version": pv.version})
        res = conn.execute(t.decisions.insert().values(**_decision_row(decision)))
        decision = decision.model_copy(update={"id": _pk(res)})
        return decision, pv

    def first_version(self, policy: Policy, *, enqueue: bool) -> PolicyVersion | None:
        """Store ``policy`` as version 1 (and its outbox entry when ``enqueue``) unless a
        version exists: the policy in force before the first decision (a policy file's
        default). Returns the version made, if any."""
        with self._version_lock, self.writing() as conn:
            if conn.execute(sa.select(sa.func.count()).select_from(t.policy_versions)).scalar():
                return None
            pv = PolicyVersion(version=_next_version(conn), policy=policy, created_at=time.time())
            conn.execute(
                t.policy_versions.insert().values(
                    version=pv.version, policy=policy.model_dump(mode="json"), created_at=pv.created_at
                )
            )
            if enqueue:
                conn.execute(
                    t.outbox.insert().values(
                        version=pv.version,
                        payload=pv.model_dump(mode="json"),
                        state="pending",
                        attempts=0,
                        next_attempt_at=0.0,
                    )
                )
        self.invalidate()
        return pv

    def raise_version_floor(self, version: int) -> None:
        """Make every new version number above ``version`` (a backend holds it): numbers a
        backend has seen are never handed out again, even if this store lost them."""
        with self._version_lock, self.writing() as conn:
            floor = conn.execute(sa.select(t.kv.c.value).where(t.kv.c.key == _FLOOR)).scalar()
            _upsert(conn, t.kv, "key", _FLOOR, {"value": max(int(floor or 0), version)})

    def count_versions_since(self, since: float) -> int:
        """How many policy versions were made at or after ``since`` (the flap budget)."""
        with self.reading() as conn:
            q = sa.select(sa.func.count()).select_from(t.policy_versions)
            return int(conn.execute(q.where(t.policy_versions.c.created_at >= since)).scalar() or 0)

    def set_outcome(self, version: int, outcome: PushOutcome, detail: str = "") -> None:
        """Record what became of the push of ``version``: the decision keeps its reason and
        gets the push outcome after ``" | push: "``."""
        with self.writing() as conn:
            rows = conn.execute(
                sa.select(t.decisions.c.id, t.decisions.c.detail).where(
                    t.decisions.c.policy_version == version
                )
            ).all()
            for r in rows:
                base = r.detail.split(" | push: ")[0]
                conn.execute(
                    t.decisions.update()
                    .where(t.decisions.c.id == r.id)
                    .values(outcome=outcome.value, detail=f"{base} | push: {detail}" if detail else base)
                )

    def decisions(self, *, offset: int = 0, limit: int = 100) -> tuple[list[Decision], int]:
        """Newest first, and the total count."""
        with self.reading() as conn:
            total = int(conn.execute(sa.select(sa.func.count()).select_from(t.decisions)).scalar() or 0)
            rows = conn.execute(
                sa.select(t.decisions).order_by(t.decisions.c.id.desc()).offset(offset).limit(limit)
            ).all()
        return [_decision(r) for r in rows], total

    def version(self, version: int) -> PolicyVersion:
        with self.reading() as conn:
            row = conn.execute(
                sa.select(t.policy_versions).where(t.policy_versions.c.version == version)
            ).first()
        if row is None:
            raise NotFoundError(f"no policy version {version}")
        return PolicyVersion(
            version=row.version, policy=Policy.model_validate(row.policy), created_at=row.created_at
        )

    def versions(self, *, limit: int = 100) -> list[PolicyVersion]:
        """Newest first."""
        with self.reading() as conn:
            rows = conn.execute(
                sa.select(t.policy_versions).order_by(t.policy_versions.c.version.desc()).limit(limit)
            ).all()
        return [
            PolicyVersion(version=r.version, policy=Policy.model_validate(r.policy), created_at=r.created_at)
            for r in rows
        ]

    def latest_version(self) -> PolicyVersion | None:
        v = self.versions(limit=1)
        return v[0] if v else None

    def in_force_version(self) -> PolicyVersion | None:
        """The policy desired: the newest version that the backend did not refuse and the
        outbox did not give up on (the last known-good version stays otherwise), delivered
        or not. Cached until the next write that may change it, so it is cheap to poll."""
        return self.in_force_json()[0]

    def in_force_json(self) -> tuple[PolicyVersion | None, bytes]:
        """The policy desired and its JSON body (serialised once per version)."""
        return self.policy_status()[:2]

    def policy_status(self) -> tuple[PolicyVersion | None, bytes, int | None]:
        """The policy desired, its JSON body, and the newest version the backend
        acknowledged (None: none yet, or nothing is pushed); cached as :meth:`in_force_json`."""
        cached = self._in_force
        if cached is not None and cached[0] == self._gen:
            return cached[1], cached[2], cached[3]
        gen = self._gen
        v = self._query_in_force()
        body = b"" if v is None else v.model_dump_json().encode()
        delivered = self._query_delivered()
        if gen == self._gen:
            self._in_force = (gen, v, body, delivered)
        return v, body, delivered

    def _query_delivered(self) -> int | None:
        with self.reading() as conn:
            n = conn.execute(
                sa.select(sa.func.max(t.outbox.c.version)).where(t.outbox.c.state == "delivered")
            ).scalar()
        return None if n is None else int(n)

    def _query_in_force(self) -> PolicyVersion | None:
        with self.reading() as conn:
            failed = sa.select(t.outbox.c.version).where(t.outbox.c.state.in_(("failed", "refused")))
            row = conn.execute(
                sa.select(t.policy_versions)
                .where(t.policy_versions.c.version.not_in(failed))
                .order_by(t.policy_versions.c.version.desc())
                .limit(1)
            ).first()
        if row is None:
            return None
        return PolicyVersion(
            version=row.version, policy=Policy.model_validate(row.policy), created_at=row.created_at
        )

    # -- tuning jobs ------------------------------------------------------------------------
    def save_job(self, run: TuningRun) -> None:
        now = time.time()
        with self.writing() as conn:
            n = conn.execute(
                t.tuning_jobs.update()
                .where(t.tuning_jobs.c.id == run.id)
                .values(run=run.model_dump(mode="json"), updated_at=now)
            ).rowcount
            if not n:
                conn.execute(
                    t.tuning_jobs.insert().values(
                        id=run.id, run=run.model_dump(mode="json"), created_at=now, updated_at=now
                    )
                )

    def job(self, job_id: str) -> TuningRun:
        with self.reading() as conn:
            row = conn.execute(sa.select(t.tuning_jobs.c.run).where(t.tuning_jobs.c.id == job_id)).first()
        if row is None:
            raise NotFoundError(f"no tuning job {job_id!r}")
        return TuningRun.model_validate(row.run)

    def jobs(self, *, limit: int = 100) -> list[TuningRun]:
        with self.reading() as conn:
            rows = conn.execute(
                sa.select(t.tuning_jobs.c.run).order_by(t.tuning_jobs.c.created_at.desc()).limit(limit)
            ).all()
        return [TuningRun.model_validate(r.run) for r in rows]

    # -- small state ------------------------------------------------------------------------
    def get_kv(self, key: str, default: Any = None) -> Any:
        with self.reading() as conn:
            row = conn.execute(sa.select(t.kv.c.value).where(t.kv.c.key == key)).first()
        return default if row is None else row.value

    def set_kv(self, key: str, value: Any) -> None:
        with self.writing() as conn:
            _upsert(conn, t.kv, "key", key, {"value": value})


def _upsert(conn: Connection, table: sa.Table, key_col: str, key: Any, values: dict[str, Any]) -> None:
    """Update the row of ``table`` whose ``key_col`` is ``key``, or insert it (portable across
    SQLite and PostgreSQL, inside the caller's transaction)."""
    if not conn.execute(table.update().where(table.c[key_col] == key).values(**values)).rowcount:
        conn.execute(table.insert().values({key_col: key, **values}))


def _next_version(conn: Connection) -> int:
    """The next policy version number: above every stored version and the floor."""
    last = conn.execute(sa.select(sa.func.max(t.policy_versions.c.version))).scalar()
    floor = conn.execute(sa.select(t.kv.c.value).where(t.kv.c.key == _FLOOR)).scalar()
    return max(int(last or 0), int(floor or 0)) + 1


def _pk(res: Any) -> int:
    key = res.inserted_primary_key
    assert key is not None
    return int(key[0])


def _decision_row(d: Decision) -> dict[str, Any]:
    return {
        "at": d.at,
        "regime_from": d.regime_from,
        "regime_to": d.regime_to,
        "inputs": dict(d.inputs),
        "policy_version": d.policy_version,
        "policy": None if d.policy is None else d.policy.model_dump(mode="json"),
        "score": d.score,
        "outcome": d.outcome.value,
        "detail": d.detail,
    }


def _decision(r: Any) -> Decision:
    return Decision(
        id=r.id,
        at=r.at,
        regime_from=r.regime_from,
        regime_to=r.regime_to,
        inputs=dict(r.inputs),
        policy_version=r.policy_version,
        policy=None if r.policy is None else Policy.model_validate(r.policy),
        score=r.score,
        outcome=PushOutcome(r.outcome),
        detail=r.detail,
    )
