"""Routes behind the dashboard's plots: server-side aggregates as compact column arrays.

Each endpoint answers with parallel arrays (``number[i]`` goes with ``value[i]``) rather than a
list of objects, and takes a cursor so that a live page asks only for what changed.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from fastapi import APIRouter, Query, Response
from sqlalchemy.orm import Session

from foldwise.pruners.selection import selection_estimate
from foldwise.schemas import (
    BestSteps,
    Curves,
    History,
    ObjectiveName,
    ObjectivePoints,
    PrunedHistory,
    SelectionEstimate,
    TopFolds,
)
from foldwise.service.api import plot_sampling
from foldwise.service.api.deps import study_or_404
from foldwise.service.api.read_cache import ReadsDep, conditional
from foldwise.service.db import insights
from foldwise.service.db.models import StudyRow, TrialRow
from foldwise.service.db.pareto import objective_points
from foldwise.service.hardening.errors import documented
from foldwise.service.hardening.input_rules import MAX_ID, StudyId, UtcDatetime, decimal_int

router = APIRouter(
    prefix="/studies/{study_id}/insights", tags=["insights"], responses=documented(404)
)

CURSOR_OVERLAP = timedelta(seconds=30)
"""Trials that commit late with an earlier ``finished_at`` are still seen; clients dedupe."""


@router.get("/history", **conditional(History))
async def history(
    study_id: StudyId,
    reads: ReadsDep,
    since: UtcDatetime | None = None,
    max_points: Annotated[decimal_int(10, 20000), Query()] = 1000,
) -> Response:
    """Completed trials for the history, parallel-coordinates and slice plots, downsampled;
    and the pruned trials for the history, in fewer points."""

    def work(session: Session) -> History:
        study = study_or_404(session, study_id)
        maximize = study.spec.objective.maximize
        points = insights.completed_points(session, study.id, finished_since=since)
        shown = insights.with_params(
            session, study.id, plot_sampling.downsample(points, max_points, maximize=maximize)
        )
        steps = plot_sampling.best_so_far(points, maximize=maximize)
        pruned = insights.pruned_points(session, study.id, finished_since=since)
        finished = [p.finished_at for p in [*points, *pruned] if p.finished_at is not None]
        names = list(study.spec.space)
        return History(
            count=insights.count_completed(session, study.id),
            sampled=len(shown) < len(points),
            cursor=max(finished) - CURSOR_OVERLAP if finished else since,
            number=[p.number for p in shown],
            value=[p.value for p in shown],
            std_error=[p.std_error for p in shown],
            params={name: [p.params.get(name) for p in shown] for name in names},
            feasible=[p.feasible for p in shown],
            best=BestSteps(number=[p.number for p in steps], value=[p.value for p in steps]),
            pruned=_pruned_history(session, study, pruned, max_points // 4),
        )

    return await reads.study(study_id, work)


@router.get("/folds", **conditional(TopFolds))
async def top_folds(
    study_id: StudyId, reads: ReadsDep, top: Annotated[decimal_int(1, 100), Query()] = 10
) -> Response:
    """Each fold's value for the best ``top`` trials: how much the folds of a winner disagree;
    and the best trial's value beside its selection-corrected estimate."""

    def work(session: Session) -> TopFolds:
        study = study_or_404(session, study_id)
        k = study.spec.fold_count
        rows = insights.top_trial_folds(
            session, study.id, maximize=study.spec.objective.maximize, top=top
        )
        return TopFolds(
            folds=k,
            number=[t.number for t, _ in rows],
            value=[t.value for t, _ in rows],
            std_error=[t.std_error for t, _ in rows],
            fold_values=[[values.get(fold) for fold in range(k)] for _, values in rows],
            selection=_selection(session, study, rows),
        )

    return await reads.study(study_id, work)


def _selection(
    session: Session, study: StudyRow, rows: list[tuple[TrialRow, dict[int, float]]]
) -> SelectionEstimate | None:
    """The best trial's estimate, when the study has one best trial with every fold's value."""
    if study.spec.objectives or not rows or rows[0][0].feasible is False:
        return None
    best, values = rows[0]
    k, maximize = study.spec.fold_count, study.spec.objective.maximize
    bests, trials = insights.fold_bests(session, study.id, maximize=maximize)
    if any(fold not in values or fold not in bests for fold in range(k)):
        return None  # a completed trial missing a fold value: nothing to compare on
    mine = [values[fold] for fold in range(k)]
    estimate = selection_estimate(
        mine, [bests[fold] for fold in range(k)], trials=trials, maximize=maximize
    )
    return SelectionEstimate(number=best.number, **vars(estimate))


@router.get("/curves", **conditional(Curves))
async def curves(
    study_id: StudyId,
    reads: ReadsDep,
    metric: Annotated[
        str | None, Query(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")
    ] = None,
    after: Annotated[decimal_int(0, MAX_ID), Query()] = 0,
) -> Response:
    """Learning curves of the running trials, one row per epoch, newer than epoch row ``after``."""

    def work(session: Session) -> Curves:
        study = study_or_404(session, study_id)
        name = metric or study.spec.objective.metric
        rows = insights.running_curves(session, study.id, name, after_id=after)
        return Curves(
            metric=name,
            cursor=max((r.id for r in rows), default=after),
            running=insights.running_trial_numbers(session, study.id),
            trial=[r.trial for r in rows],
            fold=[r.fold for r in rows],
            attempt=[r.attempt for r in rows],
            epoch=[r.epoch for r in rows],
            value=[r.value for r in rows],
        )

    return await reads.study(study_id, work, folds=True)


@router.get("/objectives", **conditional(ObjectivePoints))
async def objectives(
    study_id: StudyId,
    reads: ReadsDep,
    max_points: Annotated[decimal_int(10, 20000), Query()] = 2000,
) -> Response:
    """Completed trials in objective space, the Pareto front marked, for the Pareto plot: the
    front, then an even spread of the other trials up to ``max_points``."""

    def work(session: Session) -> ObjectivePoints:
        study = study_or_404(session, study_id)
        points = objective_points(session, study)
        front = [p for p in points if p.front]
        rest = [p for p in points if not p.front]
        room = max(0, max_points - len(front))
        if len(rest) > room:
            step = len(rest) / room if room else 0
            rest = [rest[int(i * step)] for i in range(room)]
        shown = sorted([*front, *rest], key=lambda p: p.number)
        width = len(study.spec.all_objectives)
        return ObjectivePoints(
            objectives=[
                ObjectiveName(metric=o.metric, direction=o.direction)
                for o in study.spec.all_objectives
            ],
            number=[p.number for p in shown],
            values=[[p.values[j] for p in shown] for j in range(width)],
            feasible=[p.feasible for p in shown],
            front=[p.front for p in shown],
            count=len(points),
            sampled=len(shown) < len(points),
        )

    return await reads.study(study_id, work)


def _pruned_history(
    session: Session, study: StudyRow, points: list[insights.PrunedPoint], max_points: int
) -> PrunedHistory:
    """Pruned trials for the history: fewer than the completed ones, as each carries its reason
    (a line of text) and matters less than a full cross-validated value."""
    sampled = plot_sampling.downsample(points, max_points, maximize=study.spec.objective.maximize)
    shown = insights.with_reasons(session, study.id, sampled)
    return PrunedHistory(
        count=insights.count_pruned(session, study.id),
        sampled=len(shown) < len(points),
        number=[p.number for p in shown],
        value=[p.value for p in shown],
        std_error=[p.std_error for p in shown],
        value_folds=[p.value_folds for p in shown],
        reason=[p.reason for p in shown],
    )
