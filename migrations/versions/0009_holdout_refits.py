"""Hold-out scores and refits: a study's task profile and hold-out score, and the refits table.

``studies.task_profile`` keeps what the task is (found at submit) so later requests need not
load its code; ``studies.holdout_status`` / ``studies.holdout`` the score on the task's test
data; ``refits`` a trial's params trained on all the training data.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
STATUS = sa.Enum(
    "queued", "running", "completed", "failed", name="jobstatus", native_enum=False, length=16
)


def upgrade() -> None:
    # Plain ADD COLUMNs: a batch rebuild on SQLite would drop the table's AUTOINCREMENT.
    op.add_column("studies", sa.Column("task_profile", sa.Text(), nullable=True))
    op.add_column("studies", sa.Column("holdout_status", STATUS, nullable=True))
    op.add_column("studies", sa.Column("holdout", sa.JSON(), nullable=True))
    op.create_index(op.f("ix_studies_holdout_status"), "studies", ["holdout_status"])
    op.create_table(
        "refits",
        sa.Column("id", BigId, nullable=False),
        sa.Column("study_id", BigId, nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("trial_number", sa.Integer(), nullable=False),
        sa.Column("status", STATUS, nullable=False),
        sa.Column("epochs", sa.Integer(), nullable=False),
        sa.Column("attempt", sa.Integer(), server_default="0", nullable=False),
        sa.Column("requested_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("curve", sa.JSON(), nullable=False),
        sa.Column("checkpoint_epoch", sa.Integer(), nullable=True),
        sa.Column("model_saved", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("test_metrics", sa.JSON(), nullable=True),
        sa.ForeignKeyConstraint(
            ["study_id"],
            ["studies.id"],
            name=op.f("fk_refits_study_id_studies"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_refits")),
        sa.UniqueConstraint("study_id", "number", name=op.f("uq_refits_study_id_number")),
        sqlite_autoincrement=True,
    )
    op.create_index(op.f("ix_refits_status"), "refits", ["status"])


def downgrade() -> None:
    op.drop_index(op.f("ix_refits_status"), table_name="refits")
    op.drop_table("refits")
    op.drop_index(op.f("ix_studies_holdout_status"), table_name="studies")
    for column in ("holdout", "holdout_status", "task_profile"):
        with op.batch_alter_table(
            "studies", recreate="auto", table_kwargs={"sqlite_autoincrement": True}
        ) as batch_op:
            batch_op.drop_column(column)
