"""Queries on runs (a fold of a trial, or a refit: ``FoldRunRow``) and their per-epoch metrics.
Functions never commit."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Integer, bindparam, case, func, insert, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from foldwise.schemas import FoldStatus, TrialStatus
from foldwise.service.db.models import EpochMetricRow, FoldRunRow, TrialRow, utcnow
from foldwise.trainers.report import ArtifactKind, EpochReport


def start_fold_run(session: Session, trial_id: int, fold: int) -> FoldRunRow:
    """A new attempt at ``fold``: one more than any attempt stored before."""
    [(run_id, _attempt)] = start_fold_runs(session, [(trial_id, fold)])
    run = session.get(FoldRunRow, run_id)
    assert run is not None
    return run


def record_epoch(session: Session, fold_run_id: int, report: EpochReport) -> None:
    """Store one epoch's report; recording the same (run, epoch) twice keeps the first."""
    record_epochs(session, [(fold_run_id, report)])


_RUNS = FoldRunRow.__table__
_NEXT_ATTEMPT = (
    select(func.coalesce(func.max(_RUNS.c.attempt) + 1, 0))
    .where(_RUNS.c.trial_id == bindparam("b_trial"), _RUNS.c.fold == bindparam("b_fold"))
    .scalar_subquery()
)
_START = (
    insert(_RUNS)
    .values(
        trial_id=bindparam("b_trial"),
        fold=bindparam("b_fold"),
        attempt=_NEXT_ATTEMPT,
        status=FoldStatus.RUNNING,
        started_at=bindparam("b_now"),
    )
    .returning(_RUNS.c.id, _RUNS.c.attempt)
)
_FINISH = (
    update(_RUNS)
    .where(_RUNS.c.id == bindparam("b_run"))
    .values(
        status=bindparam("b_status"),
        value=bindparam("b_value"),
        metric_values=bindparam("b_metric_values", type_=_RUNS.c.metric_values.type),
        error=bindparam("b_error"),
        traceback=bindparam("b_traceback"),
        train_seconds=bindparam("b_train_seconds"),
        finished_at=bindparam("b_now"),
    )
)
_NEXT_REFIT_ATTEMPT = (
    select(func.coalesce(func.max(_RUNS.c.attempt) + 1, 0))
    .where(_RUNS.c.refit_id == bindparam("b_refit"))
    .scalar_subquery()
)
_START_REFIT = (
    insert(_RUNS)
    .values(
        refit_id=bindparam("b_refit"),
        attempt=_NEXT_REFIT_ATTEMPT,
        status=FoldStatus.RUNNING,
        started_at=bindparam("b_now"),
    )
    .returning(_RUNS.c.id, _RUNS.c.attempt)
)
"""The scheduler's statements for a run's start and end, built once (Core: a fold run's start
and end are the control path's commonest writes)."""


