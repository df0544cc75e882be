"""Dependencies of the routes, as ``Annotated`` aliases, and the lookups routes share.

Routes are ``async def`` and do their database work through ``DbDep`` (a ``SessionRunner``): one
short session per unit of work on a bounded worker thread, never a session held across an
``await``. Ids and offsets are bounded to what a 64-bit SQL integer holds, so an out-of-range
number is a 422 naming it rather than a driver overflow.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import Depends, HTTPException, Request, status
from fastapi.exceptions import RequestValidationError
from sqlalchemy.orm import Session

from foldwise.service.config import Settings
from foldwise.service.db import studies as study_repo
from foldwise.service.db import trials as trial_repo
from foldwise.service.db.engine import SessionRunner
from foldwise.service.db.models import StudyRow, TrialRow
from foldwise.service.db.trials import PARAM_PREFIX, SORT_KEYS

if TYPE_CHECKING:
    from foldwise.service.scheduler.scheduler import Scheduler


async def get_db(request: Request) -> SessionRunner:
    return request.app.state.db


async def get_settings(request: Request) -> Settings:
    return request.app.state.settings


async def get_scheduler(request: Request) -> Scheduler | None:
    return request.app.state.scheduler


DbDep = Annotated[SessionRunner, Depends(get_db)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
SchedulerDep = Annotated["Scheduler | None", Depends(get_scheduler)]


def study_or_404(session: Session, study_id: int) -> StudyRow:
    """The study; a 404 too when its deletion was asked for (the scheduler carries it out)."""
    study = study_repo.get_study(session, study_id)
    if study is None or study.delete_requested:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"study {study_id} not found")
    return study


def trial_or_404(
    session: Session, study_id: int, number: int, *, with_folds: bool = True
) -> TrialRow:
    """The trial, by default with its fold runs and their epochs loaded."""
    trial = trial_repo.get_trial(session, study_id, number, with_folds=with_folds)
    if trial is None:
        raise HTTPException(
            status.HTTP_404_NOT_FOUND, f"trial {number} of study {study_id} not found"
        )
    return trial


def check_trial_sort(sort: str, space: Mapping[str, Any]) -> None:
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


def trial_sort_options(study: StudyRow) -> dict[str, Any]:
    """How ``study``'s trials sort: ``maximize`` (for ``best``) and the ``numeric`` parameters
    (a categorical one sorts as text)."""
    space = study.spec.space
    return {
        "maximize": study.spec.objective.maximize,
        "numeric": frozenset(name for name, p in space.items() if p.type != "categorical"),
    }
