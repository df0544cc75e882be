"""Storage rows to wire models, converted once at the edge of the API."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.orm import Session

from foldwise import schemas
from foldwise.schemas import TrialStatus
from foldwise.service.db import refits as refit_repo
from foldwise.service.db import studies as study_repo
from foldwise.service.db.models import EpochMetricRow, FoldRunRow, RefitRow, StudyRow, TrialRow


def studies_out(session: Session, rows: Sequence[StudyRow]) -> list[schemas.Study]:
    """Wire studies with their progress and best trial, in two queries plus one per study."""
    counts = study_repo.count_trials_by_status(session, [row.id for row in rows])
    best = study_repo.best_trials(session, rows)
    return [_study_out(row, counts[row.id], best.get(row.id)) for row in rows]


def _study_out(
    row: StudyRow, counts: dict[TrialStatus, int], best: TrialRow | None
) -> schemas.Study:
    finished = sum(n for status, n in counts.items() if status.finished)
    progress = schemas.Progress(
        budget=row.spec.budget.trials,
        finished=finished,
        running=counts.get(TrialStatus.RUNNING, 0),
        pending=counts.get(TrialStatus.PENDING, 0),
        completed=counts.get(TrialStatus.COMPLETED, 0),
        failed=counts.get(TrialStatus.FAILED, 0),
        pruned=counts.get(TrialStatus.PRUNED, 0),
    )
    return schemas.Study(
        id=row.id,
        name=row.name,
        status=row.status,
        spec=row.spec,
        created_at=row.created_at,
        started_at=row.started_at,
        finished_at=row.finished_at,
        error=row.error,
        owner=row.owner,
        stop_requested=row.stop_requested and not row.status.finished,
        waiting=None if row.status.finished else row.waiting,
        progress=progress,
        best_trial=None if best is None else trial_summary(best),
        warm_start=row.warm_start,
        code_hash=row.code_hash,
        holdout=row.holdout,
        warnings=row.warnings or [],
    )


def trial_summary(row: TrialRow) -> schemas.TrialSummary:
    return schemas.TrialSummary.model_validate(row)


def trial_out(row: TrialRow) -> schemas.Trial:
    summary = trial_summary(row).model_dump()
    return schemas.Trial(**summary, folds=[fold_run_out(run) for run in row.fold_runs])


def fold_run_out(run: FoldRunRow) -> schemas.FoldRun:
    return schemas.FoldRun(
        fold=run.fold,
        attempt=run.attempt,
        status=run.status,
        value=run.value,
        metric_values=run.metric_values,
        error=run.error,
        traceback=run.traceback,
        started_at=run.started_at,
        finished_at=run.finished_at,
        train_seconds=run.train_seconds,
        placement=run.placement,
        checkpoint_epoch=run.checkpoint_epoch,
        model_saved=run.model_saved,
        epochs=[_epoch_out(e) for e in run.epochs],
    )


def _epoch_out(row: EpochMetricRow) -> schemas.EpochMetrics:
    return schemas.EpochMetrics(
        epoch=row.epoch, metrics=row.metrics, restored=row.restored, stopped=row.stopped
    )


def refit_out(row: RefitRow) -> schemas.Refit:
    """A refit as its last attempt (a run, as a fold's are) stands."""
    last = row.last_run
    return schemas.Refit(
        number=row.number,
        trial=row.trial_number,
        status=row.status,
        epochs=row.epochs,
        attempt=0 if last is None else last.attempt,
        requested_at=row.requested_at,
        started_at=row.started_at,
        finished_at=row.finished_at,
        error=row.error,
        curve=[] if last is None else [_epoch_out(e) for e in last.epochs],
        test_metrics=row.test_metrics,
        model_saved=refit_repo.model_saved(row),
    )
