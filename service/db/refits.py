"""Queries on refits: a trial's params trained on all the training data. Functions never
commit.

The API asks for a refit (``queued``); the scheduler alone moves it on (``running``, then
``completed`` or ``failed``) and records what it reports and saves.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session, object_session, selectinload

from foldwise.schemas import FoldStatus, JobStatus, StudyStatus, TrialStatus
from foldwise.service.db import fold_runs as fold_repo
from foldwise.service.db import studies as study_repo
from foldwise.service.db.models import (
    EpochMetricRow,
    FoldRunRow,
    RefitRow,
    StudyRow,
    TrialRow,
    utcnow,
)
from foldwise.spec import StudySpec
from foldwise.trainers.objective import fold_value

OPEN = (JobStatus.QUEUED, JobStatus.RUNNING)
_WITH_RUNS = selectinload(RefitRow.runs).selectinload(FoldRunRow.epochs)
ENDED = (StudyStatus.COMPLETED, StudyStatus.STOPPED, StudyStatus.FAILED)


class HoldoutRefused(ValueError):
    """A refit or hold-out score asked of a trial that cannot give one; says why."""


class NothingToScore(HoldoutRefused):
    """The study has no completed trial, or the one named is not: nothing to score or refit."""


class NoSuchTrial(HoldoutRefused):
    """The trial named is not one of the study's."""


def create_refit(session: Session, study_id: int, trial_number: int, epochs: int) -> RefitRow:
    """Ask for a refit of trial ``trial_number``, numbered after the study's earlier ones (the
    caller holds the study's row lock: ``studies.touch_study`` first)."""
    latest = session.scalar(select(func.max(RefitRow.number)).where(RefitRow.study_id == study_id))
    refit = RefitRow(
        study_id=study_id,
        number=(latest or 0) + 1,
        trial_number=trial_number,
        status=JobStatus.QUEUED,
        epochs=epochs,
    )
    session.add(refit)
    session.flush()
    return refit


def queue_refit(
    session: Session, study: StudyRow, spec: StudySpec, trial: TrialRow, *, epochs: int | None
) -> RefitRow:
    """Ask for a refit of ``trial``: ``epochs``, or the median of its folds' chosen epochs."""
    if epochs is None:
        objective = spec.objective
        try:
            epochs = best_epochs(
                session, trial, objective.metric, objective.direction.value, objective.use
            )
        except ValueError as exc:
            raise HoldoutRefused(str(exc)) from exc
    return create_refit(session, study.id, trial.number, epochs)


def get_refit(session: Session, study_id: int, number: int) -> RefitRow | None:
    """Refit ``number`` of the study, with its runs (what says whether its model is kept; their
    epochs load when read)."""
    query = select(RefitRow).where(RefitRow.study_id == study_id, RefitRow.number == number)
    return session.scalar(query.options(selectinload(RefitRow.runs)))


def list_refits(session: Session, study_id: int) -> Sequence[RefitRow]:
    """The study's refits, with their runs and epochs (what the API shows of each)."""
    query = select(RefitRow).where(RefitRow.study_id == study_id).order_by(RefitRow.number)
    return session.scalars(query.options(_WITH_RUNS)).all()


def open_refits(session: Session, study_id: int) -> Sequence[RefitRow]:
    """The study's refits asked for and not ended, oldest first."""
    query = (
        select(RefitRow)
        .where(RefitRow.study_id == study_id, RefitRow.status.in_(OPEN))
        .order_by(RefitRow.number)
    )
    return session.scalars(query).all()


def studies_with_open_jobs(session: Session) -> list[int]:
    """Ended studies, not being deleted, with a refit or a hold-out score still to run."""
    refits = select(RefitRow.study_id).where(RefitRow.status.in_(OPEN))
    scores = select(StudyRow.id).where(StudyRow.holdout_status.in_(OPEN))
    query = select(StudyRow.id).where(
        StudyRow.id.in_(refits.union(scores)),
        StudyRow.status.in_(ENDED),
        StudyRow.delete_requested.is_(False),
    )
    return list(session.scalars(query.order_by(StudyRow.id)))


