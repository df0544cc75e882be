"""Queries on trials. Functions take the caller's session and never commit."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import (
    Row,
    bindparam,
    case,
    extract,
    func,
    insert,
    nulls_last,
    select,
    true,
    update,
)
from sqlalchemy.orm import Session, selectinload
from sqlalchemy.sql.elements import ColumnElement

from foldwise.schemas import FoldStatus, TrialStatus
from foldwise.service.db.models import FoldRunRow, TrialRow, utcnow
from foldwise.trials_csv import TrialRecord

TrialSort = str
"""`number`, `value`, `duration` or `params.<name>`, descending with a leading `-`; or `best`."""
SORT_KEYS = ("number", "value", "duration")
PARAM_PREFIX = "params."
UNFINISHED = (TrialStatus.PENDING, TrialStatus.RUNNING)
FINISHED = (TrialStatus.COMPLETED, TrialStatus.FAILED, TrialStatus.PRUNED)
STOPPED_ERROR = "the study was stopped while this trial ran"
"""The error of a trial its study's stop cut short: a failure that says nothing about its
parameters (a warm start does not take it)."""
VALUED_FOLDS = (FoldStatus.COMPLETED, FoldStatus.PRUNED)
"""Fold runs whose value counts: a pruned run's is the one it had reached."""


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


_TRIALS = TrialRow.__table__
_NEXT_NUMBER = (
    select(func.coalesce(func.max(_TRIALS.c.number) + 1, 0))
    .where(_TRIALS.c.study_id == bindparam("b_study"))
    .scalar_subquery()
)
_CREATE = (
    insert(_TRIALS)
    .values(
        study_id=bindparam("b_study"),
        number=_NEXT_NUMBER,
        params=bindparam("b_params", type_=_TRIALS.c.params.type),
        status=TrialStatus.RUNNING,
        created_at=bindparam("b_now"),
        started_at=bindparam("b_now"),
    )
    .returning(_TRIALS.c.id, _TRIALS.c.number)
)
"""The scheduler's statement for a new trial, built once (Core: no unit-of-work flush per
trial on the control path)."""


def create_trials(
    session: Session, study_id: int, configs: Sequence[dict[str, Any]]
) -> list[tuple[int, int]]:
    """A running trial for each of ``configs``, numbered on from the study's last: their
    (trial id, number), in order."""
    session.flush()
    connection, now = session.connection(), utcnow()
    created = []
    for params in configs:
        bound = {"b_study": study_id, "b_params": params, "b_now": now}
        trial_id, number = connection.execute(_CREATE, bound).one()
        created.append((int(trial_id), int(number)))
    return created


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
    numeric: frozenset[str] = frozenset(),
    limit: int = 100,
    offset: int = 0,
) -> tuple[Sequence[TrialRow], int]:
    """A page of trials and the count of all that match. `numeric` names the parameters that
    sort as numbers (the others, categorical, sort as text); see `trial_order`."""
    query = select(TrialRow).where(*_trial_filter(study_id, status))
    count = session.scalar(select(func.count()).select_from(query.subquery())) or 0
    order = trial_order(session, sort, maximize=maximize, numeric=numeric)
    rows = session.scalars(query.order_by(*order).limit(limit).offset(offset)).all()
    return rows, count


def export_order(
    session: Session,
    study_id: int,
    *,
    status: TrialStatus | None = None,
    sort: TrialSort = "number",
    maximize: bool = False,
    numeric: frozenset[str] = frozenset(),
) -> list[int]:
    """The ids of every trial of the study (or those in ``status``) in the order of ``sort``
    (as in ``list_trials``): what an export holds and in what order, fixed before it is read
    a page at a time with ``export_records``."""
    query = select(TrialRow.id).where(*_trial_filter(study_id, status))
    order = trial_order(session, sort, maximize=maximize, numeric=numeric)
    return list(session.scalars(query.order_by(*order)))


def other_param_names(
    session: Session, study_id: int, known: Sequence[str], *, status: TrialStatus | None = None
) -> list[str]:
    """The parameters the study's trials (or those in ``status``) hold besides ``known``, by
    name, found by the database in the trials' JSON (without reading their params here)."""
    where = _trial_filter(study_id, status)
    if session.get_bind().dialect.name == "sqlite":
        keys = func.json_each(TrialRow.params).table_valued("key")
        query = select(keys.c.key).select_from(TrialRow).join(keys, true()).where(*where)
    else:
        query = select(func.json_object_keys(TrialRow.params)).where(*where)
    names = set(session.scalars(query.distinct())) - set(known)
    return sorted(names)


