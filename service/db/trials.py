"""Queries on trials. Functions take the caller's session and never commit."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from sqlalchemy import func, nulls_last, select
from sqlalchemy.orm import Session, selectinload

from foldwise.schemas import TrialStatus
from service.db.models import FoldRunRow, TrialRow, utcnow

TrialSort = Literal["number", "-number", "value", "-value", "best"]
UNFINISHED = (TrialStatus.PENDING, TrialStatus.RUNNING)


def create_trial(
    session: Session, study_id: int, params: dict[str, Any], *, number: int
) -> TrialRow:
    trial = TrialRow(
        study_id=study_id,
        number=number,
        params=params,
        status=TrialStatus.RUNNING,
        started_at=utcnow(),
    )
    session.add(trial)
    session.flush()
    return trial


def count_trials(session: Session, study_id: int) -> int:
    query = select(func.count()).select_from(TrialRow).where(TrialRow.study_id == study_id)
    return session.scalar(query) or 0


def next_trial_number(session: Session, study_id: int) -> int:
    query = select(func.max(TrialRow.number)).where(TrialRow.study_id == study_id)
    latest = session.scalar(query)
    return 0 if latest is None else latest + 1


def list_trials(
    session: Session,
    study_id: int,
    *,
    status: TrialStatus | None = None,
    sort: TrialSort = "number",
    maximize: bool = False,
    limit: int = 100,
    offset: int = 0,
) -> tuple[Sequence[TrialRow], int]:
    query = select(TrialRow).where(TrialRow.study_id == study_id)
    if status is not None:
        query = query.where(TrialRow.status == status)
    count = session.scalar(select(func.count()).select_from(query.subquery())) or 0
    if sort == "best":
        sort = "-value" if maximize else "value"
    order = {
        "number": (TrialRow.number,),
        "-number": (TrialRow.number.desc(),),
        "value": (nulls_last(TrialRow.value.asc()), TrialRow.number),
        "-value": (nulls_last(TrialRow.value.desc()), TrialRow.number),
    }[sort]
    rows = session.scalars(query.order_by(*order).limit(limit).offset(offset)).all()
    return rows, count


def get_trial(session: Session, study_id: int, number: int) -> TrialRow | None:
    """A trial with its fold runs and their epochs loaded."""
    query = (
        select(TrialRow)
        .where(TrialRow.study_id == study_id, TrialRow.number == number)
        .options(selectinload(TrialRow.fold_runs).selectinload(FoldRunRow.epochs))
    )
    return session.scalars(query).first()


def finished_trials(session: Session, study_id: int) -> Sequence[TrialRow]:
    """Completed and failed trials in the order they finished: the optimizer's history."""
    query = (
        select(TrialRow)
        .where(
            TrialRow.study_id == study_id,
            TrialRow.status.in_((TrialStatus.COMPLETED, TrialStatus.FAILED, TrialStatus.PRUNED)),
        )
        .order_by(TrialRow.finished_at, TrialRow.number)
    )
    return session.scalars(query).all()


def unfinished_trials(session: Session, study_id: int) -> Sequence[TrialRow]:
    query = (
        select(TrialRow)
        .where(TrialRow.study_id == study_id, TrialRow.status.in_(UNFINISHED))
        .order_by(TrialRow.number)
    )
    return session.scalars(query).all()


def finish_trial(
    session: Session,
    trial: TrialRow,
    status: TrialStatus,
    *,
    value: float | None = None,
    std_error: float | None = None,
    error: str | None = None,
) -> None:
    trial.status = status
    trial.value = value
    trial.std_error = std_error
    trial.error = error
    trial.finished_at = utcnow()
