"""A study's Pareto front: its completed, feasible trials that no other such trial dominates on
every objective (read from ``trials.objective_values``, or ``value`` for one objective)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from foldwise.optimizers.pareto import non_dominated
from foldwise.schemas import TrialStatus
from foldwise.service.db.models import StudyRow, TrialRow


@dataclass(frozen=True)
class ObjectivePoint:
    """A completed trial in objective space: each objective's value in the study's own
    direction, whether it is feasible (None: the study has no constraints) and on the front."""

    number: int
    values: list[float | None]
    feasible: bool | None
    front: bool


def pareto_front(session: Session, study: StudyRow) -> list[TrialRow]:
    """The front's trials in trial order. With one objective it is the best trial (and any
    that tie with it)."""
    rows, front = _completed_with_front(session, study)
    return [row for row, keep in zip(rows, front, strict=True) if keep]


def objective_points(session: Session, study: StudyRow) -> list[ObjectivePoint]:
    """Every completed trial in objective space, in trial order, marked when on the front."""
    rows, front = _completed_with_front(session, study)
    width = len(study.spec.all_objectives)
    return [
        ObjectivePoint(row.number, _values(row, width), row.feasible, bool(keep))
        for row, keep in zip(rows, front, strict=True)
    ]


def _completed_with_front(session: Session, study: StudyRow) -> tuple[list[TrialRow], np.ndarray]:
    spec = study.spec
    query = select(TrialRow).where(
        TrialRow.study_id == study.id,
        TrialRow.status == TrialStatus.COMPLETED,
        TrialRow.value.is_not(None),
    )
    rows = list(session.scalars(query.order_by(TrialRow.number)))
    if not rows:
        return [], np.zeros(0, dtype=bool)
    signs = np.array([-1.0 if o.maximize else 1.0 for o in spec.all_objectives])
    points = np.array([_values(row, len(signs)) for row in rows], dtype=float)
    points = signs * points.reshape(len(rows), len(signs))
    violations = np.array([0.0 if row.feasible is not False else 1.0 for row in rows])
    return rows, non_dominated(points, violations)


def _values(row: TrialRow, width: int) -> list[float | None]:
    if width == 1:
        return [row.value]
    values = row.objective_values or []
    if len(values) != width:  # not scored on every objective: never on the front
        return [None] * width
    return [v[0] for v in values]
