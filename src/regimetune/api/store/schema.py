"""The store's tables (SQLAlchemy Core). The migrations in ``migrations/versions`` create
them; this module is what queries are written against. Keep both in step."""

from __future__ import annotations

import sqlalchemy as sa

metadata = sa.MetaData()
BigInt = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
"""64-bit on PostgreSQL (a window may hold more than 2^31 requests); SQLite's INTEGER is 64-bit."""

ingest_batches = sa.Table(
    "rt_ingest_batches",
    metadata,
    sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("received_at", sa.Float, nullable=False),
    sa.Column("window_start", sa.Float, nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("client_key", sa.String(128), nullable=True, unique=True),
    sa.Column("n_rows", sa.Integer, nullable=False),
    sa.Column("payload", sa.LargeBinary, nullable=False),
    sa.Column("digest", sa.String(64), nullable=True),
)

windows = sa.Table(
    "rt_windows",
    metadata,
    sa.Column("idx", BigInt, primary_key=True, autoincrement=False),
    sa.Column("start", sa.Float, nullable=False),
    sa.Column("length", sa.Float, nullable=False),
    sa.Column("requests", BigInt, nullable=False),
    sa.Column("regime_id", sa.Integer, nullable=True),
    sa.Column("stats", sa.JSON, nullable=False),
)

checkpoints = sa.Table(
    "rt_checkpoints",
    metadata,
    sa.Column("name", sa.String(32), primary_key=True),
    sa.Column("position", BigInt, nullable=False),
    sa.Column("state", sa.JSON, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
)

segments = sa.Table(
    "rt_segments",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("regime_id", sa.Integer, nullable=False),
    sa.Column("start_window", BigInt, nullable=False),
    sa.Column("end_window", BigInt, nullable=False),
    sa.Column("start", sa.Float, nullable=False),
    sa.Column("end", sa.Float, nullable=False),
    sa.Column("summary", sa.JSON, nullable=False),
    sa.Column("kind", sa.String(16), nullable=True),  # level / transition; NULL before 0004
)

regime_policies = sa.Table(
    "rt_regime_policies",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("regime_id", sa.Integer, nullable=False, index=True),
    sa.Column("policy", sa.JSON, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
)

policy_versions = sa.Table(
    "rt_policy_versions",
    metadata,
    sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("policy", sa.JSON, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
)

decisions = sa.Table(
    "rt_decisions",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("at", sa.Float, nullable=False),
    sa.Column("regime_from", sa.Integer, nullable=True),
    sa.Column("regime_to", sa.Integer, nullable=False),
    sa.Column("inputs", sa.JSON, nullable=False),
    sa.Column("policy_version", sa.Integer, nullable=True, index=True),
    sa.Column("policy", sa.JSON, nullable=True),
    sa.Column("score", sa.Float, nullable=True),
    sa.Column("outcome", sa.String(16), nullable=False),
    sa.Column("detail", sa.Text, nullable=False),
)

outbox = sa.Table(
    "rt_outbox",
    metadata,
    sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("payload", sa.JSON, nullable=False),
    sa.Column("state", sa.String(16), nullable=False, index=True),
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("next_attempt_at", sa.Float, nullable=False),
    sa.Column("last_error", sa.Text, nullable=True),
    sa.Column("delivered_at", sa.Float, nullable=True),
)

tuning_jobs = sa.Table(
    "rt_tuning_jobs",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
    sa.Column("run", sa.JSON, nullable=False),
)

snapshots = sa.Table(
    "rt_snapshots",
    metadata,
    sa.Column("name", sa.String(32), primary_key=True),
    sa.Column("seq", sa.Integer, nullable=False),
    sa.Column("meta", sa.JSON, nullable=False),
    sa.Column("payload", sa.LargeBinary, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
)

kv = sa.Table(
    "rt_kv",
    metadata,
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("value", sa.JSON, nullable=False),
)
