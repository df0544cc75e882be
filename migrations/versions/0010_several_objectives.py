"""Several objectives and constraints: each fold run's metrics the study scores, and each
trial's value per objective, its constraints' values and whether it is feasible.

``fold_runs.metric_values`` holds, per metric named by an objective or a constraint, the value a
fold run ended with (read at the epoch its first objective picks). ``trials.objective_values``
is a list of [mean, standard error] per objective, ``trials.constraint_values`` a list of fold
means per constraint, ``trials.feasible`` whether every constraint holds. All are NULL for the
single-objective studies that came before.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain ADD COLUMNs: a batch rebuild on SQLite would drop the table's AUTOINCREMENT.
    op.add_column("fold_runs", sa.Column("metric_values", sa.JSON(), nullable=True))
    op.add_column("trials", sa.Column("objective_values", sa.JSON(), nullable=True))
    op.add_column("trials", sa.Column("constraint_values", sa.JSON(), nullable=True))
    op.add_column("trials", sa.Column("feasible", sa.Boolean(), nullable=True))


def downgrade() -> None:
    for table, column in (
        ("fold_runs", "metric_values"),
        ("trials", "objective_values"),
        ("trials", "constraint_values"),
        ("trials", "feasible"),
    ):
        with op.batch_alter_table(
            table, recreate="auto", table_kwargs={"sqlite_autoincrement": True}
        ) as batch_op:
            batch_op.drop_column(column)
