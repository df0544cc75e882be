"""Dependencies of the routes, as ``Annotated`` aliases."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated

from fastapi import Depends, HTTPException, Request, status
from sqlalchemy.orm import Session

from service.config import Settings
from service.db import studies as study_repo
from service.db.models import StudyRow

if TYPE_CHECKING:
    from service.scheduler.scheduler import Scheduler


def get_session(request: Request) -> Iterator[Session]:
    """One session per request; routes that write commit explicitly."""
    with request.app.state.sessions() as session:
        yield session


def get_settings(request: Request) -> Settings:
    return request.app.state.settings


def get_scheduler(request: Request) -> Scheduler | None:
    return request.app.state.scheduler


SessionDep = Annotated[Session, Depends(get_session)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
SchedulerDep = Annotated["Scheduler | None", Depends(get_scheduler)]


def get_study_or_404(study_id: int, session: SessionDep) -> StudyRow:
    study = study_repo.get_study(session, study_id)
    if study is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"study {study_id} not found")
    return study


StudyDep = Annotated[StudyRow, Depends(get_study_or_404)]
