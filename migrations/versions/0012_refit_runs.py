"""Refits run as runs: each attempt of a refit is a row of ``fold_runs`` (``refit_id``).

A refit kept its attempt count, last checkpoint, saved model and a JSON list of the last
attempt's epochs on its own row, where a fold run has a row per attempt and a row per epoch.
Now a refit's attempts are ``fold_runs`` rows with ``refit_id`` set (``trial_id`` and ``fold``
NULL), their epochs ``epoch_metrics`` rows, written by the same path as a fold's. The existing
refits' attempts and curves are moved over; the refit keeps its request and its outcome.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
ONE_OWNER = (
    "(trial_id IS NOT NULL AND fold IS NOT NULL AND refit_id IS NULL)"
    " OR (trial_id IS NULL AND fold IS NULL AND refit_id IS NOT NULL)"
)
RUN_STATUS = {"running": "running", "completed": "completed", "failed": "failed"}
"""A refit's status → its last attempt's (a queued refit has none)."""

_REFITS = sa.table(
    "refits",
    sa.column("id", BigId),
    sa.column("status", sa.String),
    sa.column("attempt", sa.Integer),
    sa.column("started_at", sa.DateTime(timezone=True)),
    sa.column("finished_at", sa.DateTime(timezone=True)),
    sa.column("error", sa.Text),
    sa.column("curve", sa.JSON),
    sa.column("checkpoint_epoch", sa.Integer),
    sa.column("model_saved", sa.Boolean),
)
_RUNS = sa.table(
    "fold_runs",
    sa.column("id", BigId),
    sa.column("refit_id", BigId),
    sa.column("attempt", sa.Integer),
    sa.column("status", sa.String),
    sa.column("error", sa.Text),
    sa.column("started_at", sa.DateTime(timezone=True)),
    sa.column("finished_at", sa.DateTime(timezone=True)),
    sa.column("checkpoint_epoch", sa.Integer),
    sa.column("model_saved", sa.Boolean),
)
_EPOCHS = sa.table(
    "epoch_metrics",
    sa.column("fold_run_id", BigId),
    sa.column("epoch", sa.Integer),
    sa.column("metrics", sa.JSON),
    sa.column("restored", sa.Boolean),
    sa.column("stopped", sa.Boolean),
)
REFIT_COLUMNS = ("attempt", "curve", "checkpoint_epoch", "model_saved")


def upgrade() -> None:
    with op.batch_alter_table("fold_runs") as batch_op:
        batch_op.alter_column("trial_id", existing_type=BigId, nullable=True)
        batch_op.alter_column("fold", existing_type=sa.Integer(), nullable=True)
        batch_op.add_column(sa.Column("refit_id", BigId, nullable=True))
        batch_op.create_foreign_key(
            op.f("fk_fold_runs_refit_id_refits"),
            "refits",
            ["refit_id"],
            ["id"],
            ondelete="CASCADE",
        )
        batch_op.create_index(op.f("ix_fold_runs_refit_id"), ["refit_id"])
        batch_op.create_unique_constraint(
            op.f("uq_fold_runs_refit_id_attempt"), ["refit_id", "attempt"]
        )
        batch_op.create_check_constraint(op.f("ck_fold_runs_one_owner"), ONE_OWNER)
    _move_refit_attempts()
    with op.batch_alter_table(
        "refits", recreate="auto", table_kwargs={"sqlite_autoincrement": True}
    ) as batch_op:
        for column in REFIT_COLUMNS:
            batch_op.drop_column(column)


def _move_refit_attempts() -> None:
    """Each started refit's last attempt becomes a run, its curve that run's epoch rows."""
    bind = op.get_bind()
    refits = bind.execute(sa.select(_REFITS).where(_REFITS.c.status.in_(RUN_STATUS))).all()
    for refit in refits:
        bind.execute(
            _RUNS.insert().values(
                refit_id=refit.id,
                attempt=refit.attempt or 0,
                status=RUN_STATUS[refit.status],
                error=refit.error if refit.status == "failed" else None,
                started_at=refit.started_at,
                finished_at=refit.finished_at,
                checkpoint_epoch=refit.checkpoint_epoch,
                model_saved=bool(refit.model_saved),
            )
        )
        run_id = bind.execute(
            sa.select(_RUNS.c.id).where(_RUNS.c.refit_id == refit.id)
        ).scalar_one()
        epochs = {
            int(e["epoch"]): e
            for e in refit.curve or []
            if isinstance(e, dict) and isinstance(e.get("epoch"), int)
        }
        if epochs:
            bind.execute(
                _EPOCHS.insert(),
                [
                    {
                        "fold_run_id": run_id,
                        "epoch": epoch,
                        "metrics": e.get("metrics") or {},
                        "restored": bool(e.get("restored")),
                        "stopped": False,
                    }
                    for epoch, e in sorted(epochs.items())
                ],
            )


def downgrade() -> None:
    false = sa.false()
    with op.batch_alter_table(
        "refits", recreate="auto", table_kwargs={"sqlite_autoincrement": True}
    ) as batch_op:
        batch_op.add_column(sa.Column("attempt", sa.Integer(), server_default="0", nullable=False))
        batch_op.add_column(sa.Column("curve", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("checkpoint_epoch", sa.Integer(), nullable=True))
        batch_op.add_column(
            sa.Column("model_saved", sa.Boolean(), server_default=false, nullable=False)
        )
    bind = op.get_bind()
    for refit_id in bind.execute(sa.select(_REFITS.c.id)).scalars().all():
        last = bind.execute(
            sa.select(_RUNS)
            .where(_RUNS.c.refit_id == refit_id)
            .order_by(_RUNS.c.attempt.desc())
            .limit(1)
        ).first()
        curve = []
        if last is not None:
            epochs = bind.execute(
                sa.select(_EPOCHS).where(_EPOCHS.c.fold_run_id == last.id).order_by("epoch")
            )
            curve = [
                {"epoch": e.epoch, "metrics": e.metrics, "restored": e.restored} for e in epochs
            ]
        bind.execute(
            _REFITS.update()
            .where(_REFITS.c.id == refit_id)
            .values(
                attempt=0 if last is None else last.attempt,
                curve=curve,
                checkpoint_epoch=None if last is None else last.checkpoint_epoch,
                model_saved=False if last is None else bool(last.model_saved),
            )
        )
    refit_runs = sa.select(_RUNS.c.id).where(_RUNS.c.refit_id.is_not(None))
    bind.execute(sa.delete(_EPOCHS).where(_EPOCHS.c.fold_run_id.in_(refit_runs)))
    bind.execute(sa.delete(_RUNS).where(_RUNS.c.refit_id.is_not(None)))
    with op.batch_alter_table("fold_runs") as batch_op:
        batch_op.drop_constraint(op.f("ck_fold_runs_one_owner"), type_="check")
        batch_op.drop_constraint(op.f("uq_fold_runs_refit_id_attempt"), type_="unique")
        batch_op.drop_index(op.f("ix_fold_runs_refit_id"))
        batch_op.drop_constraint(op.f("fk_fold_runs_refit_id_refits"), type_="foreignkey")
        batch_op.drop_column("refit_id")
        batch_op.alter_column("fold", existing_type=sa.Integer(), nullable=False)
        batch_op.alter_column("trial_id", existing_type=BigId, nullable=False)
