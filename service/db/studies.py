"""Queries on studies. Functions take the caller's session and never commit."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, bindparam, func, or_, select, union_all, update
from sqlalchemy.orm import Session, aliased
from sqlalchemy.sql import Select

from foldwise.schemas import StudyStatus, TrialStatus
from foldwise.service.db.models import StudyRow, TrialRow, utcnow
from foldwise.spec import StudySpec

ACTIVE = (StudyStatus.QUEUED, StudyStatus.RUNNING)


def create_study(
    session: Session,
    spec: StudySpec,
    *,
    owner: str | None = None,
    code_hash: str | None = None,
    task_profile: str | None = None,
) -> StudyRow:
    """A queued study of ``spec``; ``code_hash`` names the snapshot of its task's package,
    ``task_profile`` what the task is (as JSON)."""
    study = StudyRow(
        name=spec.name,
        status=StudyStatus.QUEUED,
        spec=spec,
        owner=owner,
        code_hash=code_hash,
        task_profile=task_profile,
    )
    session.add(study)
    session.flush()
    return study


def get_study(session: Session, study_id: int) -> StudyRow | None:
    return session.get(StudyRow, study_id)


_STUDIES = StudyRow.__table__.c
_TOUCH = {
    False: update(StudyRow.__table__)
    .where(_STUDIES.id == bindparam("study"))
    .values(revision=_STUDIES.revision + 1),
    True: update(StudyRow.__table__)
    .where(_STUDIES.id == bindparam("study"))
    .values(revision=_STUDIES.revision + 1, trials_revision=_STUDIES.trials_revision + 1),
}
"""touch_study's statements, built once: every scheduler write runs one."""


def touch_study(session: Session, study_id: int, *, trials: bool = True) -> None:
    """Mark the study changed, in the caller's transaction: readers holding an older revision
    (an ETag, a cached response) know they must read again. ``trials=False`` for a change
    only to a fold run or its epochs, which leaves ``trials_revision`` as it is. Run last:
    the session's pending changes are flushed first, so rows are locked in one order (fold
    runs and trials, then the study) by every scheduler transaction."""
    session.flush()
    session.connection().execute(_TOUCH[trials], {"study": study_id})


def touch_studies(session: Session, study_ids: set[int], *, trials: set[int]) -> None:
    """``touch_study`` for many studies at once (a batch of fold reports), in id order; those
    in ``trials`` also get a new ``trials_revision``."""
    for changed, bumps in (
        (study_ids - trials, {"revision": StudyRow.revision + 1}),
        (
            study_ids & trials,
            {"revision": StudyRow.revision + 1, "trials_revision": StudyRow.trials_revision + 1},
        ),
    ):
        if changed:
            session.execute(
                update(StudyRow)
                .where(StudyRow.id.in_(sorted(changed)))
                .values(**bumps)
                .execution_options(synchronize_session=False)
            )


def study_revision(db: Session | Connection, study_id: int, *, folds: bool) -> int | None:
    """The study's revision (``folds``: of everything, else of the study and its trials only),
    or None when there is no such study. A Core query: it runs on a bare connection too."""
    column = StudyRow.revision if folds else StudyRow.trials_revision
    query = select(column).where(StudyRow.id == study_id, StudyRow.delete_requested.is_(False))
    return db.scalar(query)


def catalog_fingerprint(db: Session | Connection) -> tuple[int, int, int]:
    """(count, largest id, sum of trials revisions) of all studies: it changes whenever a study
    is created, deleted, or changed with its trials (what a study list shows), since ids only
    grow and revisions only go up."""
    query = select(
        func.count(),
        func.coalesce(func.max(StudyRow.id), 0),
        func.coalesce(func.sum(StudyRow.trials_revision), 0),
    )
    count, largest, revisions = db.execute(query).one()
    return int(count), int(largest), int(revisions)


def list_studies(
    session: Session, *, status: StudyStatus | None = None, limit: int = 100, offset: int = 0
) -> tuple[Sequence[StudyRow], int]:
    query = select(StudyRow).where(StudyRow.delete_requested.is_(False))
    if status is not None:
        query = query.where(StudyRow.status == status)
    count = session.scalar(select(func.count()).select_from(query.subquery())) or 0
    rows = session.scalars(query.order_by(StudyRow.id.desc()).limit(limit).offset(offset)).all()
    return rows, count


def active_study_ids(session: Session) -> list[int]:
    """Studies the scheduler should run (queued or running), or stop (asked to)."""
    query = select(StudyRow.id).where(StudyRow.status.in_(ACTIVE)).order_by(StudyRow.id)
    return list(session.scalars(query))


def deletion_requests(session: Session) -> list[int]:
    """Studies whose deletion was asked for and is still to be carried out."""
    query = select(StudyRow.id).where(StudyRow.delete_requested.is_(True))
    return list(session.scalars(query.order_by(StudyRow.id)))


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
    """The best completed (and feasible) trial of each study, in its own direction, in one
    query: a correlated ``ORDER BY value LIMIT 1`` per study, so each is one walk of
    ``ix_trials_study_id_value``. A study of several objectives has none: its best trials are
    its Pareto front (``pareto_front``)."""
    single = [s for s in studies if not s.spec.objectives]
    chosen = {
        maximize: [s.id for s in single if s.spec.objective.maximize is maximize]
        for maximize in (False, True)
    }
    directions = tuple(maximize for maximize in (False, True) if chosen[maximize])
    if not directions:
        return {}
    params = {f"b_{'max' if maximize else 'min'}": chosen[maximize] for maximize in directions}
    query = _best_trials_query(directions)
    return {row.study_id: row for row in session.scalars(query, params)}


@functools.cache
def _best_trials_query(directions: tuple[bool, ...]) -> Select[Any]:
    """The query of ``best_trials`` for studies that minimize, maximize or both, built once
    (the study ids are bound: ``b_min``, ``b_max``)."""
    ids = [_best_trial_ids(maximize=maximize) for maximize in directions]
    return select(TrialRow).where(TrialRow.id.in_(union_all(*ids).scalar_subquery()))


def no_best_trial(study: StudyRow) -> str:
    """Why ``best_trials`` finds no trial for ``study``, as an answer says it."""
    if study.spec.objectives:
        return (
            f"study {study.id} has {len(study.spec.objectives)} objectives and so no single "
            f"best trial: name a trial of its Pareto front (GET /studies/{study.id}/pareto)"
        )
    if study.spec.constraints:
        return f"study {study.id} has no completed trial that meets its constraints"
    return f"study {study.id} has no completed trial"


def _best_trial_ids(*, maximize: bool) -> Select[Any]:
    trial = aliased(TrialRow)
    best = (
        select(trial.id)
        .where(
            trial.study_id == StudyRow.id,
            trial.status == TrialStatus.COMPLETED,
            trial.value.is_not(None),
            or_(trial.feasible.is_(None), trial.feasible.is_(True)),
        )
        .order_by(trial.value.desc() if maximize else trial.value.asc(), trial.number)
        .limit(1)
        .correlate(StudyRow)
        .scalar_subquery()
    )
    ids = bindparam("b_max" if maximize else "b_min", expanding=True)
    return select(best).where(StudyRow.id.in_(ids))


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
        study.waiting = None
    if error is not None:
        study.error = error


def delete_study(session: Session, study: StudyRow) -> None:
    session.delete(study)
