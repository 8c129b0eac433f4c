"""64-bit window counters on PostgreSQL (a window of 2^32-1 requests overflowed INTEGER) and
the digest of each ingest batch (the same Idempotency-Key with another body is refused).

SQLite's INTEGER is already 64-bit, so only PostgreSQL's columns change type.

Revision ID: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

_WIDENED = (
    ("rt_windows", "idx"),
    ("rt_windows", "requests"),
    ("rt_segments", "start_window"),
    ("rt_segments", "end_window"),
    ("rt_checkpoints", "position"),
)


def upgrade() -> None:
    op.add_column("rt_ingest_batches", sa.Column("digest", sa.String(64), nullable=True))
    if op.get_bind().dialect.name == "postgresql":
        for table, column in _WIDENED:
            op.alter_column(table, column, type_=sa.BigInteger(), existing_nullable=False)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for table, column in _WIDENED:
            op.alter_column(table, column, type_=sa.Integer(), existing_nullable=False)
    with op.batch_alter_table("rt_ingest_batches") as batch:
        batch.drop_column("digest")
