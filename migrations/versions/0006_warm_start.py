"""Warm start: the earlier studies' finished trials a study was seeded with, copied at submit.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
TRIAL_STATUS = ("pending", "running", "completed", "failed", "pruned")


def upgrade() -> None:
    op.create_table(
        "warm_start_observations",
        sa.Column("id", BigId, nullable=False),
        sa.Column("study_id", BigId, nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("source_study_id", sa.BigInteger(), nullable=False),
        sa.Column("source_trial_number", sa.Integer(), nullable=False),
        sa.Column(
            "status",
            sa.Enum(*TRIAL_STATUS, name="trialstatus", native_enum=False, length=16),
            nullable=False,
        ),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("value", sa.Float(), nullable=True),
        sa.Column("std_error", sa.Float(), nullable=True),
        sa.Column("value_folds", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["study_id"],
            ["studies.id"],
            name=op.f("fk_warm_start_observations_study_id_studies"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_warm_start_observations")),
        sa.UniqueConstraint(
            "study_id", "position", name=op.f("uq_warm_start_observations_study_id_position")
        ),
    )
    # A plain ADD COLUMN: a batch rebuild on SQLite would drop the table's AUTOINCREMENT.
    op.add_column("studies", sa.Column("warm_start", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table(
        "studies", recreate="auto", table_kwargs={"sqlite_autoincrement": True}
    ) as batch_op:
        batch_op.drop_column("warm_start")
    op.drop_table("warm_start_observations")
