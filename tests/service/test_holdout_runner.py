"""The scheduler's refits and hold-out scores with a scripted executor, on both databases:
each half of a score stands on its own, a lost worker is tried again, a refit whose score
failed stays completed and is scored again later, and a damaged row fails its jobs once
instead of retrying them for ever."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from foldwise.schemas import FoldStatus, JobStatus, StudyStatus, TrialStatus
from foldwise.service.artifact_store import artifact_store, fold_model_key
from foldwise.service.db import fold_runs as fold_repo
from foldwise.service.db import holdout as holdout_repo
from foldwise.service.db import refits as refit_repo
from foldwise.service.db import studies as study_repo
from foldwise.service.db import trials as trial_repo
from foldwise.service.db.engine import SessionRunner
from foldwise.service.db.models import RefitRow, StudyRow
from foldwise.service.db.schema import upgrade_database
from foldwise.service.executor.contract import FoldFailed
from foldwise.service.scheduler.holdout_runner import HoldoutRunner
from foldwise.service.scheduler.store import SchedulerStore
from foldwise.spec import StudySpec
from foldwise.trainers.job import FoldJob
from foldwise.trainers.report import (
    ArtifactKind,
    EpochReport,
    FoldWarning,
    SavedArtifact,
    WarningKind,
)
from foldwise.trainers.task import resolve_task
from tests.service.study_specs import study_spec


class ScriptedExecutor:
    """Trains a refit in two reported epochs and saves its model; scores models as the test
    scripts (``scores``: one answer a call, an exception or metrics), noting each call."""

    def __init__(self, artifacts: Path, scores: list[Any]) -> None:
        self.artifacts, self.scores, self.scored = artifacts, scores, []

    async def describe_capacity(self, *, gpus: bool = False) -> str:
        return "plenty"

    async def run_fold(self, job: FoldJob, **_kw: Any) -> AsyncIterator[Any]:
        assert job.refit and job.artifact_key
        for epoch in (1, 2):
            yield EpochReport(epoch, {"val_loss": 1.0 / epoch})
        artifact_store(str(self.artifacts)).keep_fold_files(
            job.artifact_key, [("model.pt", b"refit")]
        )
        yield SavedArtifact(ArtifactKind.MODEL, 2, b"refit")

    async def score_models(self, job: FoldJob, models: list[bytes], **_kw: Any) -> dict:
        self.scored.append(models)
        answer = self.scores.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return {"ensemble": answer, "members": []}


def _ended_study(url: str, artifacts: Path, **holdout: Any) -> tuple[SessionRunner, int]:
    """A completed study whose one trial kept a model of each of its 3 folds, asked for a
    hold-out score (``holdout``) or nothing."""
    upgrade_database(url)
    db = SessionRunner(url, 2)
    spec = StudySpec.model_validate(
        study_spec(trainer={"task": "digits_mlp", "options": {"test_fraction": 0.25}})
    )
    store = artifact_store(str(artifacts))

    def work(session) -> int:
        profile = resolve_task("digits_mlp").profile({"test_fraction": 0.25}).to_json()
        study = study_repo.create_study(session, spec, task_profile=profile)
        study.status = StudyStatus.COMPLETED
        trial = trial_repo.create_trial(session, study.id, {"lr": 0.01}, number=0)
        for fold in range(3):
            run = fold_repo.start_fold_run(session, trial.id, fold)
            fold_repo.record_epoch(session, run.id, EpochReport(1, {"val_loss": 0.5}))
            fold_repo.record_epoch(session, run.id, EpochReport(2, {"val_loss": 0.4}))
            fold_repo.record_artifact(session, run.id, ArtifactKind.MODEL, 2)
            fold_repo.finish_fold_run(session, run.id, FoldStatus.COMPLETED, value=0.4)
            store.write(fold_model_key(study.id, 0, fold), b"fold%d" % fold)
        trial_repo.finish_trial(
            session, trial, TrialStatus.COMPLETED, value=0.4, std_error=0.01, value_folds=3
        )
        if holdout:
            holdout_repo.queue_holdout(session, study, spec, **holdout)
        return study.id

    return db, db._write(work)


def _run(db: SessionRunner, study_id: int, executor: ScriptedExecutor, artifacts: Path) -> None:
    store = SchedulerStore(db, artifact_dir=artifacts)
    asyncio.run(HoldoutRunner(study_id, store, executor).run())


def _state(db: SessionRunner, study_id: int) -> tuple[StudyRow, list[RefitRow]]:
    def work(session):
        return session.get(StudyRow, study_id), list(refit_repo.list_refits(session, study_id))

    return db._read(work)


def test_a_refit_whose_score_failed_leaves_the_ensemble_standing(
    database_url: str, tmp_path: Path
) -> None:
    artifacts = tmp_path / "artifacts"
    db, study_id = _ended_study(database_url, artifacts, score="both")
    lost = FoldFailed("the worker scoring the models was lost: ActorDiedError", retryable=True)
    refused = FoldFailed("ValueError: the refit's model does not load")
    answers = [lost, refused, {"loss": 0.3, "accuracy": 0.9}, refused]
    executor = ScriptedExecutor(artifacts, answers)
    _run(db, study_id, executor, artifacts)
    study, [refit] = _state(db, study_id)
    # the refit trained: its epochs, its model, and why its score failed (tried twice: lost)
    assert (refit.status, refit.epochs) == (JobStatus.COMPLETED, 2)
    [run] = refit.runs  # its one attempt: a run with a fold's status, epoch rows and files
    assert (run.status, run.model_saved, run.trial_id, run.fold) == (
        FoldStatus.COMPLETED,
        True,
        None,
        None,
    )
    assert [e.epoch for e in run.epochs] == [1, 2] and refit.test_metrics is None
    assert (
        refit.error == "not scored on the test data: ValueError: the refit's model does not load"
    )
    assert executor.scored[:2] == [[b"refit"], [b"refit"]]
    assert executor.scored[2] == [b"fold0", b"fold1", b"fold2"]
    holdout = study.holdout
    assert study.holdout_status is JobStatus.COMPLETED and holdout["status"] == "completed"
    assert holdout["ensemble"] == {"loss": 0.3, "accuracy": 0.9} and holdout["refit"] is None
    # the score tried the refit's model once more, in vain
    assert executor.scored[3] == [b"refit"] and executor.scores == []
    assert holdout["error"] == "refit: ValueError: the refit's model does not load"
    assert holdout["objective"]["ensemble"] == 0.3 and holdout["objective"]["cv"] == 0.4


def test_a_later_score_scores_a_completed_refit_again(database_url: str, tmp_path: Path) -> None:
    artifacts = tmp_path / "artifacts"
    db, study_id = _ended_study(database_url, artifacts, score="refit")
    executor = ScriptedExecutor(artifacts, [FoldFailed("OSError: a disk hiccup")])
    _run(db, study_id, executor, artifacts)
    study, [refit] = _state(db, study_id)
    assert refit.status is JobStatus.COMPLETED and refit.test_metrics is None
    assert study.holdout_status is JobStatus.FAILED  # its only half failed

    def again(session) -> None:  # as POST /holdout does: the completed refit is reused
        row = session.get(StudyRow, study_id)
        spec = row.spec
        holdout_repo.queue_holdout(session, row, spec, score="refit")

    db._write(again)
    executor.scores = [{"loss": 0.2, "accuracy": 0.95}]
    _run(db, study_id, executor, artifacts)
    study, refits = _state(db, study_id)
    assert len(refits) == 1  # not trained again
    assert study.holdout_status is JobStatus.COMPLETED
    assert study.holdout["refit"] == {"loss": 0.2, "accuracy": 0.95}


def test_a_damaged_row_fails_its_jobs_once(database_url: str, tmp_path: Path) -> None:
    artifacts = tmp_path / "artifacts"
    db, study_id = _ended_study(database_url, artifacts, score="both")

    def damage(session) -> None:
        session.get(StudyRow, study_id).task_profile = "{not json"

    db._write(damage)
    executor = ScriptedExecutor(artifacts, [])
    _run(db, study_id, executor, artifacts)  # returns: nothing is left open
    study, [refit] = _state(db, study_id)
    assert refit.status is JobStatus.FAILED and refit.error.startswith("JSONDecodeError")
    assert study.holdout_status is JobStatus.FAILED
    assert db._read(refit_repo.studies_with_open_jobs) == []


class LosingExecutor(ScriptedExecutor):
    """Loses the workers of a refit's first attempt after its first epoch and checkpoint, and
    warns of something in its second: the refit is a run, retried as a fold is."""

    def __init__(self, artifacts: Path) -> None:
        super().__init__(artifacts, [{"loss": 0.25}])
        self.jobs: list[FoldJob] = []

    async def run_fold(self, job: FoldJob, **kw: Any) -> AsyncIterator[Any]:
        self.jobs.append(job)
        if len(self.jobs) == 1:
            yield EpochReport(1, {"val_loss": 1.0})
            yield SavedArtifact(ArtifactKind.CHECKPOINT, 1, b"")
            raise FoldFailed("the workers were lost: ActorDiedError", retryable=True)
        yield EpochReport(1, {"val_loss": 1.0}, restored=True)
        yield FoldWarning(WarningKind.TASK, "a loss was NaN once")
        async for event in super().run_fold(job, **kw):
            if not (isinstance(event, EpochReport) and event.epoch == 1):
                yield event


def test_a_refit_whose_workers_were_lost_runs_again_as_a_fold_does(
    database_url: str, tmp_path: Path
) -> None:
    artifacts = tmp_path / "artifacts"
    db, study_id = _ended_study(database_url, artifacts)

    def ask(session) -> None:
        row = session.get(StudyRow, study_id)
        trial = trial_repo.get_trial(session, study_id, 0)
        refit_repo.queue_refit(session, row, row.spec, trial, epochs=2)

    db._write(ask)
    executor = LosingExecutor(artifacts)
    _run(db, study_id, executor, artifacts)
    study, [refit] = _state(db, study_id)
    assert refit.status is JobStatus.COMPLETED and refit.test_metrics == {"loss": 0.25}
    first, second = refit.runs
    # the lost attempt ended failed with its epoch and checkpoint; the next resumed from it
    assert (first.attempt, first.status, first.checkpoint_epoch) == (0, FoldStatus.FAILED, 1)
    assert "ActorDiedError" in first.error and [e.epoch for e in first.epochs] == [1]
    assert [job.resume for job in executor.jobs] == [False, True]
    assert (second.attempt, second.status, second.model_saved) == (1, FoldStatus.COMPLETED, True)
    assert [(e.epoch, e.restored) for e in second.epochs] == [(1, True), (2, False)]
    assert second.finished_at is not None and second.train_seconds is not None
    [warning] = study.warnings  # through the fold runs' path, naming the refit's trial
    assert warning["message"] == "a loss was NaN once" and warning["trials"] == [0]
