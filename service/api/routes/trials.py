"""Routes of a study's trials: a paged, sorted list and one trial with its folds and epochs."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, status
from fastapi.exceptions import RequestValidationError

from foldwise import schemas
from foldwise.schemas import TrialStatus
from service.api.convert import trial_out, trial_summary
from service.api.deps import SessionDep, StudyDep
from service.db import trials as trial_repo
from service.db.trials import PARAM_PREFIX, SORT_KEYS, TrialSort

router = APIRouter(prefix="/studies/{study_id}/trials", tags=["trials"])


@router.get("", response_model=schemas.Page[schemas.TrialSummary])
def list_trials(
    study: StudyDep,
    session: SessionDep,
    status_: Annotated[TrialStatus | None, Query(alias="status")] = None,
    sort: Annotated[
        TrialSort,
        Query(
            description="number, value, duration or params.<name>; a leading - sorts "
            "descending; best is the best value first"
        ),
    ] = "number",
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> schemas.Page[schemas.TrialSummary]:
    maximize = study.spec["objective"]["direction"] == "maximize"
    space = study.spec["space"]
    _check_sort(sort, space)
    rows, count = trial_repo.list_trials(
        session,
        study.id,
        status=status_,
        sort=sort,
        maximize=maximize,
        numeric=frozenset(n for n, p in space.items() if p["type"] != "categorical"),
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


def _check_sort(sort: str, space: dict) -> None:
    """A 422 naming `sort` unless it is a known key or one of the study's parameters."""
    key = sort.removeprefix("-")
    name = key.removeprefix(PARAM_PREFIX)
    if sort == "best" or key in SORT_KEYS or (name != key and name in space):
        return
    choices = ", ".join([*SORT_KEYS, *(PARAM_PREFIX + name for name in space)])
    raise RequestValidationError(
        [
            {
                "loc": ("query", "sort"),
                "msg": f"unknown sort {sort!r}: use best or one of {choices}, '-' for descending",
                "type": "value_error",
                "input": sort,
            }
        ]
    )
