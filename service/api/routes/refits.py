"""Routes of a study's refits: a trial's params trained on all the training data through the
fold path (``/studies/{id}/refits``), and their models.

The routes record what is asked for; the scheduler runs it (``service.scheduler.holdout_runner``).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, HTTPException, Path, Response, status
from fastapi.responses import FileResponse
from sqlalchemy.orm import Session

from foldwise import schemas
from foldwise.schemas import RefitRequest
from foldwise.service.api.auth import MemberDep
from foldwise.service.api.convert import refit_out
from foldwise.service.api.deps import DbDep, SchedulerDep, SettingsDep, study_or_404
from foldwise.service.api.routes.artifacts import MODEL_FILE, send_model
from foldwise.service.api.routes.holdout import ended_study
from foldwise.service.artifact_store import refit_model_key
from foldwise.service.db import refits as refit_repo
from foldwise.service.db.models import RefitRow
from foldwise.service.hardening.errors import documented, invalid_field
from foldwise.service.hardening.input_rules import MAX_NUMBER, StudyId, decimal_int
from foldwise.service.hardening.strict_json import StrictJSONRoute

router = APIRouter(
    prefix="/studies/{study_id}/refits",
    tags=["refits"],
    route_class=StrictJSONRoute,
    responses=documented(404),
)

RefitNumber = Annotated[
    decimal_int(1, MAX_NUMBER), Path(description="The refit's number in its study")
]


@router.post(
    "",
    response_model=schemas.Refit,
    status_code=status.HTTP_202_ACCEPTED,
    responses=documented(400, 409, 413, 415),
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
        study = ended_study(session, study_id, principal)
        try:
            trial = refit_repo.scored_trial(session, study, request.trial)
            spec = study.spec
            refit = refit_repo.queue_refit(session, study, spec, trial, epochs=request.epochs)
        except refit_repo.NoSuchTrial as exc:
            raise HTTPException(status.HTTP_404_NOT_FOUND, str(exc)) from exc
        except refit_repo.NothingToScore as exc:
            raise HTTPException(status.HTTP_409_CONFLICT, str(exc)) from exc
        except refit_repo.HoldoutRefused as exc:
            raise invalid_field(("trial",), str(exc), request.trial) from exc
        return refit_out(refit)

    refit = await db.write(ask)
    if scheduler is not None:
        scheduler.wake()
    return refit


@router.get("", response_model=schemas.Page[schemas.Refit])
async def list_refits(study_id: StudyId, db: DbDep) -> schemas.Page[schemas.Refit]:
    """The study's refits, oldest first."""

    def work(session: Session) -> schemas.Page[schemas.Refit]:
        study_or_404(session, study_id)
        rows = refit_repo.list_refits(session, study_id)
        return schemas.Page[schemas.Refit](data=[refit_out(r) for r in rows], count=len(rows))

    return await db.read(work)


@router.get("/{number}", response_model=schemas.Refit)
async def get_refit(study_id: StudyId, number: RefitNumber, db: DbDep) -> schemas.Refit:
    def work(session: Session) -> schemas.Refit:
        study_or_404(session, study_id)
        return refit_out(_refit_or_404(session, study_id, number))

    return await db.read(work)


@router.get("/{number}/model", response_class=FileResponse, responses=MODEL_FILE)
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


def _refit_or_404(session: Session, study_id: int, number: int) -> RefitRow:
    refit = refit_repo.get_refit(session, study_id, number)
    if refit is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"study {study_id} has no refit {number}")
    return refit
