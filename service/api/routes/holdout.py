"""Route of a study's score on the task's test data (``POST /studies/{id}/holdout``).

The route records what is asked for (and the refit it needs); the scheduler runs it
(``service.scheduler.holdout_runner``) and writes what it finds into the study's ``holdout``.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, HTTPException, status
from sqlalchemy.orm import Session

from foldwise import schemas
from foldwise.schemas import HoldoutRequest
from foldwise.service.api.auth import MemberDep, forbid_unless_may_change
from foldwise.service.api.convert import studies_out
from foldwise.service.api.deps import DbDep, SchedulerDep, study_or_404
from foldwise.service.db import holdout as holdout_repo
from foldwise.service.db import refits as refit_repo
from foldwise.service.db import studies as study_repo
from foldwise.service.db.models import StudyRow
from foldwise.service.hardening.errors import documented, invalid_field
from foldwise.service.hardening.input_rules import StudyId
from foldwise.service.hardening.strict_json import StrictJSONRoute
from foldwise.trainers.task import TaskProfile

router = APIRouter(
    prefix="/studies/{study_id}",
    tags=["holdout"],
    route_class=StrictJSONRoute,
    responses=documented(404),
)


@router.post(
    "/holdout",
    response_model=schemas.Study,
    status_code=status.HTTP_202_ACCEPTED,
    responses=documented(400, 409, 413, 415),
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
        study = ended_study(session, study_id, principal)
        if study.holdout_status in refit_repo.OPEN:
            raise HTTPException(
                status.HTTP_409_CONFLICT, f"study {study_id} is being scored already"
            )
        spec = study.spec
        score = request.score or (spec.holdout.score if spec.holdout else "ensemble")
        epochs = request.epochs or (spec.holdout.epochs if spec.holdout else None)
        _check_task(study, score)
        try:
            holdout_repo.queue_holdout(
                session, study, spec, score=score, trial_number=request.trial, epochs=epochs
            )
        except refit_repo.NoSuchTrial as exc:
            raise HTTPException(status.HTTP_404_NOT_FOUND, str(exc)) from exc
        except refit_repo.NothingToScore as exc:
            raise HTTPException(status.HTTP_409_CONFLICT, str(exc)) from exc
        except refit_repo.HoldoutRefused as exc:
            raise invalid_field(("trial",), str(exc), request.trial) from exc
        return studies_out(session, [study])[0]

    study = await db.write(ask)
    if scheduler is not None:
        scheduler.wake()
    return study


def ended_study(session: Session, study_id: int, principal: MemberDep) -> StudyRow:
    """The study, ended, that ``principal`` may change, its row locked (so two requests for
    the same study take their turns): 404, 403 or 409 otherwise."""
    study_repo.touch_study(session, study_id)  # an UPDATE first: the row lock
    study = study_or_404(session, study_id)
    forbid_unless_may_change(principal, study_id, study.owner)
    if not study.status.finished:
        raise HTTPException(
            status.HTTP_409_CONFLICT,
            f"study {study_id} is {study.status}: ask once it has ended (a spec's holdout is "
            "scored as the study completes)",
        )
    return study


def _check_task(study: StudyRow, score: str) -> None:
    """The task can be scored: it gives test data and rebuilds its saved models."""
    if study.task_profile is None:
        return  # a study stored before profiles were: the score says what is missing
    profile = TaskProfile.from_json(study.task_profile)
    task = study.spec.trainer.task
    if not profile.test_data:
        message = (
            f"task {task!r} gives no test data with the study's trainer.options: add "
            "load_test_data(options)"
        )
        raise invalid_field(("score",), message, score)
    if not profile.rebuilds_models:
        message = (
            f"task {task!r} trains with its own train_fold and gives no build_model(params) "
            "to rebuild its saved models, which a score predicts with"
        )
        raise invalid_field(("score",), message, score)
