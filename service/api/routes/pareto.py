"""A study's Pareto front: its feasible, non-dominated trials with their standard errors."""

from __future__ import annotations

from fastapi import APIRouter, Response
from sqlalchemy.orm import Session

from foldwise import schemas
from foldwise.service.api.convert import trial_summary
from foldwise.service.api.deps import study_or_404
from foldwise.service.api.read_cache import ReadsDep, conditional
from foldwise.service.db.pareto import pareto_front
from foldwise.service.hardening.errors import documented
from foldwise.service.hardening.input_rules import StudyId

router = APIRouter(prefix="/studies/{study_id}", tags=["studies"], responses=documented(404))


@router.get("/pareto", **conditional(schemas.ParetoFront))
async def get_pareto_front(study_id: StudyId, reads: ReadsDep) -> Response:
    """Completed trials that respect every constraint and that no other such trial beats on
    every objective, in trial order; with one objective, the best trial."""

    def work(session: Session) -> schemas.ParetoFront:
        study = study_or_404(session, study_id)
        spec = study.spec
        data = [trial_summary(row) for row in pareto_front(session, study)]
        return schemas.ParetoFront(
            objectives=[
                schemas.ObjectiveName(metric=o.metric, direction=o.direction)
                for o in spec.all_objectives
            ],
            data=data,
            count=len(data),
        )

    return await reads.study(study_id, work)
