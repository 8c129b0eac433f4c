"""What each stored segment's regime is: a ``level`` it held or a ``transition`` (it moved
and never levelled off). Segments stored before this revision have none (``NULL``, read as
``""``: not known).

Revision ID: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("rt_segments", sa.Column("kind", sa.String(16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("rt_segments") as batch:
        batch.drop_column("kind")
