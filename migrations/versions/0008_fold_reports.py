"""Typed fold reports: an epoch's flags and a run's files in columns, and the study's code hash.

An epoch's ``restored`` and ``stopped`` flags, and a fold run's last checkpoint and saved model,
travelled as fake metrics in ``epoch_metrics.metrics``; they move to columns of their own (the
existing rows' flags are moved over), so metrics hold only what the task reported and foldwise
measured. ``studies.code_hash`` is the content hash of the task package a study runs.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
FLAGS = ("restored", "stopped", "checkpoint", "model_saved")


def upgrade() -> None:
    # Plain ADD COLUMNs: a batch rebuild on SQLite would drop the table's AUTOINCREMENT.
    false = sa.false()
    op.add_column(
        "epoch_metrics", sa.Column("restored", sa.Boolean(), server_default=false, nullable=False)
    )
    op.add_column(
        "epoch_metrics", sa.Column("stopped", sa.Boolean(), server_default=false, nullable=False)
    )
    op.add_column("fold_runs", sa.Column("checkpoint_epoch", sa.Integer(), nullable=True))
    op.add_column(
        "fold_runs", sa.Column("model_saved", sa.Boolean(), server_default=false, nullable=False)
    )
    op.add_column("studies", sa.Column("code_hash", sa.String(64), nullable=True))
    _move_flags()


def _move_flags() -> None:
    epochs = sa.table(
        "epoch_metrics",
        sa.column("id", BigId),
        sa.column("fold_run_id", BigId),
        sa.column("epoch", sa.Integer),
        sa.column("metrics", sa.JSON),
        sa.column("restored", sa.Boolean),
        sa.column("stopped", sa.Boolean),
    )
    runs = sa.table(
        "fold_runs",
        sa.column("id", BigId),
        sa.column("checkpoint_epoch", sa.Integer),
        sa.column("model_saved", sa.Boolean),
    )
    bind = op.get_bind()
    checkpoints: dict[int, int] = {}
    saved: set[int] = set()
    rows = bind.execute(
        sa.select(epochs.c.id, epochs.c.fold_run_id, epochs.c.epoch, epochs.c.metrics)
    )
    for row_id, run_id, epoch, metrics in rows:
        if not isinstance(metrics, dict) or not any(flag in metrics for flag in FLAGS):
            continue
        if metrics.get("checkpoint"):
            checkpoints[run_id] = max(epoch, checkpoints.get(run_id, 0))
        if metrics.get("model_saved"):
            saved.add(run_id)
        kept = {k: v for k, v in metrics.items() if k not in FLAGS}
        bind.execute(
            epochs.update()
            .where(epochs.c.id == row_id)
            .values(
                metrics=kept,
                restored=bool(metrics.get("restored")),
                stopped=bool(metrics.get("stopped")),
            )
        )
    for run_id, epoch in checkpoints.items():
        bind.execute(runs.update().where(runs.c.id == run_id).values(checkpoint_epoch=epoch))
    for run_id in saved:
        bind.execute(runs.update().where(runs.c.id == run_id).values(model_saved=True))


def downgrade() -> None:
    for table, column in (
        ("epoch_metrics", "restored"),
        ("epoch_metrics", "stopped"),
        ("fold_runs", "checkpoint_epoch"),
        ("fold_runs", "model_saved"),
        ("studies", "code_hash"),
    ):
        with op.batch_alter_table(
            table, recreate="auto", table_kwargs={"sqlite_autoincrement": True}
        ) as batch_op:
            batch_op.drop_column(column)