def export_records(session: Session, trial_ids: Sequence[int]) -> list[TrialRecord]:
    """The trials ``trial_ids`` in that order (one a trial since deleted is left out), each
    with the value of every fold that finished, in two queries."""
    folds: dict[int, dict[int, float]] = {}
    query = (
        select(FoldRunRow.trial_id, FoldRunRow.fold, FoldRunRow.value)
        .where(
            FoldRunRow.trial_id.in_(trial_ids),
            FoldRunRow.status.in_(VALUED_FOLDS),
            FoldRunRow.value.is_not(None),
        )
        .order_by(FoldRunRow.attempt)  # a later attempt's value wins
    )
    for trial_id, fold, value in session.execute(query):
        folds.setdefault(trial_id, {})[fold] = value
    fields = ("number", "params", "value", "std_error", "value_folds", "started_at")
    fields += ("finished_at", "error", "pruned_reason")
    fields += ("objective_values", "constraint_values", "feasible")
    query = select(TrialRow.id, TrialRow.status, *(getattr(TrialRow, f) for f in fields))
    records = {
        row.id: TrialRecord(
            status=TrialStatus(row.status).value,
            fold_values=folds.get(row.id, {}),
            **{name: getattr(row, name) for name in fields},
        )
        for row in session.execute(query.where(TrialRow.id.in_(trial_ids)))
    }
    return [records[i] for i in trial_ids if i in records]


def _trial_filter(study_id: int, status: TrialStatus | None) -> list[ColumnElement[bool]]:
    where = [TrialRow.study_id == study_id]
    if status is not None:
        where.append(TrialRow.status == status)
    return where


def trial_order(
    session: Session, sort: TrialSort, *, maximize: bool, numeric: frozenset[str]
) -> tuple[Any, ...]:
    """ORDER BY clauses for `sort` (checked by the caller); ties and missing values go last,
    then by number. A conditional parameter a trial does not use is a missing value. `best`
    puts completed trials first (a pruned trial's partial mean is not a full-CV value), and
    of those the ones that meet the study's constraints: the first is the study's best trial."""
    if sort == "best":
        value = TrialRow.value.desc() if maximize else TrialRow.value.asc()
        partial = case((TrialRow.status == TrialStatus.COMPLETED, 0), else_=1)
        infeasible = case((TrialRow.feasible.is_(False), 1), else_=0)
        return (partial, infeasible, nulls_last(value), TrialRow.number)
    descending = sort.startswith("-")
    key = sort.removeprefix("-")
    if key == "number":
        return (TrialRow.number.desc() if descending else TrialRow.number,)
    if key == "value":
        column: ColumnElement = TrialRow.value
    elif key == "duration":
        column = _duration(session)
    else:
        name = key.removeprefix(PARAM_PREFIX)
        field = TrialRow.params[name]
        column = field.as_float() if name in numeric else field.as_string()
    return (nulls_last(column.desc() if descending else column.asc()), TrialRow.number)


def _duration(session: Session) -> ColumnElement:
    """Seconds from start to finish, in the database's own date arithmetic."""
    if session.get_bind().dialect.name == "sqlite":
        days = func.julianday(TrialRow.finished_at) - func.julianday(TrialRow.started_at)
        return days * 86400.0
    return extract("epoch", TrialRow.finished_at - TrialRow.started_at)


def get_trial(
    session: Session, study_id: int, number: int, *, with_folds: bool = True
) -> TrialRow | None:
    """A trial, by default with its fold runs and their epochs loaded."""
    query = select(TrialRow).where(TrialRow.study_id == study_id, TrialRow.number == number)
    if with_folds:
        query = query.options(selectinload(TrialRow.fold_runs).selectinload(FoldRunRow.epochs))
    return session.scalars(query).first()


