"""A study's jobs after its trials: refits, and its score on the task's test data (hold-out).

The API asks for them (a refit ``queued``, a hold-out score ``queued``), and a study whose spec
has ``holdout`` asks for its score as it ends; the scheduler runs them here, one study's jobs
one at a time, refits first (a hold-out score may wait for one). A refit trains a trial's
params on all the training data as a run (``refit_task``: a fold's attempts, retries, statuses
and write path, the executor's ``run_fold`` with DDP, checkpoints and the study's code); a
retried attempt, or one a restart cut short, resumes from its checkpoint. A score rebuilds
saved models in a worker (``trainers.holdout``) and predicts the test data there: the service
never imports the task.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy.orm import Session

from foldwise.schemas import JobStatus
from foldwise.service.artifact_store import artifact_store, fold_model_key
from foldwise.service.db import holdout as holdout_repo
from foldwise.service.db import refits as refit_repo
from foldwise.service.db import trials as trial_repo
from foldwise.service.db.models import RefitRow, StudyRow
from foldwise.service.executor.contract import Executor, FoldFailed
from foldwise.service.scheduler.lease import LeaseLost
from foldwise.service.scheduler.refit_task import RefitAsked, RefitTask, refit_job
from foldwise.service.scheduler.run_task import StudyContext, retried
from foldwise.service.scheduler.store import SchedulerStore
from foldwise.spec import StudySpec
from foldwise.trainers.job import FoldJob
from foldwise.trainers.report import MODEL_FILE
from foldwise.trainers.task import TaskProfile

T = TypeVar("T")
log = logging.getLogger(__name__)


class HoldoutFailed(Exception):
    """A refit or a hold-out score cannot be done; the message says why in one line."""


@dataclasses.dataclass(frozen=True)
class _Study:
    spec: StudySpec
    code_hash: str | None
    profile: TaskProfile | None
    """None for a study stored before profiles were: its task is tried as it is."""

    @property
    def scores(self) -> bool:
        """Whether the study's task gives test data to score a model on."""
        return self.profile is None or self.profile.test_data


@dataclasses.dataclass(frozen=True)
class _ScoreAsked:
    """A hold-out score as asked for, with what the study holds of its trial."""

    score: str
    trial: int
    params: dict[str, Any]
    value: float | None
    std_error: float | None
    folds: list[int]
    """The folds whose model the trial kept."""
    refit: RefitRow | None


