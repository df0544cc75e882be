"""Warm starts: finished trials of earlier studies as a new study's prior observations.

At submit, ``plan_warm_start`` checks the studies the spec names (each must exist, which every
token may read, and optimise the same metric in the same direction: else a 422 naming
``warm_start.studies`` and the study) and projects each finished trial onto the new space
(``foldwise.space.project``: a trial outside it is skipped); ``seed_study`` copies what fits
into the new study, in the transaction that creates it. A copy, not a reference: a restarted
service rebuilds the same optimizer from it even after a named study was deleted, and a named
study still running changes nothing later. The scheduler tells the optimizer these
observations first, then the study's own trials (``SchedulerStore.warm_start``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from fastapi.exceptions import RequestValidationError
from sqlalchemy.orm import Session

from foldwise.limits import MAX_WARM_START_OBSERVATIONS
from foldwise.schemas import TrialStatus, WarmStartSummary
from foldwise.space import project
from foldwise.spec import StudySpec
from service.db import studies as study_repo
from service.db import warm_start as warm_repo
from service.db.models import StudyRow
from service.db.warm_start import Outcome


@dataclass(frozen=True)
class WarmStartPlan:
    """What a spec's warm start brings in: the outcomes to copy and the summary to show."""

    kept: list[Outcome]
    summary: WarmStartSummary


def plan_warm_start(session: Session, spec: StudySpec) -> WarmStartPlan | None:
    """The finished trials of the studies ``spec.warm_start`` names that fit ``spec``'s space
    (None without a warm start); a 422 naming the study when one cannot warm-start it. Only
    reads, so a caller that creates the study afterwards holds no write lock meanwhile."""
    if spec.warm_start is None:
        return None
    finished: list[Outcome] = []
    for index, source_id in enumerate(spec.warm_start.studies):
        source = study_repo.get_study(session, source_id)
        if source is None or source.delete_requested:
            raise _invalid(index, f"study {source_id} does not exist", source_id)
        problem = _objective_problem(source, spec)
        if problem is not None:
            raise _invalid(index, f"study {source_id} {problem}", source_id)
        finished += warm_repo.finished_outcomes(session, source_id)
    fitting = []
    for outcome in finished:
        params = project(spec.space, outcome.params)
        if params is not None:
            fitting.append(replace(outcome, params=params))
    maximize = spec.objective.direction.value == "maximize"
    kept = within_limit(fitting, MAX_WARM_START_OBSERVATIONS, maximize=maximize)
    summary = WarmStartSummary(
        studies=spec.warm_start.studies, observations=len(kept), skipped=len(finished) - len(kept)
    )
    return WarmStartPlan(kept, summary)


def seed_study(session: Session, study: StudyRow, plan: WarmStartPlan | None) -> None:
    """Copy what ``plan`` keeps into the new ``study``, in the caller's transaction."""
    if plan is None:
        return
    warm_repo.add_observations(session, study.id, plan.kept)
    study.warm_start = plan.summary.model_dump(mode="json")


def within_limit(outcomes: Sequence[Outcome], limit: int, *, maximize: bool) -> list[Outcome]:
    """At most ``limit`` outcomes, in their order: the best half by value and the latest rest
    (as the GP keeps its points), so the region a warm start points to is never cut off."""
    if len(outcomes) <= limit:
        return list(outcomes)
    sign = -1.0 if maximize else 1.0
    valued = [i for i, o in enumerate(outcomes) if _usable(o)]
    best = set(sorted(valued, key=lambda i: sign * outcomes[i].value)[: limit // 2])
    rest = [i for i in range(len(outcomes)) if i not in best][len(best) - limit :]
    return [outcomes[i] for i in sorted(best.union(rest))]


def _usable(outcome: Outcome) -> bool:
    return outcome.status is not TrialStatus.FAILED and outcome.value is not None


def _objective_problem(source: StudyRow, spec: StudySpec) -> str | None:
    """Why ``source``'s values cannot stand for this study's, or None."""
    objective = source.spec.get("objective", {})
    metric, direction = objective.get("metric"), objective.get("direction")
    wanted = spec.objective
    if metric == wanted.metric and direction == wanted.direction.value:
        return None
    return (
        f"optimises {metric} ({direction}), this study {wanted.metric} "
        f"({wanted.direction.value}): their values do not compare"
    )


def _invalid(index: int, message: str, value: int) -> RequestValidationError:
    loc = ("body", "warm_start", "studies", index)
    return RequestValidationError(
        [{"type": "value_error", "loc": loc, "msg": message, "input": value}]
    )