def finished_trials(session: Session, study_id: int) -> Sequence[TrialRow]:
    """Completed, pruned and failed trials in the order they finished: the optimizer's
    history. A row without a finish time (none is written so) counts as finished first on
    every backend: SQLite and PostgreSQL sort NULL at opposite ends."""
    query = (
        select(TrialRow)
        .where(
            TrialRow.study_id == study_id,
            TrialRow.status.in_(FINISHED),
        )
        .order_by(TrialRow.finished_at.asc().nulls_first(), TrialRow.number)
    )
    return session.scalars(query).all()


def unfinished_trials(session: Session, study_id: int) -> Sequence[TrialRow]:
    query = (
        select(TrialRow)
        .where(TrialRow.study_id == study_id, TrialRow.status.in_(UNFINISHED))
        .order_by(TrialRow.number)
    )
    return session.scalars(query).all()


def last_finished(session: Session, study_id: int, count: int) -> Sequence[TrialRow]:
    """The ``count`` trials of the study that finished last, latest first."""
    query = (
        select(TrialRow)
        .where(TrialRow.study_id == study_id, TrialRow.status.in_(FINISHED))
        .order_by(TrialRow.finished_at.desc().nulls_last(), TrialRow.number.desc())
        .limit(count)
    )
    return session.scalars(query).all()


def commonest_error(session: Session, study_id: int) -> str | None:
    """The error text most failed trials of the study share."""
    query = (
        select(TrialRow.error)
        .where(TrialRow.study_id == study_id, TrialRow.status == TrialStatus.FAILED)
        .group_by(TrialRow.error)
        .order_by(func.count().desc(), TrialRow.error)
        .limit(1)
    )
    return session.scalar(query)


def fail_unfinished_trials(session: Session, study_id: int, *, error: str) -> list[int]:
    """Mark the study's pending and running trials failed with ``error``; returns their ids."""
    trials = unfinished_trials(session, study_id)
    for trial in trials:
        finish_trial(session, trial, TrialStatus.FAILED, error=error)
    return [trial.id for trial in trials]


def finish_trial(
    session: Session,
    trial: TrialRow,
    status: TrialStatus,
    *,
    value: float | None = None,
    std_error: float | None = None,
    value_folds: int | None = None,
    pruned_reason: str | None = None,
    error: str | None = None,
    objective_values: list[list[float | None]] | None = None,
    constraint_values: list[float] | None = None,
    feasible: bool | None = None,
) -> None:
    trial.status = status
    trial.value = value
    trial.std_error = std_error
    trial.value_folds = value_folds
    trial.objective_values = objective_values
    trial.constraint_values = constraint_values
    trial.feasible = feasible
    trial.pruned_reason = pruned_reason
    trial.error = error
    trial.finished_at = utcnow()


_TRIALS = TrialRow.__table__
ENDED_FIELDS = (
    "value",
    "std_error",
    "value_folds",
    "pruned_reason",
    "error",
    "objective_values",
    "constraint_values",
    "feasible",
)
"""What a trial's end records beside its status (``finish_trial``'s keywords)."""
_END_TRIAL = (
    update(_TRIALS)
    .where(_TRIALS.c.id == bindparam("b_trial"))
    .values(
        status=bindparam("b_status", type_=_TRIALS.c.status.type),
        finished_at=bindparam("b_now", type_=_TRIALS.c.finished_at.type),
        **{name: bindparam(f"b_{name}", type_=_TRIALS.c[name].type) for name in ENDED_FIELDS},
    )
    .returning(
        _TRIALS.c.number,
        _TRIALS.c.status,
        _TRIALS.c.params,
        _TRIALS.c.value,
        _TRIALS.c.std_error,
        _TRIALS.c.value_folds,
        _TRIALS.c.objective_values,
        _TRIALS.c.constraint_values,
    )
)


def end_trial(
    session: Session, trial_id: int, status: TrialStatus, **fields: Any
) -> Row[Any] | None:
    """``finish_trial`` of trial ``trial_id`` as one statement built once (the scheduler's
    commonest trial write): the trial's row as the optimizer reads it (number, status, params,
    values), or None when it is gone (deleted with its study as it ended)."""
    unknown = set(fields) - set(ENDED_FIELDS)
    if unknown:
        raise TypeError(f"a trial's end records no {sorted(unknown)}")
    session.flush()
    values = {f"b_{name}": fields.get(name) for name in ENDED_FIELDS}
    bound = {"b_trial": trial_id, "b_status": status, "b_now": utcnow(), **values}
    return session.connection().execute(_END_TRIAL, bound).first()