class HoldoutRunner:
    """Runs study ``study_id``'s open refits, then its hold-out score, until none is left."""

    def __init__(self, study_id: int, store: SchedulerStore, executor: Executor) -> None:
        self.study_id = study_id
        self.store = store
        self.executor = executor

    async def run(self) -> None:
        """Run the study's jobs to their ends; an unexpected error fails the jobs it hit, with
        the reason (a service stopping leaves a running refit to resume at the next start)."""
        try:
            while True:
                try:
                    job = await self._next()
                    if job is None:
                        return
                    study, refit = job
                    if refit is not None:
                        await self._refit(study, refit)
                    else:
                        await self._score(study)
                except (LeaseLost, asyncio.CancelledError):
                    raise
                except Exception as exc:
                    log.exception("study %s: a refit or hold-out score failed", self.study_id)
                    await self._write(lambda s, e=exc: _fail_open_jobs(s, self.study_id, e))
        except LeaseLost:
            log.warning("study %s: this instance lost the scheduler lease", self.study_id)

    async def _next(self) -> tuple[_Study, int | None] | None:
        """The study and its oldest open refit's number, or None for its hold-out score;
        None when nothing is left to run."""

        def work(session: Session) -> tuple[_Study, int | None] | None:
            row = session.get(StudyRow, self.study_id)
            if row is None or row.delete_requested:
                return None
            refits = refit_repo.open_refits(session, self.study_id)
            if not refits and row.holdout_status not in refit_repo.OPEN:
                return None
            spec = row.spec
            profile = None if row.task_profile is None else TaskProfile.from_json(row.task_profile)
            study = _Study(spec, row.code_hash, profile)
            return study, refits[0].number if refits else None

        return await self.store.read(work)

    # -- refits -------------------------------------------------------------------------------

    async def _refit(self, study: _Study, number: int) -> None:
        """Train refit ``number`` to its end, then score its model on the test data if the
        task gives some (a score that fails leaves the refit completed, saying why)."""
        try:
            job = await self._train_refit(study, number)
        except (FoldFailed, HoldoutFailed) as exc:
            message = _message(exc)
            log.warning("study %s refit %s failed: %s", self.study_id, number, message)
            await self._on_refit(number, refit_repo.finish_refit, JobStatus.FAILED, error=message)
            return
        metrics, error = None, None
        if study.scores:
            try:
                metrics = await self._score_refit(study, job)
            except (FoldFailed, HoldoutFailed) as exc:
                error = f"not scored on the test data: {_message(exc)}"
        await self._on_refit(
            number, refit_repo.finish_refit, JobStatus.COMPLETED, error=error, test_metrics=metrics
        )

    async def _train_refit(self, study: _Study, number: int) -> FoldJob:
        """Run refit ``number`` as a run (``RefitTask``: a fold's attempts, retries and write
        path) and write its last attempt's end; the job it trained."""
        if self.store.artifact_dir is None:
            raise HoldoutFailed("the service keeps no artifacts, so a refit's model has no home")
        asked = await self.store.read(lambda s: self._asked(s, number))
        context = StudyContext(
            study.spec, self.study_id, self.store, self.executor, code_hash=study.code_hash
        )
        end = await RefitTask(context, asked).run()
        error = end.error
        await self.store.finish_fold_run(
            self.study_id,
            end.run_id,
            end.status,
            error=None if error is None else error.message,
            traceback=None if error is None else error.traceback,
            train_seconds=end.train_seconds,
        )
        if error is not None:
            raise error
        return self._refit_job(study, asked)

    def _asked(self, session: Session, number: int) -> RefitAsked:
        refit = self._refit_row(session, number)
        trial = trial_repo.get_trial(session, self.study_id, refit.trial_number)
        if trial is None:
            raise HoldoutFailed(f"trial {refit.trial_number} is gone")
        return RefitAsked(number, refit.trial_number, dict(trial.params), refit.epochs)

    async def _score_refit(self, study: _Study, job: FoldJob) -> dict[str, float]:
        """The test-data score of the refit model ``job`` saved."""
        assert self.store.artifact_dir is not None
        store = artifact_store(self.store.artifact_dir)
        key = f"{job.artifact_key}/{MODEL_FILE}"
        model = await asyncio.to_thread(store.read, key)
        if model is None:
            raise HoldoutFailed("the refit ended without saving its model (ctx.save_model)")
        return (await self._score_models(study, job, [model]))["ensemble"]

    async def _on_refit(
        self, number: int, change: Callable[..., None], *args: Any, **kw: Any
    ) -> None:
        """``change(refit, *args, **kw)`` of refit ``number``, written."""
        await self._write(lambda s: change(self._refit_row(s, number), *args, **kw))

    # -- hold-out scores ------------------------------------------------------------------------

    async def _score(self, study: _Study) -> None:
        """Score the trial the study's hold-out request names: its fold models as an ensemble
        and/or the refit it waited for. Each half stands on its own: one that fails is said in
        ``error`` beside the other's result; the score fails when no half succeeds."""
        try:
            asked = await self._write(self._begin_score)
        except (FoldFailed, HoldoutFailed, refit_repo.HoldoutRefused) as exc:
            await self._end_score(JobStatus.FAILED, error=_message(exc))
            return
        found: dict[str, Any] = {"ensemble": None, "folds": None, "refit": None}
        errors = []
        if asked.score in ("ensemble", "both"):
            try:
                found.update(await self._ensemble(study, asked))
            except (FoldFailed, HoldoutFailed) as exc:
                errors.append(f"ensemble: {_message(exc)}")
        if asked.score in ("refit", "both"):
            try:
                found["refit"] = await self._refit_score(study, asked)
            except (FoldFailed, HoldoutFailed) as exc:
                errors.append(f"refit: {_message(exc)}")
        objective = holdout_objective(study.spec, asked, found)
        status = JobStatus.COMPLETED if any(found.values()) else JobStatus.FAILED
        error = "; ".join(errors) or None
        await self._end_score(status, objective=objective, error=error, **found)

    def _begin_score(self, session: Session) -> _ScoreAsked:
        study = self._study(session)
        holdout_repo.set_holdout(study, JobStatus.RUNNING, error=None)
        request = dict(study.holdout or {})
        if request.get("trial") is None:
            raise HoldoutFailed("the study has no completed trial to score")
        trial = trial_repo.get_trial(session, self.study_id, int(request["trial"]))
        if trial is None:
            raise HoldoutFailed(f"trial {request['trial']} is gone")
        refit = None
        if request.get("refit_number"):
            refit = refit_repo.get_refit(session, self.study_id, int(request["refit_number"]))
        return _ScoreAsked(
            score=str(request["score"]),
            trial=trial.number,
            params=dict(trial.params),
            value=trial.value,
            std_error=trial.std_error,
            folds=refit_repo.model_folds(session, trial),
            refit=refit,
        )

    async def _end_score(self, status: JobStatus, **fields: Any) -> None:
        await self._write(lambda s: holdout_repo.set_holdout(self._study(s), status, **fields))

    async def _ensemble(self, study: _Study, asked: _ScoreAsked) -> dict[str, Any]:
        """The fold models' ensemble score and the mean of their own scores."""
        if self.store.artifact_dir is None:
            raise HoldoutFailed("the service keeps no artifacts: the fold models are gone")
        missing = sorted(set(range(study.spec.fold_count)) - set(asked.folds))
        if missing:
            raise HoldoutFailed(
                f"trial {asked.trial} kept no model of fold {missing[0]} (a pruned or failed fold)"
            )
        store = artifact_store(self.store.artifact_dir)
        keys = [fold_model_key(self.study_id, asked.trial, fold) for fold in asked.folds]
        models = [await asyncio.to_thread(store.read, key) for key in keys]
        if any(model is None for model in models):
            raise HoldoutFailed(f"the artifact store lost a fold model of trial {asked.trial}")
        job = FoldJob.from_spec(study.spec, params=asked.params, fold=0, code_hash=study.code_hash)
        scores = await self._score_models(study, job, [m for m in models if m is not None])
        return {"ensemble": scores["ensemble"], "folds": _mean_metrics(scores["members"])}

    async def _refit_score(self, study: _Study, asked: _ScoreAsked) -> dict[str, float]:
        """The score of the refit the request waited for: as its end recorded it, or made now
        (its score failed then, or the study was stored before it could score)."""
        refit = asked.refit
        if refit is None:
            raise HoldoutFailed("no refit was asked for")
        if refit.status is not JobStatus.COMPLETED or not refit_repo.model_saved(refit):
            raise HoldoutFailed(f"refit {refit.number} failed: {refit.error}")
        if refit.test_metrics is not None:
            return refit.test_metrics
        job = self._refit_job(study, RefitAsked(refit.number, asked.trial, asked.params, 1))
        return await self._score_refit(study, job)

    async def _score_models(
        self, study: _Study, job: FoldJob, models: list[bytes]
    ) -> dict[str, Any]:
        """``{"ensemble": metrics, "members": [metrics of each model]}`` of ``models``, from a
        worker (tried again when it was lost, as a run is: ``trainer.retries`` times)."""
        resources = study.spec.resources
        return await retried(
            lambda: self.executor.score_models(
                job, models, cpus=resources.cpus_per_worker, gpus=resources.gpus_per_worker
            ),
            study.spec.trainer.retries,
        )

    # -- inside ---------------------------------------------------------------------------------

    async def _write(self, work: Callable[[Session], T]) -> T:
        return await self.store.write(self.study_id, work)

    def _refit_job(self, study: _Study, asked: RefitAsked) -> FoldJob:
        """What the refit trains (its model's key: what a score of it reads)."""
        return refit_job(
            study.spec,
            self.study_id,
            asked.trial,
            asked.params,
            asked.number,
            asked.epochs,
            attempt=0,
            code_hash=study.code_hash,
        )

    def _study(self, session: Session) -> StudyRow:
        study = session.get(StudyRow, self.study_id)
        if study is None:
            raise HoldoutFailed(f"study {self.study_id} is gone")
        return study

    def _refit_row(self, session: Session, number: int) -> RefitRow:
        refit = refit_repo.get_refit(session, self.study_id, number)
        if refit is None:
            raise HoldoutFailed(f"refit {number} is gone")
        return refit


