"""Routes of a study's trials: a paged, sorted list and one trial with its folds and epochs."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, status

from foldwise import schemas
from foldwise.schemas import TrialStatus
from service.api.convert import trial_out, trial_summary
from service.api.deps import SessionDep, StudyDep
from service.db import trials as trial_repo
from service.db.trials import TrialSort

router = APIRouter(prefix="/studies/{study_id}/trials", tags=["trials"])


@router.get("", response_model=schemas.Page[schemas.TrialSummary])
def list_trials(
    study: StudyDep,
    session: SessionDep,
    status_: Annotated[TrialStatus | None, Query(alias="status")] = None,
    sort: TrialSort = "number",
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> schemas.Page[schemas.TrialSummary]:
    maximize = study.spec["objective"]["direction"] == "maximize"
    rows, count = trial_repo.list_trials(
        session,
        study.id,
        status=status_,
        sort=sort,
        maximize=maximize,
        limit=limit,
        offset=offset,
    )
    return schemas.Page[schemas.TrialSummary](data=[trial_summary(r) for r in rows], count=count)


@router.get("/{number}", response_model=schemas.Trial)
def get_trial(study: StudyDep, number: int, session: SessionDep) -> schemas.Trial:
    trial = trial_repo.get_trial(session, study.id, number)
    if trial is None:
        raise HTTPException(
            status.HTTP_404_NOT_FOUND, f"trial {number} of study {study.id} not found"
        )
    return trial_out(trial)