def completed_refit(session: Session, study_id: int, trial_number: int) -> RefitRow | None:
    """The newest completed refit of the trial whose model is kept."""
    saved = select(FoldRunRow.refit_id).where(
        FoldRunRow.refit_id.is_not(None), FoldRunRow.model_saved.is_(True)
    )
    query = (
        select(RefitRow)
        .where(
            RefitRow.study_id == study_id,
            RefitRow.trial_number == trial_number,
            RefitRow.status == JobStatus.COMPLETED,
            RefitRow.id.in_(saved),
        )
        .order_by(RefitRow.number.desc())
    )
    return session.scalars(query).first()


def model_saved(refit: RefitRow) -> bool:
    """Whether the refit's model is in the artifact store: its last attempt saved it."""
    last = refit.last_run
    return last is not None and last.model_saved


def start_refit(session: Session, refit: RefitRow) -> tuple[int, int]:
    """The refit runs (again), as a new run: (its id, its attempt). An attempt a restart cut
    short is lost, and the new one resumes from its checkpoint."""
    refit.status = JobStatus.RUNNING
    refit.started_at = refit.started_at or utcnow()
    refit.error = None
    return fold_repo.start_refit_run(session, refit.id)


def finish_refit(
    refit: RefitRow,
    status: JobStatus,
    *,
    error: str | None = None,
    test_metrics: dict[str, Any] | None = None,
) -> None:
    """The refit ended: ``completed`` (its model saved; ``error`` says why a score of it on
    the test data failed) or ``failed`` (an attempt still running with it)."""
    refit.status = status
    refit.error = error
    refit.finished_at = utcnow()
    if test_metrics is not None:
        refit.test_metrics = test_metrics
    session = object_session(refit)
    if status is JobStatus.FAILED and session is not None:
        fold_repo.close_refit_runs(session, [refit.id], error)


def model_folds(session: Session, trial: TrialRow) -> list[int]:
    """The folds of ``trial`` whose completed attempt saved its model, in order."""
    query = select(FoldRunRow.fold).where(
        FoldRunRow.trial_id == trial.id,
        FoldRunRow.status == FoldStatus.COMPLETED,
        FoldRunRow.model_saved.is_(True),
    )
    return sorted(set(session.scalars(query)))


def best_epochs(session: Session, trial: TrialRow, metric: str, direction: str, use: str) -> int:
    """The median, over the trial's completed folds, of the epoch each fold's value came from
    (its best epoch, or its last with ``use: last``): how long a refit trains."""
    runs = session.scalars(
        select(FoldRunRow).where(
            FoldRunRow.trial_id == trial.id, FoldRunRow.status == FoldStatus.COMPLETED
        )
    ).all()
    chosen = []
    for run in runs:
        epochs = session.scalars(
            select(EpochMetricRow)
            .where(EpochMetricRow.fold_run_id == run.id, EpochMetricRow.stopped.is_(False))
            .order_by(EpochMetricRow.epoch)
        ).all()
        values = [(e.epoch, float(e.metrics[metric])) for e in epochs if metric in e.metrics]
        if not values:
            continue
        value = fold_value([{metric: v} for _, v in values], metric, direction, use=use)
        chosen.append(next(epoch for epoch, v in values if v == value or _both_nan(v, value)))
    if not chosen:
        raise ValueError(f"trial {trial.number} has no completed fold to take its epochs from")
    return max(1, round(statistics.median(chosen)))


def scored_trial(session: Session, study: StudyRow, number: int | None) -> TrialRow:
    """Trial ``number`` of the study, completed (None: its best trial)."""
    if number is None:
        best = study_repo.best_trials(session, [study]).get(study.id)
        if best is None:
            raise NothingToScore(f"{study_repo.no_best_trial(study)} to score")
        return best
    trial = session.scalar(
        select(TrialRow).where(TrialRow.study_id == study.id, TrialRow.number == number)
    )
    if trial is None:
        raise NoSuchTrial(f"study {study.id} has no trial {number}")
    if trial.status is not TrialStatus.COMPLETED:
        raise NothingToScore(
            f"trial {number} is {trial.status}: only a completed trial has a model of every fold"
        )
    return trial


def _both_nan(a: float, b: float) -> bool:
    return math.isnan(a) and math.isnan(b)