def _fail_open_jobs(session: Session, study_id: int, error: BaseException) -> None:
    """End what the study has open (refits, its score) as failed with ``error``: what a bug
    or a damaged row hit would fail again at every try."""
    message = f"{type(error).__name__}: {error}"
    for refit in refit_repo.open_refits(session, study_id):
        refit_repo.finish_refit(refit, JobStatus.FAILED, error=message)
    study = session.get(StudyRow, study_id)
    if study is not None and study.holdout_status in refit_repo.OPEN:
        holdout_repo.set_holdout(study, JobStatus.FAILED, error=message)


def _message(exc: BaseException) -> str:
    return exc.message if isinstance(exc, FoldFailed) else str(exc)


def holdout_objective(
    spec: StudySpec, asked: _ScoreAsked, found: dict[str, Any]
) -> dict[str, Any] | None:
    """The study's objective on the test data beside its CV value, when the score has a metric
    of its name without ``val_`` (``val_loss``: ``loss``); None otherwise. ``folds`` is the
    mean of the fold models' own scores: the models the CV value rests on, on data none of
    them saw."""
    metric = spec.objective.metric
    test_metric = metric.removeprefix("val_")
    scored = {name: found.get(name) for name in ("ensemble", "folds", "refit")}
    if not any(m is not None and test_metric in m for m in scored.values()):
        return None
    return {
        "metric": metric,
        "test_metric": test_metric,
        "cv": asked.value,
        "cv_std_error": asked.std_error,
        **{name: None if m is None else m.get(test_metric) for name, m in scored.items()},
    }


def _mean_metrics(members: list[dict[str, float]]) -> dict[str, float]:
    """Each metric's mean over the models that report it."""
    names = dict.fromkeys(name for metrics in members for name in metrics)
    return {
        name: sum(m[name] for m in members if name in m) / sum(1 for m in members if name in m)
        for name in names
    }


async def queue_study_holdout(store: SchedulerStore, study_id: int, spec: StudySpec) -> None:
    """As a study whose spec has ``holdout`` completes: ask for its score (and the refit it
    needs), once; a study with nothing to score records why instead."""
    holdout = spec.holdout
    if holdout is None:
        return

    def work(session: Session) -> None:
        study = session.get(StudyRow, study_id)
        if study is None or study.holdout_status is not None:  # asked already (a restart)
            return
        try:  # refused before it writes anything
            holdout_repo.queue_holdout(
                session, study, spec, score=holdout.score, epochs=holdout.epochs
            )
        except refit_repo.HoldoutRefused as exc:
            holdout_repo.request_holdout(study, None, holdout.score, None)
            holdout_repo.set_holdout(study, JobStatus.FAILED, error=str(exc))

    await store.write(study_id, work)
