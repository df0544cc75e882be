"""Routes of the ``/studies`` resource: create, list, read, stop and delete studies."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Response, status

from foldwise import schemas
from foldwise.schemas import StudyStatus
from foldwise.spec import StudySpec
from service.api.convert import studies_out
from service.api.deps import SchedulerDep, SessionDep, StudyDep
from service.db import studies as study_repo
from service.spec_checks import check_runnable

router = APIRouter(prefix="/studies", tags=["studies"])


@router.post("", status_code=status.HTTP_201_CREATED, response_model=schemas.Study)
def create_study(spec: StudySpec, session: SessionDep, scheduler: SchedulerDep) -> schemas.Study:
    check_runnable(spec)
    study = study_repo.create_study(session, spec)
    session.commit()
    if scheduler is not None:
        scheduler.wake()
    return studies_out(session, [study])[0]


@router.get("", response_model=schemas.Page[schemas.Study])
def list_studies(
    session: SessionDep,
    status_: Annotated[StudyStatus | None, Query(alias="status")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> schemas.Page[schemas.Study]:
    rows, count = study_repo.list_studies(session, status=status_, limit=limit, offset=offset)
    return schemas.Page[schemas.Study](data=studies_out(session, rows), count=count)


@router.get("/{study_id}", response_model=schemas.Study)
def get_study(study: StudyDep, session: SessionDep) -> schemas.Study:
    return studies_out(session, [study])[0]


@router.post("/{study_id}/stop", response_model=schemas.Study)
async def stop_study(
    study: StudyDep, session: SessionDep, scheduler: SchedulerDep
) -> schemas.Study:
    """Stop launching trials and cancel the running ones; a finished study is left as it is."""
    if not study.status.finished:
        study.stop_requested = True
        session.commit()
        if scheduler is not None and scheduler.is_running(study.id):
            await scheduler.stop_study(study.id)
        else:
            study_repo.mark_study(session, study, StudyStatus.STOPPED)
            session.commit()
    session.refresh(study)
    return studies_out(session, [study])[0]


@router.delete("/{study_id}", status_code=status.HTTP_204_NO_CONTENT)
async def delete_study(study: StudyDep, session: SessionDep, scheduler: SchedulerDep) -> Response:
    if scheduler is not None and scheduler.is_running(study.id):
        study.stop_requested = True
        session.commit()
        await scheduler.stop_study(study.id)
        session.refresh(study)
    if study.status in (StudyStatus.RUNNING,):
        raise HTTPException(status.HTTP_409_CONFLICT, f"study {study.id} is still running")
    study_repo.delete_study(session, study)
    session.commit()
    return Response(status_code=status.HTTP_204_NO_CONTENT)
