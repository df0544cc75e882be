"""A study's jobs after its trials: refits, and its score on the task's test data (hold-out).

The API asks for them (a refit ``queued``, a hold-out score ``queued``), and a study whose spec
has ``holdout`` asks for its score as it ends; the scheduler runs them here, one study's jobs
one at a time, refits first (a hold-out score may wait for one). A refit trains a trial's
params on all the training data through the fold path (the executor's ``run_fold``: DDP,
checkpoints, the study's code); a retried attempt, or one a restart cut short, resumes from its
checkpoint. A score rebuilds saved models in a worker (``trainers.holdout``) and predicts the
test data there: the service never imports the task.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import Any

from foldwise.schemas import JobStatus
from foldwise.spec import STORED, StudySpec
from service.artifact_store import artifact_store, fold_model_key, refit_model_key
from service.db import refits as refit_repo
from service.db import trials as trial_repo
from service.db.models import RefitRow, StudyRow
from service.executor.failures import FoldFailed
from service.scheduler.fold_task import FoldExecutor
from service.scheduler.lease import LeaseLost
from service.scheduler.store import SchedulerStore
from trainers.artifact_keys import refit_artifact_key
from trainers.job import FoldJob
from trainers.report import ArtifactKind, EpochReport, SavedArtifact
from trainers.task import TaskProfile

log = logging.getLogger(__name__)


class HoldoutFailed(Exception):
    """A refit or a hold-out score cannot be done; the message says why in one line."""


@dataclasses.dataclass(frozen=True)
class _Study:
    spec: StudySpec
    code_hash: str | None
    profile: TaskProfile | None


class HoldoutRunner:
    """Runs study ``study_id``'s open refits, then its hold-out score, until none is left."""

    def __init__(self, study_id: int, store: SchedulerStore, executor: FoldExecutor) -> None:
        self.study_id = study_id
        self.store = store
        self.executor = executor

    async def run(self) -> None:
        """Run the study's jobs to their ends; an unexpected error fails the job it hit, with
        the reason (a service stopping leaves a running refit to resume at the next start)."""
        try:
            while (job := await self._next()) is not None:
                study, refit = job
                try:
                    if refit is not None:
                        await self._refit(study, refit)
                    else:
                        await self._score(study)
                except (LeaseLost, asyncio.CancelledError):
                    raise
                except Exception as exc:
                    log.exception("study %s: a refit or hold-out score failed", self.study_id)
                    await self._fail(refit, f"{type(exc).__name__}: {exc}")
        except LeaseLost:
            log.warning("study %s: this instance lost the scheduler lease", self.study_id)

    async def _fail(self, refit: int | None, error: str) -> None:
        if refit is not None:
            await self._finish_refit(refit, JobStatus.FAILED, error=error)
        else:
            await self._write(
                lambda s: refit_repo.set_holdout(self._study(s), JobStatus.FAILED, error=error)
            )

    async def _next(self) -> tuple[_Study, int | None] | None:
        """The study and its oldest open refit's number, or None for its hold-out score;
        None when nothing is left to run."""

        def work(session: Any) -> tuple[_Study, int | None] | None:
            row = session.get(StudyRow, self.study_id)
            if row is None or row.delete_requested:
                return None
            refits = refit_repo.open_refits(session, self.study_id)
            if not refits and row.holdout_status not in refit_repo.OPEN:
                return None
            spec = StudySpec.model_validate(row.spec, context={STORED: True})
            profile = None if row.task_profile is None else TaskProfile.from_json(row.task_profile)
            study = _Study(spec, row.code_hash, profile)
            return study, refits[0].number if refits else None

        return await self.store.read(work)

    # -- refits -------------------------------------------------------------------------------

    async def _refit(self, study: _Study, number: int) -> None:
        try:
            metrics = await self._train_refit(study, number)
        except (FoldFailed, HoldoutFailed) as exc:
            message = exc.message if isinstance(exc, FoldFailed) else str(exc)
            log.warning("study %s refit %s failed: %s", self.study_id, number, message)
            await self._finish_refit(number, JobStatus.FAILED, error=message)
            return
        await self._finish_refit(number, JobStatus.COMPLETED, test_metrics=metrics)

    async def _train_refit(self, study: _Study, number: int) -> dict[str, float] | None:
        """Train refit ``number`` to its end; its model's score on the test data, if any."""
        if self.store.artifact_dir is None:
            raise HoldoutFailed("the service keeps no artifacts, so a refit's model has no home")
        retries = study.spec.trainer.retries
        attempt, trial_number, params, epochs = await self._start_attempt(number)
        while True:
            job = _refit_job(study, self.study_id, trial_number, params, number, epochs, attempt)
            try:
                await self._stream(study, job, number)
                break
            except FoldFailed as exc:
                if not exc.retryable or retries <= 0:
                    raise
                retries -= 1
                attempt, *_ = await self._start_attempt(number)
        key = refit_model_key(self.study_id, trial_number, number)
        model = await asyncio.to_thread(artifact_store(self.store.artifact_dir).read, key)
        if model is None:
            raise HoldoutFailed("the refit ended without saving its model (ctx.save_model)")
        if study.profile is None or not study.profile.test_data:
            return None
        return (await self._score_models(study, job, [model]))["ensemble"]

    async def _stream(self, study: _Study, job: FoldJob, number: int) -> None:
        resources = study.spec.resources
        async for event in self.executor.run_fold(
            job,
            cpus_per_worker=resources.cpus_per_worker,
            gpus_per_worker=resources.gpus_per_worker,
        ):
            if isinstance(event, SavedArtifact):
                await self._write(lambda s, e=event: _record_artifact(s, self.study_id, number, e))
            elif isinstance(event, EpochReport):
                await self._write(
                    lambda s, e=event: refit_repo.record_epoch(self._refit_row(s, number), e),
                    trials=False,
                )

    async def _start_attempt(self, number: int) -> tuple[int, int, dict[str, Any], int]:
        """Mark the refit running (a new attempt when it ran before); (attempt, trial number,
        the trial's params, epochs)."""

        def work(session: Any) -> tuple[int, int, dict[str, Any], int]:
            refit = self._refit_row(session, number)
            trial = trial_repo.get_trial(session, self.study_id, refit.trial_number)
            if trial is None:
                raise HoldoutFailed(f"trial {refit.trial_number} is gone")
            attempt = refit_repo.start_attempt(session, refit)
            return attempt, refit.trial_number, dict(trial.params), refit.epochs

        return await self._write(work)

    async def _finish_refit(self, number: int, status: JobStatus, **fields: Any) -> None:
        await self._write(
            lambda s: refit_repo.finish_refit(self._refit_row(s, number), status, **fields)
        )

    # -- hold-out scores ------------------------------------------------------------------------

    async def _score(self, study: _Study) -> None:
        """Score the trial the study's hold-out request names: its fold models as an ensemble
        and/or the refit it waited for."""
        try:
            request = await self._write(self._begin_score)
            found = await self._found(study, request)
        except (FoldFailed, HoldoutFailed) as exc:
            message = exc.message if isinstance(exc, FoldFailed) else str(exc)
            log.warning("study %s hold-out score failed: %s", self.study_id, message)
            await self._write(
                lambda s: refit_repo.set_holdout(self._study(s), JobStatus.FAILED, error=message)
            )
            return
        await self._write(
            lambda s: refit_repo.set_holdout(self._study(s), JobStatus.COMPLETED, **found)
        )

    def _begin_score(self, session: Any) -> dict[str, Any]:
        study = self._study(session)
        refit_repo.set_holdout(study, JobStatus.RUNNING, error=None)
        request = dict(study.holdout or {})
        trial = trial_repo.get_trial(session, self.study_id, int(request["trial"]))
        if trial is None:
            raise HoldoutFailed(f"trial {request['trial']} is gone")
        request["params"], request["value"] = dict(trial.params), trial.value
        request["std_error"] = trial.std_error
        request["folds"] = refit_repo.model_folds(session, trial)
        if request.get("refit_number"):
            refit = refit_repo.get_refit(session, self.study_id, int(request["refit_number"]))
            request["refit_row"] = None if refit is None else (refit.status, refit.error)
            request["refit_metrics"] = None if refit is None else refit.test_metrics
        return request

    async def _found(self, study: _Study, request: dict[str, Any]) -> dict[str, Any]:
        score, number = request["score"], int(request["trial"])
        ensemble = refit = None
        if score in ("ensemble", "both"):
            ensemble = await self._ensemble(study, number, request["params"], request["folds"])
        if score in ("refit", "both"):
            status, error = request.get("refit_row") or (None, "it was not asked for")
            if status is not JobStatus.COMPLETED or request.get("refit_metrics") is None:
                raise HoldoutFailed(f"refit {request.get('refit_number')} failed: {error}")
            refit = request["refit_metrics"]
        objective = holdout_objective(study.spec, request, ensemble, refit)
        return {"ensemble": ensemble, "refit": refit, "objective": objective, "error": None}

    async def _ensemble(
        self, study: _Study, number: int, params: dict[str, Any], folds: list[int]
    ) -> dict[str, float]:
        if self.store.artifact_dir is None:
            raise HoldoutFailed("the service keeps no artifacts: the fold models are gone")
        missing = sorted(set(range(study.spec.fold_count)) - set(folds))
        if missing:
            raise HoldoutFailed(
                f"trial {number} kept no model of fold {missing[0]} (a pruned or failed fold)"
            )
        store = artifact_store(self.store.artifact_dir)
        keys = [fold_model_key(self.study_id, number, fold) for fold in folds]
        models = [await asyncio.to_thread(store.read, key) for key in keys]
        if any(model is None for model in models):
            raise HoldoutFailed(f"the artifact store lost a fold model of trial {number}")
        job = FoldJob.from_spec(study.spec, params=params, fold=0, code_hash=study.code_hash)
        return (await self._score_models(study, job, [m for m in models if m]))["ensemble"]

    async def _score_models(
        self, study: _Study, job: FoldJob, models: list[bytes]
    ) -> dict[str, Any]:
        resources = study.spec.resources
        return await self.executor.score_models(
            job, models, cpus=resources.cpus_per_worker, gpus=resources.gpus_per_worker
        )

    # -- inside ---------------------------------------------------------------------------------

    async def _write(self, work: Any, *, trials: bool = True) -> Any:
        return await self.store.write(self.study_id, work, trials=trials)

    def _study(self, session: Any) -> StudyRow:
        study = session.get(StudyRow, self.study_id)
        if study is None:
            raise HoldoutFailed(f"study {self.study_id} is gone")
        return study

    def _refit_row(self, session: Any, number: int) -> RefitRow:
        refit = refit_repo.get_refit(session, self.study_id, number)
        if refit is None:
            raise HoldoutFailed(f"refit {number} is gone")
        return refit


