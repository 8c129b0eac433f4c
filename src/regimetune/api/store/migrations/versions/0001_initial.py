"""Initial schema: ingest batches, windows, checkpoints, segments, policies, decisions,
outbox, tuning jobs, key-value state.

Revision ID: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "rt_ingest_batches",
        sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("received_at", sa.Float, nullable=False),
        sa.Column("window_start", sa.Float, nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("client_key", sa.String(128), nullable=True, unique=True),
        sa.Column("n_rows", sa.Integer, nullable=False),
        sa.Column("payload", sa.LargeBinary, nullable=False),
    )
    op.create_table(
        "rt_windows",
        sa.Column("idx", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("start", sa.Float, nullable=False),
        sa.Column("length", sa.Float, nullable=False),
        sa.Column("requests", sa.Integer, nullable=False),
        sa.Column("regime_id", sa.Integer, nullable=True),
        sa.Column("stats", sa.JSON, nullable=False),
    )
    op.create_table(
        "rt_checkpoints",
        sa.Column("name", sa.String(32), primary_key=True),
        sa.Column("position", sa.Integer, nullable=False),
        sa.Column("state", sa.JSON, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
    )
    op.create_table(
        "rt_segments",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("regime_id", sa.Integer, nullable=False),
        sa.Column("start_window", sa.Integer, nullable=False),
        sa.Column("end_window", sa.Integer, nullable=False),
        sa.Column("start", sa.Float, nullable=False),
        sa.Column("end", sa.Float, nullable=False),
        sa.Column("summary", sa.JSON, nullable=False),
    )
    op.create_table(
        "rt_regime_policies",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("regime_id", sa.Integer, nullable=False, index=True),
        sa.Column("policy", sa.JSON, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    op.create_table(
        "rt_policy_versions",
        sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("policy", sa.JSON, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    op.create_table(
        "rt_decisions",
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
    op.create_table(
        "rt_outbox",
        sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("payload", sa.JSON, nullable=False),
        sa.Column("state", sa.String(16), nullable=False, index=True),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("next_attempt_at", sa.Float, nullable=False),
        sa.Column("last_error", sa.Text, nullable=True),
        sa.Column("delivered_at", sa.Float, nullable=True),
    )
    op.create_table(
        "rt_tuning_jobs",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
        sa.Column("run", sa.JSON, nullable=False),
    )
    op.create_table(
        "rt_kv",
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("value", sa.JSON, nullable=False),
    )


def downgrade() -> None:
    for name in (
        "rt_kv",
        "rt_tuning_jobs",
        "rt_outbox",
        "rt_decisions",
        "rt_policy_versions",
        "rt_regime_policies",
        "rt_segments",
        "rt_checkpoints",
        "rt_windows",
        "rt_ingest_batches",
    ):
        op.drop_table(name)
