"""A refit as a run: a trial's params trained on all the training data, with a fold's attempts,
retries, statuses and write path (``run_task``); the hold-out runner writes its end."""

from __future__ import annotations

import dataclasses
from typing import Any

from sqlalchemy.orm import Session

from foldwise.schemas import FoldStatus
from foldwise.service.db import refits as refit_repo
from foldwise.service.executor.contract import FoldFailed
from foldwise.service.scheduler.run_task import RunRecord, RunTask, StudyContext
from foldwise.spec import StudySpec
from foldwise.trainers.artifact_keys import refit_artifact_key
from foldwise.trainers.job import FoldJob, trained_seconds


@dataclasses.dataclass(frozen=True)
class RefitEnd:
    """How a refit's last attempt (run ``run_id``) ended: ``completed``, or ``failed`` with
    the error (``retryable``: its workers were lost, not its code)."""

    run_id: int
    status: FoldStatus
    error: FoldFailed | None = None
    train_seconds: float = 0.0


@dataclasses.dataclass(frozen=True)
class RefitAsked:
    """Refit ``number`` of the study as stored: the trial it refits and how long it trains."""

    number: int
    trial: int
    params: dict[str, Any]
    epochs: int


class RefitTask(RunTask[RefitEnd]):
    """Trains refit ``asked`` to its end (``run``)."""

    def __init__(self, context: StudyContext, asked: RefitAsked) -> None:
        super().__init__(context, asked.trial)
        self.asked = asked

    async def _start(self) -> tuple[int, int]:
        context, number = self.context, self.asked.number

        def work(session: Session) -> tuple[int, int]:
            refit = refit_repo.get_refit(session, context.study_id, number)
            if refit is None:
                raise FoldFailed(f"refit {number} is gone")
            return refit_repo.start_refit(session, refit)

        return await context.store.write(context.study_id, work)

    def _job(self, attempt: int) -> FoldJob:
        context, asked = self.context, self.asked
        return refit_job(
            context.spec,
            context.study_id,
            asked.trial,
            asked.params,
            asked.number,
            asked.epochs,
            attempt=attempt,
            code_hash=context.code_hash,
        )

    def _outcome(self, run: RunRecord) -> RefitEnd:
        return RefitEnd(self.run_id or 0, FoldStatus.COMPLETED, None, trained_seconds(run.epochs))

    async def _failed(self, error: FoldFailed) -> RefitEnd:
        return RefitEnd(self.run_id or 0, FoldStatus.FAILED, error)

    def _cancelled(self) -> RefitEnd:
        raise AssertionError("a refit is never stopped before it starts")


def refit_job(
    spec: StudySpec,
    study_id: int,
    trial_number: int,
    params: dict[str, Any],
    number: int,
    epochs: int,
    *,
    attempt: int,
    code_hash: str | None,
) -> FoldJob:
    """Refit ``number``: the trial's params on all the training data for ``epochs`` epochs,
    its last epoch's model kept, no early stopping: nothing is chosen on what it reports."""
    job = FoldJob.from_spec(
        spec,
        params=params,
        fold=0,
        trial_key=f"study{study_id}-trial{trial_number}",
        artifact_key=refit_artifact_key(study_id, trial_number, number),
        resume=attempt > 0,
        code_hash=code_hash,
        attempt=attempt,
    )
    return dataclasses.replace(
        job,
        refit=True,
        trainer=job.trainer.model_copy(update={"epochs": epochs}),
        objective=job.objective.model_copy(update={"use": "last"}),
        early_stopping=None,
    )