def _refit_job(
    study: _Study,
    study_id: int,
    trial_number: int,
    params: dict[str, Any],
    number: int,
    epochs: int,
    attempt: int,
) -> FoldJob:
    """Refit ``number``: the trial's params on all the training data for ``epochs`` epochs, its
    last epoch's model kept (nothing is chosen on what it reports), no early stopping."""
    job = FoldJob.from_spec(
        study.spec,
        params=params,
        fold=0,
        trial_key=f"study{study_id}-trial{trial_number}",
        artifact_key=refit_artifact_key(study_id, trial_number, number),
        resume=attempt > 0,
        code_hash=study.code_hash,
    )
    return dataclasses.replace(
        job,
        refit=True,
        trainer=job.trainer.model_copy(update={"epochs": epochs}),
        objective=job.objective.model_copy(update={"use": "last"}),
        early_stopping=None,
    )


def _record_artifact(session: Any, study_id: int, number: int, event: SavedArtifact) -> None:
    refit = refit_repo.get_refit(session, study_id, number)
    if refit is None:
        return
    if event.kind is ArtifactKind.MODEL:
        refit.model_saved = True
    else:
        refit.checkpoint_epoch = max(event.epoch, refit.checkpoint_epoch or 0)


def holdout_objective(
    spec: StudySpec,
    request: dict[str, Any],
    ensemble: dict[str, float] | None,
    refit: dict[str, float] | None,
) -> dict[str, Any] | None:
    """The study's objective on the test data beside its CV value, when the score has a metric
    of its name without ``val_`` (``val_loss``: ``loss``); None otherwise."""
    metric = spec.objective.metric
    test_metric = metric.removeprefix("val_")
    found = [m for m in (ensemble, refit) if m is not None and test_metric in m]
    if not found:
        return None
    return {
        "metric": metric,
        "test_metric": test_metric,
        "cv": request.get("value"),
        "cv_std_error": request.get("std_error"),
        "ensemble": None if ensemble is None else ensemble.get(test_metric),
        "refit": None if refit is None else refit.get(test_metric),
    }


async def queue_study_holdout(store: SchedulerStore, study_id: int, spec: StudySpec) -> None:
    """As a study whose spec has ``holdout`` completes: ask for its score (and the refit it
    needs), once; a study with nothing to score records why instead."""
    holdout = spec.holdout
    if holdout is None:
        return

    def work(session: Any) -> None:
        study = session.get(StudyRow, study_id)
        if study is None or study.holdout_status is not None:  # asked already (a restart)
            return
        try:
            with session.begin_nested():
                refit_repo.queue_holdout(
                    session, study, spec, score=holdout.score, epochs=holdout.epochs
                )
        except refit_repo.HoldoutRefused as exc:
            refit_repo.request_holdout(session, study, None, holdout.score, None)
            refit_repo.set_holdout(study, JobStatus.FAILED, error=str(exc))

    await store.write(study_id, work)
