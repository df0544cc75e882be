"""Warm starts: finished trials of earlier studies as a new study's prior observations.

At submit, ``plan_warm_start`` checks the studies the spec names (each must exist, which every
token may read, and optimise the same metric in the same direction: else a 422 naming
``warm_start.studies`` and the study) and projects each finished trial onto the new space
(``foldwise.space.project``: a trial outside it is skipped), keeping at most
``MAX_WARM_START_OBSERVATIONS`` and reading only as many as that needs (``select_fitting``);
``seed_study`` copies what fits into the new study, in the transaction that creates it. A
copy, not a reference: a restarted service rebuilds the same optimizer from it even after a
named study was deleted, and a named study still running changes nothing later. The scheduler
tells the optimizer these observations first, then the study's own trials
(``SchedulerStore.warm_start``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from itertools import islice

from fastapi.exceptions import RequestValidationError
from sqlalchemy.orm import Session

from foldwise.limits import MAX_WARM_START_OBSERVATIONS
from foldwise.schemas import WarmStartSummary
from foldwise.service.db import studies as study_repo
from foldwise.service.db import warm_start as warm_repo
from foldwise.service.db.models import StudyRow
from foldwise.service.db.warm_start import Finished, Outcome
from foldwise.space import project
from foldwise.spec import StudySpec


@dataclass(frozen=True)
class WarmStartPlan:
    """What a spec's warm start brings in: the outcomes to copy and the summary to show."""

    kept: list[Outcome]
    summary: WarmStartSummary


def plan_warm_start(
    session: Session, spec: StudySpec, *, limit: int | None = None
) -> WarmStartPlan | None:
    """The finished trials of the studies ``spec.warm_start`` names that fit ``spec``'s space,
    at most ``limit`` (default ``MAX_WARM_START_OBSERVATIONS``) as ``select_fitting`` picks
    them (None without a warm start); a 422 naming the study when one cannot warm-start it.
    Only reads, so a caller that creates the study afterwards holds no write lock meanwhile."""
    if spec.warm_start is None:
        return None
    sources = spec.warm_start.studies
    for index, source_id in enumerate(sources):
        source = study_repo.get_study(session, source_id)
        if source is None or source.delete_requested:
            raise _invalid(index, f"study {source_id} does not exist", source_id)
        problem = _objective_problem(source, spec)
        if problem is not None:
            raise _invalid(index, f"study {source_id} {problem}", source_id)
    limit = MAX_WARM_START_OBSERVATIONS if limit is None else limit
    kept = select_fitting(session, spec, limit)
    finished = warm_repo.count_finished(session, sources)  # after: never fewer than kept
    summary = WarmStartSummary(
        studies=sources, observations=len(kept), skipped=max(0, finished - len(kept))
    )
    return WarmStartPlan(kept, summary)


def seed_study(session: Session, study: StudyRow, plan: WarmStartPlan | None) -> None:
    """Copy what ``plan`` keeps into the new ``study``, in the caller's transaction."""
    if plan is None:
        return
    warm_repo.add_observations(session, study.id, plan.kept)
    study.warm_start = plan.summary.model_dump(mode="json")


def select_fitting(session: Session, spec: StudySpec, limit: int) -> list[Outcome]:
    """The named studies' finished trials that fit ``spec``'s space, projected onto it, in the
    order the studies are named and each study's in the order its trials finished. Past
    ``limit``: the ``limit // 2`` best by value (completed or pruned), then the most recently
    finished of the rest (as the GP keeps its points), so the region a warm start points to
    is never cut off.

    Each side is read best or latest first and only until enough trials fit: with trials that
    fit, about ``1.5 * limit`` rows whatever the studies' size, and never more than that many
    held at once (the trials that do not fit are read and dropped a page at a time)."""
    assert spec.warm_start is not None
    sources = spec.warm_start.studies
    latest = warm_repo.latest_first(session, sources, page=limit + 1)
    kept = list(islice(_fitting(spec, latest), limit + 1))
    if len(kept) > limit:
        maximize = spec.objective.maximize
        ranked = warm_repo.best_first(session, sources, maximize=maximize, page=max(1, limit // 2))
        best = list(islice(_fitting(spec, ranked), limit // 2))
        chosen = {f.key for f in best}
        kept = best + [f for f in kept if f.key not in chosen][: limit - len(best)]
    position = {source_id: index for index, source_id in enumerate(sources)}
    kept.sort(key=lambda f: (position[f.outcome.study_id], f.finished_at, f.outcome.number))
    return [f.outcome for f in kept]


def _fitting(spec: StudySpec, trials: Iterable[Finished]) -> Iterator[Finished]:
    """The ``trials`` that fit the space, their params projected onto it."""
    for trial in trials:
        params = project(spec.space, trial.outcome.params)
        if params is not None:
            yield replace(trial, outcome=replace(trial.outcome, params=params))


def _objective_problem(source: StudyRow, spec: StudySpec) -> str | None:
    """Why ``source``'s values cannot stand for this study's, or None."""
    have, wanted = source.spec.objective, spec.objective
    if have.metric == wanted.metric and have.direction is wanted.direction:
        return None
    several = source.spec.objectives
    first = f" first of its {len(several)} objectives" if several else ""
    return (
        f"optimises {have.metric} ({have.direction.value}){first}, this study {wanted.metric} "
        f"({wanted.direction.value}): their values do not compare"
    )


def _invalid(index: int, message: str, value: int) -> RequestValidationError:
    loc = ("body", "warm_start", "studies", index)
    return RequestValidationError(
        [{"type": "value_error", "loc": loc, "msg": message, "input": value}]
    )
