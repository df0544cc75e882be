"""Aggregate queries behind the dashboard's plots: compact rows, sampled on the server.

Functions take the caller's session and never commit. A study of 10,000 trials × 5 folds × 20
epochs must not be shipped whole to a browser, so these return only what a plot draws.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from foldwise.schemas import FoldStatus, TrialStatus
from service.db.models import EpochMetricRow, FoldRunRow, TrialRow


@dataclass(frozen=True, slots=True)
class Point:
    """One completed trial as the history, parallel-coordinates and slice plots need it."""

    number: int
    value: float
    std_error: float | None
    params: dict[str, Any]
    finished_at: datetime | None


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
    query = select(
        TrialRow.number, TrialRow.value, TrialRow.std_error, TrialRow.finished_at
    ).where(TrialRow.study_id == study_id, TrialRow.status == TrialStatus.COMPLETED)
    if finished_since is not None:
        query = query.where(TrialRow.finished_at >= finished_since)
    rows = session.execute(query.order_by(TrialRow.number))
    return [Point(n, v, se, {}, f) for n, v, se, f in rows if v is not None]


def with_params(session: Session, study_id: int, points: Sequence[Point]) -> list[Point]:
    """The same points with their params: decoding JSON only for the points a plot will show."""
    params: dict[int, dict[str, Any]] = {}
    numbers = [p.number for p in points]
    for start in range(0, len(numbers), 1000):  # stay far below any backend's bind limit
        chunk = numbers[start : start + 1000]
        query = select(TrialRow.number, TrialRow.params).where(
            TrialRow.study_id == study_id, TrialRow.number.in_(chunk)
        )
        params.update({n: p or {} for n, p in session.execute(query)})
    return [replace(p, params=params.get(p.number, {})) for p in points]


def best_so_far(points: Sequence[Point], *, maximize: bool) -> list[Point]:
    """The trials that improved on every lower-numbered one: the steps of the best-so-far line."""
    steps: list[Point] = []
    for point in sorted(points, key=lambda p: p.number):
        if not steps or _better(point.value, steps[-1].value, maximize):
            steps.append(point)
    return steps


def downsample(points: Sequence[Point], max_points: int, *, maximize: bool) -> list[Point]:
    """At most ``max_points`` points: the best quarter of the budget, then each bucket's extremes.

    The best trials are what a user looks for; the per-bucket minimum and maximum keep the
    envelope of the history (and the spread on every axis) where a stride would lose it.
    """
    if len(points) <= max_points:
        return list(points)
    ranked = sorted(points, key=lambda p: -p.value if maximize else p.value)
    keep = {p.number: p for p in ranked[: max_points // 4]}
    buckets = max(1, (max_points - len(keep)) // 2)
    size = -(-len(points) // buckets)
    ordered = sorted(points, key=lambda p: p.number)
    for start in range(0, len(ordered), size):
        chunk = ordered[start : start + size]
        for point in (min(chunk, key=_value), max(chunk, key=_value)):
            keep.setdefault(point.number, point)
    return sorted(keep.values(), key=lambda p: p.number)


def count_completed(session: Session, study_id: int) -> int:
    query = (
        select(func.count())
        .select_from(TrialRow)
        .where(TrialRow.study_id == study_id, TrialRow.status == TrialStatus.COMPLETED)
    )
    return session.scalar(query) or 0


def top_trial_folds(
    session: Session, study_id: int, *, maximize: bool, top: int
) -> list[tuple[TrialRow, dict[int, float]]]:
    """The ``top`` best completed trials with the value of each of their completed folds."""
    order = TrialRow.value.desc() if maximize else TrialRow.value.asc()
    trials = session.scalars(
        select(TrialRow)
        .where(TrialRow.study_id == study_id, TrialRow.status == TrialStatus.COMPLETED)
        .order_by(order, TrialRow.number)
        .limit(top)
    ).all()
    folds: dict[int, dict[int, float]] = {t.id: {} for t in trials}
    query = select(FoldRunRow.trial_id, FoldRunRow.fold, FoldRunRow.value).where(
        FoldRunRow.trial_id.in_(folds), FoldRunRow.status == FoldStatus.COMPLETED
    )
    for trial_id, fold, value in session.execute(query):
        if value is not None:
            folds[trial_id][fold] = value
    return [(t, folds[t.id]) for t in trials]


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


def _better(value: float, incumbent: float, maximize: bool) -> bool:
    return value > incumbent if maximize else value < incumbent


def _value(point: Point) -> float:
    return point.value


def _number(raw: Any) -> float | None:
    return float(raw) if isinstance(raw, int | float) else None
