"""What a study's fold runs knew was suspect: ``studies.warnings``.

A list of ``{kind, message, trials, runs, first_seen, last_seen}`` (``schemas.StudyWarning``),
one per distinct warning, written by the scheduler as fold runs report them; NULL for a
study none has warned of, and for the studies that came before.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A plain ADD COLUMN: a batch rebuild on SQLite would drop the table's AUTOINCREMENT.
    op.add_column("studies", sa.Column("warnings", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table(
        "studies", recreate="auto", table_kwargs={"sqlite_autoincrement": True}
    ) as batch_op:
        batch_op.drop_column("warnings")
