"""Aggregate queries behind the dashboard's plots: compact rows, which ``plot_sampling`` then
thins on the server (a study of 10,000 trials × 5 folds × 20 epochs is not shipped whole to a
browser). Functions take the caller's session and never commit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import InstrumentedAttribute, Session

from foldwise.schemas import FoldStatus, TrialStatus
from foldwise.service.db.models import EpochMetricRow, FoldRunRow, TrialRow


@dataclass(frozen=True, slots=True)
class Point:
    """One completed trial as the history, parallel-coordinates and slice plots need it."""

    number: int
    value: float
    std_error: float | None
    params: dict[str, Any]
    finished_at: datetime | None
    feasible: bool | None = None
    """Whether it meets the study's constraints (None: the study has none)."""


@dataclass(frozen=True, slots=True)
class PrunedPoint:
    """One pruned trial for the history plot: its partial mean and why it stopped."""

    number: int
    value: float
    std_error: float | None
    value_folds: int | None
    finished_at: datetime | None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class CurveRow:
    """One epoch of one fold attempt of a running trial."""

    id: int
    trial: int
    fold: int
    attempt: int
    epoch: int
    value: float | None


def completed_points(
    session: Session, study_id: int, *, finished_since: datetime | None = None
) -> list[Point]:
    """Completed trials in number order, without params (see ``with_params``); only those
    finished at or after ``finished_since`` when it is given."""
    columns = (TrialRow.number, TrialRow.value, TrialRow.std_error, TrialRow.finished_at)
    query = select(*columns, TrialRow.feasible).where(
        TrialRow.study_id == study_id, TrialRow.status == TrialStatus.COMPLETED
    )
    if finished_since is not None:
        query = query.where(TrialRow.finished_at >= finished_since)
    rows = session.execute(query.order_by(TrialRow.number))
    return [Point(n, v, se, {}, f, ok) for n, v, se, f, ok in rows if v is not None]


def pruned_points(
    session: Session, study_id: int, *, finished_since: datetime | None = None
) -> list[PrunedPoint]:
    """Pruned trials in number order, without their reasons (see ``with_reasons``); only those
    finished at or after ``finished_since`` when it is given."""
    query = select(
        TrialRow.number,
        TrialRow.value,
        TrialRow.std_error,
        TrialRow.value_folds,
        TrialRow.finished_at,
    ).where(TrialRow.study_id == study_id, TrialRow.status == TrialStatus.PRUNED)
    if finished_since is not None:
        query = query.where(TrialRow.finished_at >= finished_since)
    rows = session.execute(query.order_by(TrialRow.number))
    return [PrunedPoint(n, v, se, k, f) for n, v, se, k, f in rows if v is not None]


def with_params(session: Session, study_id: int, points: Sequence[Point]) -> list[Point]:
    """The same points with their params: decoding JSON only for the points a plot will show."""
    params = _by_number(session, study_id, TrialRow.params, [p.number for p in points])
    return [replace(p, params=params.get(p.number) or {}) for p in points]


def with_reasons(
    session: Session, study_id: int, points: Sequence[PrunedPoint]
) -> list[PrunedPoint]:
    """The same pruned points with their reasons, read only for the points a plot will show."""
    reasons = _by_number(session, study_id, TrialRow.pruned_reason, [p.number for p in points])
    return [replace(p, reason=reasons.get(p.number)) for p in points]


def _by_number(
    session: Session, study_id: int, column: InstrumentedAttribute[Any], numbers: list[int]
) -> dict[int, Any]:
    """``column`` of the study's trials with these numbers, by number."""
    found: dict[int, Any] = {}
    for start in range(0, len(numbers), 1000):  # stay far below any backend's bind limit
        chunk = numbers[start : start + 1000]
        query = select(TrialRow.number, column).where(
            TrialRow.study_id == study_id, TrialRow.number.in_(chunk)
        )
        found.update({n: value for n, value in session.execute(query)})
    return found


def count_completed(session: Session, study_id: int) -> int:
    return _count(session, study_id, TrialStatus.COMPLETED)


