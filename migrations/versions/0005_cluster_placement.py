"""A cluster's view: where each fold run ran, and why a study waits for resources.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain ADD COLUMNs: a batch rebuild on SQLite would drop the table's AUTOINCREMENT.
    op.add_column("fold_runs", sa.Column("placement", sa.JSON(), nullable=True))
    op.add_column("studies", sa.Column("waiting", sa.Text(), nullable=True))


def downgrade() -> None:
    for table, column in (("fold_runs", "placement"), ("studies", "waiting")):
        with op.batch_alter_table(
            table, recreate="auto", table_kwargs={"sqlite_autoincrement": True}
        ) as batch_op:
            batch_op.drop_column(column)
