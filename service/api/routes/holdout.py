"""Routes of what comes after a study's trials: its score on the task's test data
(``/studies/{id}/holdout``) and refits of a trial on all the training data
(``/studies/{id}/refits``).

The routes record what is asked for; the scheduler runs it (``service.scheduler.holdout_runner``)
and writes what it finds. Both need an ended study, a task that gives test data (for a score)
and rebuilds its saved models, and the service's artifact store.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, HTTPException, Path, Response, status
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse
from sqlalchemy.orm import Session

from foldwise import schemas
from foldwise.spec import STORED, HoldoutRequest, RefitRequest, StudySpec
from service.api.auth import MemberDep, forbid_unless_may_change
from service.api.convert import refit_out, studies_out
from service.api.deps import (
    MAX_NUMBER,
    DbDep,
    SchedulerDep,
    SettingsDep,
    StudyId,
    decimal_int,
    study_or_404,
)
from service.api.errors import documented
from service.api.routes.artifacts import MODEL_FILE, send_model
from service.api.strict_json import StrictJSONRoute
from service.artifact_store import refit_model_key
from service.db import refits as refit_repo
from service.db import studies as study_repo
from service.db.models import RefitRow, StudyRow
from trainers.task import TaskProfile

router = APIRouter(
    prefix="/studies/{study_id}",
    tags=["holdout"],
    route_class=StrictJSONRoute,
    responses=documented(404),
)

RefitNumber = Annotated[
    decimal_int(1, MAX_NUMBER), Path(description="The refit's number in its study")
]


@router.post(
    "/holdout",
    response_model=schemas.Study,
    status_code=status.HTTP_202_ACCEPTED,
    responses=documented(409),
)
async def request_holdout(
    study_id: StudyId,
    principal: MemberDep,
    db: DbDep,
    scheduler: SchedulerDep,
    request: Annotated[HoldoutRequest, Body()] = HoldoutRequest(),  # noqa: B008
) -> schemas.Study:
    """Score an ended study's best (or a named, completed) trial on the task's test data: the
    mean of its fold models' predictions (``ensemble``) and/or a model refit on all the
    training data (``refit``, queued first). Answers at once (202) with the study, whose
    ``holdout`` says how far the score is; it replaces an earlier score. A spec with
    ``holdout`` is scored as it completes, with no request."""

    def ask(session: Session) -> schemas.Study:
        study, spec = _ended_study(session, study_id, principal)
        if study.holdout_status in refit_repo.OPEN:
            raise HTTPException(
                status.HTTP_409_CONFLICT, f"study {study_id} is being scored already"
            )
        score = request.score or (spec.holdout.score if spec.holdout else "ensemble")
        epochs = request.epochs or (spec.holdout.epochs if spec.holdout else None)
        _check_task(study, score)
        try:
            refit_repo.queue_holdout(
                session, study, spec, score=score, trial_number=request.trial, epochs=epochs
            )
        except refit_repo.HoldoutRefused as exc:
            raise _invalid(("trial",), str(exc), request.trial) from exc
        study_repo.touch_study(session, study_id)
        return studies_out(session, [study])[0]

    study = await db.write(ask)
    if scheduler is not None:
        scheduler.wake()
    return study


@router.post(
    "/refits",
    response_model=schemas.Refit,
    status_code=status.HTTP_202_ACCEPTED,
    responses=documented(409),
)
async def request_refit(
    study_id: StudyId,
    principal: MemberDep,
    db: DbDep,
    scheduler: SchedulerDep,
    request: Annotated[RefitRequest, Body()] = RefitRequest(),  # noqa: B008
) -> schemas.Refit:
    """Train an ended study's best (or a named, completed) trial's params on all the training
    data, through the same fold path as its folds (DDP, checkpoints, the study's code), for
    ``epochs`` (default: the median of its folds' best epochs). Answers at once (202); its
    model downloads from ``.../refits/{number}/model`` once it has completed, and it is scored
    on the task's test data when the task has some."""

    def ask(session: Session) -> schemas.Refit:
        study, spec = _ended_study(session, study_id, principal)
        try:
            trial = refit_repo.scored_trial(session, study, request.trial)
            refit = refit_repo.queue_refit(session, study, spec, trial, epochs=request.epochs)
        except refit_repo.HoldoutRefused as exc:
            raise _invalid(("trial",), str(exc), request.trial) from exc
        study_repo.touch_study(session, study_id)
        return refit_out(refit)

    refit = await db.write(ask)
    if scheduler is not None:
        scheduler.wake()
    return refit


@router.get("/refits", response_model=schemas.Page[schemas.Refit])
async def list_refits(study_id: StudyId, db: DbDep) -> schemas.Page[schemas.Refit]:
    """The study's refits, oldest first."""

    def work(session: Session) -> schemas.Page[schemas.Refit]:
        study_or_404(session, study_id)
        rows = refit_repo.list_refits(session, study_id)
        return schemas.Page[schemas.Refit](data=[refit_out(r) for r in rows], count=len(rows))

    return await db.read(work)


@router.get("/refits/{number}", response_model=schemas.Refit)
async def get_refit(study_id: StudyId, number: RefitNumber, db: DbDep) -> schemas.Refit:
    def work(session: Session) -> schemas.Refit:
        study_or_404(session, study_id)
        return refit_out(_refit_or_404(session, study_id, number))

    return await db.read(work)


@router.get("/refits/{number}/model", response_class=FileResponse, responses=MODEL_FILE)
async def get_refit_model(
    study_id: StudyId, number: RefitNumber, db: DbDep, settings: SettingsDep
) -> Response:
    """The refit's model (torch.save of task, params, epoch, metrics, state_dict, ...)."""

    def work(session: Session) -> int:
        study_or_404(session, study_id)
        return _refit_or_404(session, study_id, number).trial_number

    trial = await db.read(work)
    return await send_model(
        settings.artifact_dir,
        refit_model_key(study_id, trial, number),
        f"study{study_id}-trial{trial}-refit{number}-model.pt",
        f"refit {number} of study {study_id} has no saved model (yet)",
    )


def _ended_study(
    session: Session, study_id: int, principal: MemberDep
) -> tuple[StudyRow, StudySpec]:
    study = study_or_404(session, study_id)
    forbid_unless_may_change(principal, study_id, study.owner)
    if not study.status.finished:
        raise HTTPException(
            status.HTTP_409_CONFLICT,
            f"study {study_id} is {study.status}: ask once it has ended (a spec's holdout is "
            "scored as the study completes)",
        )
    return study, StudySpec.model_validate(study.spec, context={STORED: True})


def _check_task(study: StudyRow, score: str) -> None:
    """The task can be scored: it gives test data and rebuilds its saved models."""
    if study.task_profile is None:
        return  # a study stored before profiles were: the score says what is missing
    profile = TaskProfile.from_json(study.task_profile)
    task = study.spec["trainer"]["task"]
    if not profile.test_data:
        message = f"task {task!r} gives no test data: add load_test_data(options)"
        raise _invalid(("score",), message, score)
    if not profile.rebuilds_models:
        message = (
            f"task {task!r} trains with its own train_fold and gives no build_model(params) "
            "to rebuild its saved models, which a score predicts with"
        )
        raise _invalid(("score",), message, score)


def _refit_or_404(session: Session, study_id: int, number: int) -> RefitRow:
    refit = refit_repo.get_refit(session, study_id, number)
    if refit is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"study {study_id} has no refit {number}")
    return refit


def _invalid(loc: tuple[str, ...], message: str, value: object) -> RequestValidationError:
    return RequestValidationError(
        [{"type": "value_error", "loc": ("body", *loc), "msg": message, "input": value}]
    )