def count_pruned(session: Session, study_id: int) -> int:
    return _count(session, study_id, TrialStatus.PRUNED)


def _count(session: Session, study_id: int, status: TrialStatus) -> int:
    query = (
        select(func.count())
        .select_from(TrialRow)
        .where(TrialRow.study_id == study_id, TrialRow.status == status)
    )
    return session.scalar(query) or 0


def top_trial_folds(
    session: Session, study_id: int, *, maximize: bool, top: int
) -> list[tuple[TrialRow, dict[int, float]]]:
    """The ``top`` best completed trials with the value of each of their completed folds; those
    that meet the study's constraints first."""
    order = TrialRow.value.desc() if maximize else TrialRow.value.asc()
    completed = (TrialRow.study_id == study_id, TrialRow.status == TrialStatus.COMPLETED)
    trials: list[TrialRow] = []
    # two walks of the (study, value) index, each cut at ``top``, rather than one sort of all
    for feasible in (TrialRow.feasible.is_not(False), TrialRow.feasible.is_(False)):
        if len(trials) < top:
            query = select(TrialRow).where(*completed, feasible)
            query = query.order_by(order, TrialRow.number).limit(top - len(trials))
            trials += session.scalars(query).all()
    folds: dict[int, dict[int, float]] = {t.id: {} for t in trials}
    query = select(FoldRunRow.trial_id, FoldRunRow.fold, FoldRunRow.value).where(
        FoldRunRow.trial_id.in_(folds), FoldRunRow.status == FoldStatus.COMPLETED
    )
    for trial_id, fold, value in session.execute(query):
        if value is not None:
            folds[trial_id][fold] = value
    return [(t, folds[t.id]) for t in trials]


def fold_bests(session: Session, study_id: int, *, maximize: bool) -> tuple[dict[int, float], int]:
    """Each fold's best value among the study's completed trials that meet its constraints,
    and how many such trials there are: the candidates a best trial was picked among (one
    aggregate query, not their rows)."""
    best = func.max(FoldRunRow.value) if maximize else func.min(FoldRunRow.value)
    candidates = (
        TrialRow.study_id == study_id,
        TrialRow.status == TrialStatus.COMPLETED,
        TrialRow.feasible.is_not(False),
    )
    query = (
        select(FoldRunRow.fold, best)
        .join(TrialRow, FoldRunRow.trial_id == TrialRow.id)
        .where(*candidates, FoldRunRow.status == FoldStatus.COMPLETED)
        .group_by(FoldRunRow.fold)
    )
    bests = {fold: value for fold, value in session.execute(query) if value is not None}
    count = session.scalar(select(func.count()).select_from(TrialRow).where(*candidates))
    return bests, count or 0


def running_trial_numbers(session: Session, study_id: int) -> list[int]:
    query = select(TrialRow.number).where(
        TrialRow.study_id == study_id, TrialRow.status == TrialStatus.RUNNING
    )
    return list(session.scalars(query.order_by(TrialRow.number)))


def running_curves(
    session: Session, study_id: int, metric: str, *, after_id: int = 0
) -> list[CurveRow]:
    """Epochs of the running trials' fold attempts stored after epoch row ``after_id``."""
    query = (
        select(
            EpochMetricRow.id,
            TrialRow.number,
            FoldRunRow.fold,
            FoldRunRow.attempt,
            EpochMetricRow.epoch,
            EpochMetricRow.metrics,
        )
        .join(FoldRunRow, EpochMetricRow.fold_run_id == FoldRunRow.id)
        .join(TrialRow, FoldRunRow.trial_id == TrialRow.id)
        .where(
            TrialRow.study_id == study_id,
            TrialRow.status == TrialStatus.RUNNING,
            EpochMetricRow.id > after_id,
        )
        .order_by(EpochMetricRow.id)
    )
    return [
        CurveRow(i, n, f, a, e, _number(m.get(metric)))
        for i, n, f, a, e, m in session.execute(query)
    ]


def _number(raw: Any) -> float | None:
    return float(raw) if isinstance(raw, int | float) else None
