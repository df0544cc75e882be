"""Queries behind warm starts: earlier studies' finished trials, and the copies a study keeps.
Functions take the caller's session and never commit."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, func, insert, select, tuple_
from sqlalchemy.orm import Session

from foldwise.schemas import TrialStatus
from foldwise.service.db.models import TrialRow, WarmStartObservationRow
from foldwise.service.db.trials import FINISHED, STOPPED_ERROR


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


@dataclass(frozen=True, slots=True)
class Finished:
    """An earlier study's finished trial and when it finished (``finished_at``, or when it was
    created for a row that has none): what orders trials from several studies in time."""

    outcome: Outcome
    finished_at: datetime

    @property
    def key(self) -> tuple[int, int]:
        return self.outcome.study_id, self.outcome.number


_COLUMNS = (
    TrialRow.study_id,
    TrialRow.number,
    TrialRow.status,
    TrialRow.params,
    TrialRow.value,
    TrialRow.std_error,
    TrialRow.value_folds,
)
_FINISHED_AT = func.coalesce(TrialRow.finished_at, TrialRow.created_at)
_NOT_STOPPED = TrialRow.error.is_distinct_from(STOPPED_ERROR)
"""Not a trial its study's stop cut short: a stop says nothing about the parameters."""


def count_finished(session: Session, study_ids: Sequence[int]) -> int:
    """How many completed, pruned and failed trials the studies hold (not those a stop
    ended)."""
    query = select(func.count()).where(
        TrialRow.study_id.in_(study_ids), TrialRow.status.in_(FINISHED), _NOT_STOPPED
    )
    return session.scalar(query) or 0


def latest_first(session: Session, study_ids: Sequence[int], *, page: int) -> Iterator[Finished]:
    """The studies' finished trials (not those a stop ended), the most recently finished first
    (ties: the higher study id, then number), read ``page`` rows a query: a caller that stops
    early reads no more."""
    keys = (_FINISHED_AT, TrialRow.study_id, TrialRow.number)
    where = (TrialRow.study_id.in_(study_ids), TrialRow.status.in_(FINISHED), _NOT_STOPPED)
    return _pages(session, where, keys, descending=True, page=page)


def best_first(
    session: Session, study_ids: Sequence[int], *, maximize: bool, page: int
) -> Iterator[Finished]:
    """The studies' completed and pruned trials with a value, the best first (ties: the earlier
    finished, then the lower study id and number), read ``page`` rows a query."""
    value = -TrialRow.value if maximize else TrialRow.value
    keys = (value, _FINISHED_AT, TrialRow.study_id, TrialRow.number)
    where = (
        TrialRow.study_id.in_(study_ids),
        TrialRow.status.in_(FINISHED),
        TrialRow.status != TrialStatus.FAILED,
        TrialRow.value.is_not(None),
    )
    return _pages(session, where, keys, descending=False, page=page)


def _pages(
    session: Session,
    where: tuple[ColumnElement[bool], ...],
    keys: tuple[ColumnElement[Any], ...],
    *,
    descending: bool,
    page: int,
) -> Iterator[Finished]:
    """Rows in the order of ``keys`` (unique together), a keyset page at a time: each query
    starts after the last row of the one before, so rows read are rows used."""
    order = [key.desc() if descending else key.asc() for key in keys]
    after: tuple[Any, ...] | None = None
    while True:
        labelled = (key.label(f"key_{index}") for index, key in enumerate(keys))
        query = select(*_COLUMNS, _FINISHED_AT.label("finished"), *labelled).where(*where)
        if after is not None:
            row = tuple_(*keys)
            query = query.where(row < tuple_(*after) if descending else row > tuple_(*after))
        rows = session.execute(query.order_by(*order).limit(page)).all()
        width = len(_COLUMNS)
        for row in rows:
            yield Finished(Outcome(*row[:width]), row[width])
        if len(rows) < page:
            return
        after = tuple(rows[-1][width + 1 :])


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
