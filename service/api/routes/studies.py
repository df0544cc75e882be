"""Routes of the ``/studies`` resource: create, list, read, stop and delete studies."""

from __future__ import annotations

from typing import Annotated

import anyio
from fastapi import APIRouter, Body, HTTPException, Query, Response, status
from sqlalchemy.orm import Session

from foldwise import schemas
from foldwise.schemas import StudyStatus
from foldwise.spec import EXAMPLE_SPEC, StudySpec
from service.api.conditional import ReadsDep, conditional
from service.api.convert import studies_out
from service.api.deps import (
    DbDep,
    Limit,
    Offset,
    SchedulerDep,
    SettingsDep,
    StudyId,
    study_or_404,
)
from service.api.errors import documented
from service.artifact_store import delete_study_artifacts
from service.db import studies as study_repo
from service.spec_checks import check_runnable

router = APIRouter(prefix="/studies", tags=["studies"])

SPEC_EXAMPLES = {
    "quick": {"summary": "Two trials of a digits MLP, in seconds", "value": EXAMPLE_SPEC}
}


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=schemas.Study,
    responses=documented(400, 413),
)
async def create_study(
    spec: Annotated[StudySpec, Body(openapi_examples=SPEC_EXAMPLES)],
    db: DbDep,
    scheduler: SchedulerDep,
    settings: SettingsDep,
) -> schemas.Study:
    def check() -> None:
        nodes = scheduler.cluster_nodes() if scheduler and settings.check_cluster_fit else []
        check_runnable(spec, nodes)

    await anyio.to_thread.run_sync(check)

    def work(session: Session) -> schemas.Study:
        study = study_repo.create_study(session, spec)
        return studies_out(session, [study])[0]

    study = await db.write(work)
    if scheduler is not None:
        scheduler.wake()
    return study


@router.get("", **conditional(schemas.Page[schemas.Study]))
async def list_studies(
    reads: ReadsDep,
    status_: Annotated[StudyStatus | None, Query(alias="status")] = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> Response:
    def work(session: Session) -> schemas.Page[schemas.Study]:
        rows, count = study_repo.list_studies(session, status=status_, limit=limit, offset=offset)
        return schemas.Page[schemas.Study](data=studies_out(session, rows), count=count)

    return await reads.catalog(work)


@router.get("/{study_id}", **conditional(schemas.Study, errors=(404,)))
async def get_study(study_id: StudyId, reads: ReadsDep) -> Response:
    return await reads.study(study_id, lambda session: _study_out(session, study_id))


def _study_out(session: Session, study_id: int) -> schemas.Study:
    return studies_out(session, [study_or_404(session, study_id)])[0]


@router.post("/{study_id}/stop", response_model=schemas.Study, responses=documented(404))
async def stop_study(study_id: StudyId, db: DbDep, scheduler: SchedulerDep) -> schemas.Study:
    """Stop launching trials and cancel the running ones; a finished study is left as it is."""
    await _stop(study_id, db, scheduler)
    return await db.read(lambda session: _study_out(session, study_id))


@router.delete(
    "/{study_id}", status_code=status.HTTP_204_NO_CONTENT, responses=documented(404, 409)
)
async def delete_study(
    study_id: StudyId, db: DbDep, scheduler: SchedulerDep, settings: SettingsDep
) -> Response:
    """Delete the study, its trials, fold runs, metrics and artifacts; a running one is stopped
    first. Ids are never reused."""
    await _stop(study_id, db, scheduler)

    def delete(session: Session) -> None:
        study = study_or_404(session, study_id)
        if study.status is StudyStatus.RUNNING:
            raise HTTPException(status.HTTP_409_CONFLICT, f"study {study_id} is still running")
        study_repo.delete_study(session, study)

    await db.write(delete)
    await delete_study_artifacts(settings.artifact_dir, study_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


async def _stop(study_id: int, db: DbDep, scheduler: SchedulerDep) -> None:
    """Record the stop request; wait for the scheduler's runner to act on it, or mark the
    study stopped when no runner has it (queued, or the scheduler off)."""

    def request_stop(session: Session) -> bool:
        study = study_or_404(session, study_id)
        if study.status.finished:
            return False
        study.stop_requested = True
        study_repo.touch_study(session, study_id)
        return True

    if not await db.write(request_stop):
        return
    if scheduler is not None and scheduler.is_running(study_id):
        await scheduler.stop_study(study_id)
    else:
        await db.write(lambda session: _mark_stopped(session, study_id))


def _mark_stopped(session: Session, study_id: int) -> None:
    study = study_or_404(session, study_id)
    if not study.status.finished:
        study_repo.mark_study(session, study, StudyStatus.STOPPED)
        study_repo.touch_study(session, study_id)
