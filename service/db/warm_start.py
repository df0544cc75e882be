"""Queries behind warm starts: earlier studies' finished trials, and the copies a study keeps.
Functions take the caller's session and never commit."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.orm import Session

from foldwise.schemas import TrialStatus
from service.db.models import TrialRow, WarmStartObservationRow
from service.db.trials import FINISHED


@dataclass(frozen=True, slots=True)
class Outcome:
    """A finished trial as a warm start reads it (or keeps it: ``params`` projected)."""

    study_id: int
    number: int
    status: TrialStatus
    params: dict[str, Any]
    value: float | None
    std_error: float | None
    value_folds: int | None


def finished_outcomes(session: Session, study_id: int) -> list[Outcome]:
    """The study's completed, pruned and failed trials in the order they finished (the order
    its own optimizer was told them in), in one query of the columns a warm start needs."""
    query = (
        select(
            TrialRow.number,
            TrialRow.status,
            TrialRow.params,
            TrialRow.value,
            TrialRow.std_error,
            TrialRow.value_folds,
        )
        .where(TrialRow.study_id == study_id, TrialRow.status.in_(FINISHED))
        .order_by(TrialRow.finished_at, TrialRow.number)
    )
    return [Outcome(study_id, *row) for row in session.execute(query)]


def add_observations(session: Session, study_id: int, outcomes: Sequence[Outcome]) -> None:
    """Keep ``outcomes`` as the study's prior observations, in this order."""
    if not outcomes:
        return
    rows = [
        {
            "study_id": study_id,
            "position": position,
            "source_study_id": o.study_id,
            "source_trial_number": o.number,
            "status": o.status,
            "params": o.params,
            "value": o.value,
            "std_error": o.std_error,
            "value_folds": o.value_folds,
        }
        for position, o in enumerate(outcomes)
    ]
    session.execute(insert(WarmStartObservationRow), rows)


def observations(session: Session, study_id: int) -> list[Outcome]:
    """The prior observations the study keeps, in the order they were stored."""
    row = WarmStartObservationRow
    query = (
        select(
            row.source_study_id,
            row.source_trial_number,
            row.status,
            row.params,
            row.value,
            row.std_error,
            row.value_folds,
        )
        .where(row.study_id == study_id)
        .order_by(row.position)
    )
    return [Outcome(*values) for values in session.execute(query)]
