"""Pruned trials: how many folds a trial's value rests on, and why it was pruned.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain ADD COLUMNs: a batch rebuild on SQLite would drop the table's AUTOINCREMENT.
    op.add_column("trials", sa.Column("value_folds", sa.Integer(), nullable=True))
    op.add_column("trials", sa.Column("pruned_reason", sa.Text(), nullable=True))
    # Trials that completed before this revision rest on every fold of their study.
    op.execute(
        "UPDATE trials SET value_folds = (SELECT COUNT(*) FROM fold_runs"
        " WHERE fold_runs.trial_id = trials.id AND fold_runs.status = 'completed')"
        " WHERE status = 'completed'"
    )


def downgrade() -> None:
    with op.batch_alter_table(
        "trials", recreate="auto", table_kwargs={"sqlite_autoincrement": True}
    ) as batch_op:
        batch_op.drop_column("pruned_reason")
        batch_op.drop_column("value_folds")
