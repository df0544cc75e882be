"""A study's score on the task's test data: asked for by the API (or by the study's end), run
and written by the scheduler (``studies.holdout_status`` / ``studies.holdout``). Functions
never commit."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from foldwise.schemas import JobStatus
from foldwise.service.db import refits as refit_repo
from foldwise.service.db.models import StudyRow, utcnow
from foldwise.spec import StudySpec


def queue_holdout(
    session: Session,
    study: StudyRow,
    spec: StudySpec,
    *,
    score: str,
    trial_number: int | None = None,
    epochs: int | None = None,
) -> None:
    """Ask for the study's hold-out score of trial ``trial_number`` (default: its best),
    queuing the refit the score needs unless one of that trial has completed already (the
    caller holds the study's row lock: ``studies.touch_study`` first)."""
    trial = refit_repo.scored_trial(session, study, trial_number)
    refit_number = None
    if score in ("refit", "both"):
        done = refit_repo.completed_refit(session, study.id, trial.number)
        if done is not None and epochs in (None, done.epochs):
            refit_number = done.number
        else:
            refit_number = refit_repo.queue_refit(
                session, study, spec, trial, epochs=epochs
            ).number
    request_holdout(study, trial.number, score, refit_number)


def request_holdout(
    study: StudyRow, trial_number: int | None, score: str, refit_number: int | None
) -> None:
    """Ask for the study's hold-out score of trial ``trial_number`` (replacing an earlier one;
    None: no trial could be scored, said as the score fails)."""
    study.holdout_status = JobStatus.QUEUED
    study.holdout = {
        "status": JobStatus.QUEUED.value,
        "trial": trial_number,
        "score": score,
        "requested_at": utcnow().isoformat(),
        "refit_number": refit_number,
    }


def set_holdout(study: StudyRow, status: JobStatus, **fields: Any) -> None:
    """Move the study's hold-out score on: its status and what it found."""
    study.holdout_status = status
    done = {"finished_at": utcnow().isoformat()} if status.finished else {}
    study.holdout = {**(study.holdout or {}), **fields, **done, "status": status.value}
