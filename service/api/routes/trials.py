"""Routes of a study's trials: a paged, sorted list and one trial with its folds and epochs."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response
from fastapi.exceptions import RequestValidationError
from sqlalchemy.orm import Session

from foldwise import schemas
from foldwise.schemas import TrialStatus
from service.api.conditional import ReadsDep, conditional
from service.api.convert import trial_out, trial_summary
from service.api.deps import Limit, Offset, StudyId, TrialNumber, study_or_404, trial_or_404
from service.api.errors import documented
from service.db import trials as trial_repo
from service.db.trials import PARAM_PREFIX, SORT_KEYS

router = APIRouter(prefix="/studies/{study_id}/trials", tags=["trials"], responses=documented(404))

SortQuery = Annotated[
    str,
    Query(
        max_length=200,
        pattern=r"^(best|-?(number|value|duration|params\.[A-Za-z_][A-Za-z0-9_]*))$",
        description="number, value, duration or params.<name>; a leading - sorts descending; "
        "best is the best value first",
    ),
]


@router.get("", **conditional(schemas.Page[schemas.TrialSummary]))
async def list_trials(
    study_id: StudyId,
    reads: ReadsDep,
    status_: Annotated[TrialStatus | None, Query(alias="status")] = None,
    sort: SortQuery = "number",
    limit: Limit = 100,
    offset: Offset = 0,
) -> Response:
    def work(session: Session) -> schemas.Page[schemas.TrialSummary]:
        study = study_or_404(session, study_id)
        space = study.spec["space"]
        _check_sort(sort, space)
        rows, count = trial_repo.list_trials(
            session,
            study.id,
            status=status_,
            sort=sort,
            maximize=study.spec["objective"]["direction"] == "maximize",
            numeric=frozenset(n for n, p in space.items() if p["type"] != "categorical"),
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
                "msg": f"unknown sort: use best or one of {choices}, '-' for descending",
                "type": "value_error",
                "input": sort,
            }
        ]
    )
