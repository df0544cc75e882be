"""Queries on fold runs and their per-epoch metrics. Functions never commit."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from foldwise.schemas import FoldStatus, TrialStatus
from foldwise.service.db.models import EpochMetricRow, FoldRunRow, TrialRow, utcnow
from foldwise.trainers.report import ArtifactKind, EpochReport


def start_fold_run(session: Session, trial_id: int, fold: int) -> FoldRunRow:
    """A new attempt at ``fold``: one more than any attempt stored before."""
    query = select(func.max(FoldRunRow.attempt)).where(
        FoldRunRow.trial_id == trial_id, FoldRunRow.fold == fold
    )
    latest = session.scalar(query)
    run = FoldRunRow(
        trial_id=trial_id,
        fold=fold,
        attempt=0 if latest is None else latest + 1,
        status=FoldStatus.RUNNING,
        started_at=utcnow(),
    )
    session.add(run)
    session.flush()
    return run


def record_epoch(session: Session, fold_run_id: int, report: EpochReport) -> None:
    """Store one epoch's report; recording the same (run, epoch) twice keeps the first."""
    query = select(EpochMetricRow.id).where(
        EpochMetricRow.fold_run_id == fold_run_id, EpochMetricRow.epoch == report.epoch
    )
    if session.scalar(query) is None:
        row = EpochMetricRow(
            fold_run_id=fold_run_id,
            epoch=report.epoch,
            metrics=report.metrics,
            restored=report.restored,
            stopped=report.stopped,
        )
        session.add(row)


def record_artifact(session: Session, fold_run_id: int, kind: ArtifactKind, epoch: int) -> None:
    """The run checkpointed after ``epoch`` (the latest one counts), or saved its model."""
    run = session.get(FoldRunRow, fold_run_id)
    if run is None:
        return
    if kind is ArtifactKind.MODEL:
        run.model_saved = True
    else:
        run.checkpoint_epoch = max(epoch, run.checkpoint_epoch or 0)


def record_placement(session: Session, fold_run_id: int, placement: list[dict[str, Any]]) -> None:
    """Where the run's ranks were placed (the first time it is known)."""
    run = session.get(FoldRunRow, fold_run_id)
    if run is not None and run.placement is None:
        run.placement = placement


def finish_fold_run(
    session: Session,
    fold_run_id: int,
    status: FoldStatus,
    *,
    value: float | None = None,
    metric_values: dict[str, float] | None = None,
    error: str | None = None,
    traceback: str | None = None,
    train_seconds: float | None = None,
) -> None:
    run = session.get(FoldRunRow, fold_run_id)
    if run is None:  # deleted with its study while the run was ending
        return
    run.status = status
    run.value = value
    run.metric_values = metric_values
    run.error = error
    run.traceback = traceback
    run.train_seconds = train_seconds
    run.finished_at = utcnow()


def completed_fold_values(session: Session, trial_id: int) -> dict[int, float]:
    """Value of each fold of a trial that already has a completed attempt."""
    query = select(FoldRunRow.fold, FoldRunRow.value).where(
        FoldRunRow.trial_id == trial_id, FoldRunRow.status == FoldStatus.COMPLETED
    )
    return {fold: value for fold, value in session.execute(query)}


def completed_fold_metrics(session: Session, trial_id: int) -> dict[int, dict[str, float]]:
    """The scored metrics (``FoldRunRow.metric_values``) of each fold of a trial that already
    has a completed attempt, where it has them."""
    query = select(FoldRunRow.fold, FoldRunRow.metric_values).where(
        FoldRunRow.trial_id == trial_id, FoldRunRow.status == FoldStatus.COMPLETED
    )
    return {fold: values for fold, values in session.execute(query) if values is not None}


SERVICE_STOPPED = "the service stopped"
"""The error of a fold run cut short because the service stopped (``lost``: it runs again)."""


def mark_lost_fold_runs(session: Session, study_id: int) -> int:
    """Fold runs left ``running`` by a service that stopped: mark them lost so they re-run."""
    trial_ids = select(TrialRow.id).where(
        TrialRow.study_id == study_id,
        TrialRow.status.in_((TrialStatus.PENDING, TrialStatus.RUNNING)),
    )
    result = session.execute(
        update(FoldRunRow)
        .where(FoldRunRow.trial_id.in_(trial_ids), FoldRunRow.status == FoldStatus.RUNNING)
        .values(status=FoldStatus.LOST, finished_at=utcnow(), error=SERVICE_STOPPED)
    )
    return result.rowcount or 0


def close_fold_runs(
    session: Session, fold_run_ids: Sequence[int], status: FoldStatus, error: str | None
) -> int:
    """Fold runs among these still ``running``: mark them ended with ``status``."""
    result = session.execute(
        update(FoldRunRow)
        .where(FoldRunRow.id.in_(fold_run_ids), FoldRunRow.status == FoldStatus.RUNNING)
        .values(status=status, finished_at=utcnow(), error=error)
        .execution_options(synchronize_session=False)
    )
    return result.rowcount or 0


def close_open_fold_runs(session: Session, trial_ids: Sequence[int]) -> int:
    """Fold runs of these trials still ``running``: mark them cancelled, as their trial has
    ended (a fold cancelled while its record was being created is one)."""
    if not trial_ids:
        return 0
    result = session.execute(
        update(FoldRunRow)
        .where(FoldRunRow.trial_id.in_(trial_ids), FoldRunRow.status == FoldStatus.RUNNING)
        .values(status=FoldStatus.CANCELLED, finished_at=utcnow(), error="its trial ended first")
        .execution_options(synchronize_session=False)
    )
    return result.rowcount or 0


def fold_runs_of(session: Session, trial_id: int) -> Sequence[FoldRunRow]:
    query = select(FoldRunRow).where(FoldRunRow.trial_id == trial_id)
    return session.scalars(query.order_by(FoldRunRow.fold, FoldRunRow.attempt)).all()


ENDED_CURVES = (FoldStatus.COMPLETED, FoldStatus.PRUNED, FoldStatus.CANCELLED)
"""Fold runs whose learning curves are references for pruning: they ended and will not change."""


def ended_fold_curves(
    session: Session, study_id: int, metric: str
) -> list[tuple[int, FoldStatus, list[float]]]:
    """(fold, status, ``metric`` after each epoch) of every ended fold run of the study."""
    value = EpochMetricRow.metrics[metric].as_float()
    query = (
        select(FoldRunRow.id, FoldRunRow.fold, FoldRunRow.status, value)
        .join(TrialRow, TrialRow.id == FoldRunRow.trial_id)
        .join(EpochMetricRow, EpochMetricRow.fold_run_id == FoldRunRow.id)
        .where(TrialRow.study_id == study_id, FoldRunRow.status.in_(ENDED_CURVES))
        .order_by(FoldRunRow.id, EpochMetricRow.epoch)
    )
    curves: dict[int, tuple[int, FoldStatus, list[float]]] = {}
    for run_id, fold, status, metric_value in session.execute(query):
        if metric_value is not None:
            curves.setdefault(run_id, (fold, status, []))[2].append(metric_value)
    return list(curves.values())
