"""Study revisions for conditional reads; ids of deleted studies and trials never reused.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23

``studies.revision`` is bumped with every change to a study and what it holds. On SQLite the
studies and trials tables are rebuilt with AUTOINCREMENT (SQLite otherwise hands a deleted
row's id to the next insert); PostgreSQL sequences never reuse ids, so nothing changes there.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    sqlite = op.get_bind().dialect.name == "sqlite"
    with op.batch_alter_table(
        "studies",
        recreate="always" if sqlite else "auto",
        table_kwargs={"sqlite_autoincrement": True},
    ) as batch_op:
        batch_op.add_column(
            sa.Column("revision", sa.Integer(), server_default="0", nullable=False)
        )
    if sqlite:
        with op.batch_alter_table(
            "trials", recreate="always", table_kwargs={"sqlite_autoincrement": True}
        ):
            pass


def downgrade() -> None:
    with op.batch_alter_table("studies") as batch_op:
        batch_op.drop_column("revision")
