"""Routes of the ``/studies`` resource: create, list, read, stop and delete studies."""

from __future__ import annotations

from typing import Annotated

import anyio
from fastapi import APIRouter, Body, HTTPException, Query, Response, status
from sqlalchemy.orm import Session

from foldwise import schemas
from foldwise.schemas import StudyStatus
from foldwise.service.admission.spec_checks import Runnable, check_runnable
from foldwise.service.api.auth import MemberDep, forbid_unless_may_change
from foldwise.service.api.convert import studies_out
from foldwise.service.api.deps import DbDep, SchedulerDep, SettingsDep, study_or_404
from foldwise.service.api.read_cache import ReadsDep, conditional
from foldwise.service.artifact_store import artifact_store
from foldwise.service.db import studies as study_repo
from foldwise.service.hardening.errors import documented
from foldwise.service.hardening.input_rules import Limit, Offset, StudyId
from foldwise.service.hardening.strict_json import StrictJSONRoute
from foldwise.service.task_code import CodeCache, keep_snapshot
from foldwise.service.warm_start import plan_warm_start, seed_study
from foldwise.spec import EXAMPLE_SPEC, StudySpec

router = APIRouter(prefix="/studies", tags=["studies"], route_class=StrictJSONRoute)

SPEC_EXAMPLES = {
    "quick": {"summary": "Two trials of a digits MLP, in seconds", "value": EXAMPLE_SPEC}
}


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=schemas.Study,
    responses=documented(400, 413, 415, 503),
)
async def create_study(
    spec: Annotated[StudySpec, Body(openapi_examples=SPEC_EXAMPLES)],
    principal: MemberDep,
    db: DbDep,
    scheduler: SchedulerDep,
    settings: SettingsDep,
) -> schemas.Study:
    """Create a study owned by the token's name; its scheduler starts it within a poll. A
    ``warm_start`` copies the named studies' finished trials that fit the space into it. A
    user task's package is copied now, and the study runs that copy (``code_hash``)."""

    def check() -> Runnable:
        nodes = scheduler.cluster_nodes() if scheduler and settings.check_cluster_fit else []
        describe = scheduler.describe_task if scheduler is not None else None
        runnable = check_runnable(
            spec,
            task_modules=settings.task_modules,
            describe=describe,
            nodes=nodes,
            code_cache=CodeCache(settings.code_cache_dir),
        )
        if runnable.snapshot is None:
            return runnable
        try:  # where every instance's scheduler finds it
            keep_snapshot(artifact_store(settings.artifact_dir), runnable.snapshot)
        except Exception as exc:
            raise HTTPException(
                status.HTTP_503_SERVICE_UNAVAILABLE,
                f"the task's code could not be kept in the artifact store: {exc}",
            ) from exc
        return runnable

    runnable = await anyio.to_thread.run_sync(check)
    code_hash = None if runnable.snapshot is None else runnable.snapshot.hash

    def work(session: Session) -> schemas.Study:
        warm_start = plan_warm_start(session, spec)  # reads first: the write lock comes after
        study = study_repo.create_study(
            session,
            spec,
            owner=principal.name,
            code_hash=code_hash,
            task_profile=runnable.profile.to_json(),
        )
        seed_study(session, study, warm_start)
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


@router.post(
    "/{study_id}/stop",
    response_model=schemas.Study,
    status_code=status.HTTP_202_ACCEPTED,
    responses={
        status.HTTP_200_OK: {"model": schemas.Study, "description": "It had already ended"},
        **documented(404),
    },
)
async def stop_study(
    study_id: StudyId,
    principal: MemberDep,
    db: DbDep,
    scheduler: SchedulerDep,
    response: Response,
) -> schemas.Study:
    """Ask the scheduler to stop the study: no new trials, the running ones cancelled. Answers at
    once (202) with ``stop_requested``; a study that has already ended is left as it is (200).
    Members may stop their own studies, admins any."""

    def request_stop(session: Session) -> schemas.Study:
        study = study_or_404(session, study_id)
        forbid_unless_may_change(principal, study_id, study.owner)
        if not study.status.finished and not study.stop_requested:
            study.stop_requested = True
            study_repo.touch_study(session, study_id)
        return studies_out(session, [study])[0]

    study = await db.write(request_stop)
    if study.status.finished:
        response.status_code = status.HTTP_200_OK
    elif scheduler is not None:
        scheduler.wake()
    return study


@router.delete(
    "/{study_id}",
    status_code=status.HTTP_202_ACCEPTED,
    response_class=Response,
    responses=documented(404),
)
async def delete_study(
    study_id: StudyId, principal: MemberDep, db: DbDep, scheduler: SchedulerDep
) -> Response:
    """Ask the scheduler to delete the study with its trials, folds, metrics and artifacts; a
    running one is stopped first. The study is gone to every reader at once (202); ids are
    never reused. Members may delete their own studies, admins any."""

    def request_deletion(session: Session) -> None:
        study = study_or_404(session, study_id)
        forbid_unless_may_change(principal, study_id, study.owner)
        study.delete_requested = True
        study.stop_requested = True
        study_repo.touch_study(session, study_id)

    await db.write(request_deletion)
    if scheduler is not None:
        scheduler.wake()
    return Response(status_code=status.HTTP_202_ACCEPTED)
