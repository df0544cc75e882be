"""Routes of a study's trials: a paged, sorted list and one trial with its folds and epochs."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response
from sqlalchemy.orm import Session

from foldwise import schemas
from foldwise.schemas import TrialStatus
from foldwise.service.api.convert import trial_out, trial_summary
from foldwise.service.api.deps import (
    check_trial_sort,
    study_or_404,
    trial_or_404,
    trial_sort_options,
)
from foldwise.service.api.read_cache import ReadsDep, conditional
from foldwise.service.db import trials as trial_repo
from foldwise.service.hardening.errors import documented
from foldwise.service.hardening.input_rules import (
    Limit,
    Offset,
    StudyId,
    TrialNumber,
    TrialSortQuery,
)

router = APIRouter(prefix="/studies/{study_id}/trials", tags=["trials"], responses=documented(404))


@router.get("", **conditional(schemas.Page[schemas.TrialSummary]))
async def list_trials(
    study_id: StudyId,
    reads: ReadsDep,
    status_: Annotated[TrialStatus | None, Query(alias="status")] = None,
    sort: TrialSortQuery = "number",
    limit: Limit = 100,
    offset: Offset = 0,
) -> Response:
    def work(session: Session) -> schemas.Page[schemas.TrialSummary]:
        study = study_or_404(session, study_id)
        space = study.spec.space
        check_trial_sort(sort, space)
        rows, count = trial_repo.list_trials(
            session,
            study.id,
            status=status_,
            sort=sort,
            **trial_sort_options(study),
            limit=limit,
            offset=offset,
        )
        data = [trial_summary(r) for r in rows]
        return schemas.Page[schemas.TrialSummary](data=data, count=count)

    return await reads.study(study_id, work)


@router.get("/{number}", **conditional(schemas.Trial))
async def get_trial(study_id: StudyId, number: TrialNumber, reads: ReadsDep) -> Response:
    return await reads.study(
        study_id, lambda session: trial_out(trial_or_404(session, study_id, number)), folds=True
    )
