"""Queries on studies. Functions take the caller's session and never commit."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from foldwise.schemas import StudyStatus, TrialStatus
from foldwise.spec import StudySpec
from service.db.models import StudyRow, TrialRow, utcnow

ACTIVE = (StudyStatus.QUEUED, StudyStatus.RUNNING)


def create_study(session: Session, spec: StudySpec) -> StudyRow:
    study = StudyRow(name=spec.name, status=StudyStatus.QUEUED, spec=spec.resolved())
    session.add(study)
    session.flush()
    return study


def get_study(session: Session, study_id: int) -> StudyRow | None:
    return session.get(StudyRow, study_id)


def list_studies(
    session: Session, *, status: StudyStatus | None = None, limit: int = 100, offset: int = 0
) -> tuple[Sequence[StudyRow], int]:
    query = select(StudyRow)
    if status is not None:
        query = query.where(StudyRow.status == status)
    count = session.scalar(select(func.count()).select_from(query.subquery())) or 0
    rows = session.scalars(query.order_by(StudyRow.id.desc()).limit(limit).offset(offset)).all()
    return rows, count


def active_study_ids(session: Session) -> list[int]:
    """Studies the scheduler should be running: queued or running, not asked to stop."""
    query = select(StudyRow.id).where(StudyRow.status.in_(ACTIVE)).order_by(StudyRow.id)
    return list(session.scalars(query))


def count_trials_by_status(
    session: Session, study_ids: Sequence[int]
) -> dict[int, dict[TrialStatus, int]]:
    query = (
        select(TrialRow.study_id, TrialRow.status, func.count())
        .where(TrialRow.study_id.in_(study_ids))
        .group_by(TrialRow.study_id, TrialRow.status)
    )
    counts: dict[int, dict[TrialStatus, int]] = {sid: {} for sid in study_ids}
    for study_id, status, n in session.execute(query):
        counts[study_id][TrialStatus(status)] = n
    return counts


def best_trials(session: Session, studies: Sequence[StudyRow]) -> dict[int, TrialRow]:
    """The best completed trial of each study, in its own direction (one query per study)."""
    best: dict[int, TrialRow] = {}
    for study in studies:
        maximize = study.spec["objective"]["direction"] == "maximize"
        order = TrialRow.value.desc() if maximize else TrialRow.value.asc()
        query = (
            select(TrialRow)
            .where(TrialRow.study_id == study.id, TrialRow.status == TrialStatus.COMPLETED)
            .order_by(order, TrialRow.number)
            .limit(1)
        )
        row = session.scalars(query).first()
        if row is not None:
            best[study.id] = row
    return best


def mark_study(
    session: Session, study: StudyRow, status: StudyStatus, *, error: str | None = None
) -> None:
    """Move a study to ``status``, stamping when it started or finished."""
    now: datetime = utcnow()
    study.status = status
    if status is StudyStatus.RUNNING and study.started_at is None:
        study.started_at = now
    if status.finished:
        study.finished_at = now
    if error is not None:
        study.error = error


def delete_study(session: Session, study: StudyRow) -> None:
    session.delete(study)
