"""Study revisions for conditional reads; 64-bit ids, never reused.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23

``studies.revision`` is bumped with every change to a study and what it holds,
``studies.trials_revision`` only with changes to the study or its trials (not folds or epochs).
On SQLite the studies and trials tables are rebuilt with AUTOINCREMENT (SQLite otherwise hands
a deleted row's id to the next insert; its ids are 64-bit already). On PostgreSQL, whose
sequences never reuse ids, the ids and the columns that point at them become BIGINT, sequences
included: a SERIAL stops at 2^31, which the epoch rows of a few thousand large studies reach.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

ID_TABLES = ("studies", "trials", "fold_runs", "epoch_metrics")
ID_COLUMNS = (
    *((table, "id") for table in ID_TABLES),
    ("trials", "study_id"),
    ("fold_runs", "trial_id"),
    ("epoch_metrics", "fold_run_id"),
)


def upgrade() -> None:
    sqlite = op.get_bind().dialect.name == "sqlite"
    with op.batch_alter_table(
        "studies",
        recreate="always" if sqlite else "auto",
        table_kwargs={"sqlite_autoincrement": True},
    ) as batch_op:
        for column in ("revision", "trials_revision"):
            batch_op.add_column(
                sa.Column(column, sa.Integer(), server_default="0", nullable=False)
            )
    if sqlite:
        with op.batch_alter_table(
            "trials", recreate="always", table_kwargs={"sqlite_autoincrement": True}
        ):
            pass
        return
    for table, column in ID_COLUMNS:
        op.alter_column(table, column, type_=sa.BigInteger(), existing_type=sa.Integer())
    for table in ID_TABLES:
        op.execute(f"ALTER SEQUENCE {table}_id_seq AS BIGINT")


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        for table in ID_TABLES:
            op.execute(f"ALTER SEQUENCE {table}_id_seq AS INTEGER")
        for table, column in ID_COLUMNS:
            op.alter_column(table, column, type_=sa.Integer(), existing_type=sa.BigInteger())
    with op.batch_alter_table("studies") as batch_op:
        batch_op.drop_column("trials_revision")
        batch_op.drop_column("revision")