def start_fold_runs(session: Session, folds: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """A new attempt at each (trial id, fold), one more than any stored before: their
    (fold run id, attempt), in order."""
    session.flush()
    connection, now = session.connection(), utcnow()
    started = []
    for trial_id, fold in folds:
        row = connection.execute(_START, {"b_trial": trial_id, "b_fold": fold, "b_now": now}).one()
        started.append((int(row[0]), int(row[1])))
    return started


def start_refit_run(session: Session, refit_id: int) -> tuple[int, int]:
    """A new attempt at refit ``refit_id``, one more than any stored before: its (run id,
    attempt). An attempt still ``running`` was cut short by a service that stopped: it is
    marked lost first, as a fold's would be."""
    _close(session, _CLOSE_REFIT_RUNS, [refit_id], FoldStatus.LOST, SERVICE_STOPPED)
    bound = {"b_refit": refit_id, "b_now": utcnow()}
    row = session.connection().execute(_START_REFIT, bound).one()
    return int(row[0]), int(row[1])


def finish_fold_run(
    session: Session,
    fold_run_id: int,
    status: FoldStatus,
    *,
    value: float | None = None,
    metric_values: dict[str, float] | None = None,
    error: str | None = None,
    traceback: str | None = None,
    train_seconds: float | None = None,
) -> None:
    """Record how the run ended (nothing happens to a run that is gone: deleted with its
    study while it was ending)."""
    session.flush()
    session.connection().execute(
        _FINISH,
        {
            "b_run": fold_run_id,
            "b_status": status,
            "b_value": value,
            "b_metric_values": metric_values,
            "b_error": error,
            "b_traceback": traceback,
            "b_train_seconds": train_seconds,
            "b_now": utcnow(),
        },
    )


def existing_fold_runs(session: Session, fold_run_ids: set[int]) -> set[int]:
    """Those of these fold runs that are stored (a run's rows go with its study)."""
    if not fold_run_ids:
        return set()
    query = select(FoldRunRow.id).where(FoldRunRow.id.in_(sorted(fold_run_ids)))
    return set(session.scalars(query))


def record_epochs(session: Session, reports: Sequence[tuple[int, EpochReport]]) -> None:
    """Store many (fold run id, report) pairs in one statement; an epoch of a run already
    stored keeps its first report (a retried batch, a re-reported epoch)."""
    if not reports:
        return
    rows = [
        {
            "fold_run_id": run_id,
            "epoch": report.epoch,
            "metrics": report.metrics,
            "restored": report.restored,
            "stopped": report.stopped,
        }
        for run_id, report in reports
    ]
    session.flush()
    connection = session.connection()
    connection.execute(_RECORD_EPOCHS[connection.dialect.name], rows)


_EPOCHS = EpochMetricRow.__table__
_RECORD_EPOCHS = {
    name: dialect_insert(_EPOCHS).on_conflict_do_nothing(index_elements=["fold_run_id", "epoch"])
    for name, dialect_insert in (("postgresql", postgresql.insert), ("sqlite", sqlite.insert))
}
"""Epoch rows in bulk (Core, built once per backend); an epoch stored already keeps its first
report."""


_LATEST_CHECKPOINT = bindparam("checkpoint", type_=Integer)
_RECORD_CHECKPOINT = (
    update(_RUNS)
    .where(_RUNS.c.id == bindparam("run"))
    .values(
        checkpoint_epoch=case(
            (
                _RUNS.c.checkpoint_epoch.is_(None)
                | (_RUNS.c.checkpoint_epoch < _LATEST_CHECKPOINT),
                _LATEST_CHECKPOINT,
            ),
            else_=_RUNS.c.checkpoint_epoch,
        )
    )
)
_RECORD_MODELS = (
    update(_RUNS).where(_RUNS.c.id.in_(bindparam("runs", expanding=True))).values(model_saved=True)
)
_RECORD_PLACEMENT = (
    update(_RUNS)
    .where(_RUNS.c.id == bindparam("run"), _RUNS.c.placement.is_(None))
    .values(placement=bindparam("where", type_=_RUNS.c.placement.type))
)
"""The batch lane's statements for a run's files and placement, built once (Core: one
executemany a batch, no ORM bookkeeping)."""


def record_run_files(session: Session, checkpoints: dict[int, int], models: set[int]) -> None:
    """Many runs' artifact records at once: the latest epoch each checkpointed after
    (``checkpoints``), and which saved their model (``models``), in run order."""
    if not checkpoints and not models:
        return
    session.flush()
    connection = session.connection()
    if checkpoints:
        connection.execute(
            _RECORD_CHECKPOINT,
            [{"run": run, "checkpoint": checkpoints[run]} for run in sorted(checkpoints)],
        )
    if models:
        connection.execute(_RECORD_MODELS, {"runs": sorted(models)})


def record_placements(session: Session, placements: dict[int, list[dict[str, Any]]]) -> None:
    """Where each of these runs' ranks were placed, where it is not known yet."""
    if not placements:
        return
    session.flush()
    session.connection().execute(
        _RECORD_PLACEMENT, [{"run": run, "where": placements[run]} for run in sorted(placements)]
    )


def record_artifact(session: Session, fold_run_id: int, kind: ArtifactKind, epoch: int) -> None:
    """The run checkpointed after ``epoch`` (the latest one counts), or saved its model."""
    if kind is ArtifactKind.MODEL:
        record_run_files(session, {}, {fold_run_id})
    else:
        record_run_files(session, {fold_run_id: epoch}, set())


def completed_fold_values(session: Session, trial_id: int) -> dict[int, float]:
    """Value of each fold of a trial that already has a completed attempt."""
    query = select(FoldRunRow.fold, FoldRunRow.value).where(
        FoldRunRow.trial_id == trial_id, FoldRunRow.status == FoldStatus.COMPLETED
    )
    return {fold: value for fold, value in session.execute(query)}


def finished_trials_fold_values(session: Session, study_id: int) -> dict[int, dict[int, float]]:
    """The completed folds' values of each of the study's completed and pruned trials, by
    trial id: what the study's fold model is fitted to (one query)."""
    query = (
        select(FoldRunRow.trial_id, FoldRunRow.fold, FoldRunRow.value)
        .join(TrialRow, TrialRow.id == FoldRunRow.trial_id)
        .where(
            TrialRow.study_id == study_id,
            TrialRow.status.in_((TrialStatus.COMPLETED, TrialStatus.PRUNED)),
            FoldRunRow.status == FoldStatus.COMPLETED,
            FoldRunRow.value.is_not(None),
        )
    )
    table: dict[int, dict[int, float]] = {}
    for trial_id, fold, value in session.execute(query):
        table.setdefault(trial_id, {})[fold] = value
    return table


def completed_fold_metrics(session: Session, trial_id: int) -> dict[int, dict[str, float]]:
    """The scored metrics (``FoldRunRow.metric_values``) of each fold of a trial that already
    has a completed attempt, where it has them."""
    query = select(FoldRunRow.fold, FoldRunRow.metric_values).where(
        FoldRunRow.trial_id == trial_id, FoldRunRow.status == FoldStatus.COMPLETED
    )
    return {fold: values for fold, values in session.execute(query) if values is not None}


SERVICE_STOPPED = "the service stopped"
"""The error of a fold run cut short because the service stopped (``lost``: it runs again)."""


def mark_lost_fold_runs(session: Session, study_id: int) -> int:
    """Fold runs left ``running`` by a service that stopped: mark them lost so they re-run."""
    trial_ids = select(TrialRow.id).where(
        TrialRow.study_id == study_id,
        TrialRow.status.in_((TrialStatus.PENDING, TrialStatus.RUNNING)),
    )
    result = session.execute(
        update(FoldRunRow)
        .where(FoldRunRow.trial_id.in_(trial_ids), FoldRunRow.status == FoldStatus.RUNNING)
        .values(status=FoldStatus.LOST, finished_at=utcnow(), error=SERVICE_STOPPED)
    )
    return result.rowcount or 0


def _close_runs(owner: Any) -> Any:
    """An update of the runs still ``running`` among those whose ``owner`` column (their id,
    trial or refit) is in ``b_owners``, to ``b_status`` with ``b_error``."""
    return (
        update(_RUNS)
        .where(owner.in_(bindparam("b_owners", expanding=True)))
        .where(_RUNS.c.status == FoldStatus.RUNNING)
        .values(
            status=bindparam("b_status"),
            finished_at=bindparam("b_now"),
            error=bindparam("b_error"),
        )
    )


_CLOSE_RUNS = _close_runs(_RUNS.c.id)
_CLOSE_TRIAL_RUNS = _close_runs(_RUNS.c.trial_id)
_CLOSE_REFIT_RUNS = _close_runs(_RUNS.c.refit_id)


def _close(
    session: Session, statement: Any, owners: Sequence[int], status: FoldStatus, error: str | None
) -> int:
    if not owners:
        return 0
    session.flush()
    result = session.connection().execute(
        statement,
        {"b_owners": list(owners), "b_status": status, "b_now": utcnow(), "b_error": error},
    )
    return result.rowcount or 0


def close_fold_runs(
    session: Session, fold_run_ids: Sequence[int], status: FoldStatus, error: str | None
) -> int:
    """Runs among these still ``running``: mark them ended with ``status``."""
    return _close(session, _CLOSE_RUNS, fold_run_ids, status, error)


def close_refit_runs(session: Session, refit_ids: Sequence[int], error: str | None) -> int:
    """Runs of these refits still ``running``: mark them failed, as their refit has ended."""
    return _close(session, _CLOSE_REFIT_RUNS, refit_ids, FoldStatus.FAILED, error)


def close_open_fold_runs(session: Session, trial_ids: Sequence[int]) -> int:
    """Fold runs of these trials still ``running``: mark them cancelled, as their trial has
    ended (a fold cancelled while its record was being created is one)."""
    return _close(
        session, _CLOSE_TRIAL_RUNS, trial_ids, FoldStatus.CANCELLED, "its trial ended first"
    )


def fold_runs_of(session: Session, trial_id: int) -> Sequence[FoldRunRow]:
    query = select(FoldRunRow).where(FoldRunRow.trial_id == trial_id)
    return session.scalars(query.order_by(FoldRunRow.fold, FoldRunRow.attempt)).all()


ENDED_CURVES = (FoldStatus.COMPLETED, FoldStatus.PRUNED, FoldStatus.CANCELLED)
"""Fold runs whose learning curves are references for pruning: they ended and will not change."""


def ended_fold_curves(
    session: Session, study_id: int, metric: str
) -> list[tuple[int, FoldStatus, list[float]]]:
    """(fold, status, ``metric`` after each epoch) of every ended fold run of the study."""
    value = EpochMetricRow.metrics[metric].as_float()
    query = (
        select(FoldRunRow.id, FoldRunRow.fold, FoldRunRow.status, value)
        .join(TrialRow, TrialRow.id == FoldRunRow.trial_id)
        .join(EpochMetricRow, EpochMetricRow.fold_run_id == FoldRunRow.id)
        .where(TrialRow.study_id == study_id, FoldRunRow.status.in_(ENDED_CURVES))
        .order_by(FoldRunRow.id, EpochMetricRow.epoch)
    )
    curves: dict[int, tuple[int, FoldStatus, list[float]]] = {}
    for run_id, fold, status, metric_value in session.execute(query):
        if metric_value is not None:
            curves.setdefault(run_id, (fold, status, []))[2].append(metric_value)
    return list(curves.values())
