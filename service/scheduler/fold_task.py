"""One fold of one trial, the scheduler's unit of work: its attempts, epochs and pruning.

A fold whose workers died is relaunched as a new attempt, up to ``trainer.retries`` times, and
resumes from the checkpoint its earlier attempt left; a fold whose user code raised fails (the
same code would fail again). After each epoch the pruning rule may stop the run; the study
runner may stop it too (its trial was pruned or failed). A stopped run ends after the epoch it
is in, and its workers stay warm for the next fold.

The task queues its epochs and files as they come (they are written in batches: the executor's
stream is never held up by the database), and records the end of an attempt that is tried
again; how the fold ended it only returns (``FoldOutcome``): the study runner alone writes fold
ends and trial verdicts, one after the other, so a verdict always sees every fold end before it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from foldwise.schemas import FoldStatus
from foldwise.service.executor.contract import Executor, FoldFailed, FoldRunStats
from foldwise.service.scheduler.pruning import FoldCurves, prune_verdict
from foldwise.service.scheduler.store import SchedulerStore, TrialHandle
from foldwise.spec import StudySpec
from foldwise.trainers.artifact_keys import fold_artifact_key
from foldwise.trainers.job import FoldJob, trained_seconds
from foldwise.trainers.objective import fold_metric_values, fold_value
from foldwise.trainers.report import EpochReport, FoldWarning, SavedArtifact


@dataclass(frozen=True)
class FoldOutcome:
    """How a fold's last attempt (fold run ``run_id``) ended: ``completed`` with its value,
    ``pruned`` with the value it had reached and the reason, ``failed`` with the error, or
    ``cancelled`` (stopped from outside before it finished)."""

    fold: int
    run_id: int
    status: FoldStatus
    value: float | None = None
    reason: str | None = None
    traceback: str | None = None
    train_seconds: float = 0.0
    curve: tuple[float, ...] = ()
    """The objective after each epoch that counts: a reference for pruning."""
    fatal: bool = False
    """Every trial would fail the same way (the data cannot be split as the study asks)."""
    metrics: dict[str, float] | None = None
    """With several objectives or constraints: each metric they name, at the epoch the first
    objective picks (``StudySpec.scored_metrics``)."""


@dataclass(frozen=True)
class StudyContext:
    """What every fold task of a study shares; ``curves`` is None when pruning is off."""

    spec: StudySpec
    study_id: int
    store: SchedulerStore
    executor: Executor
    curves: FoldCurves | None = None
    code_hash: str | None = None
    """The snapshot of the task's package every fold run of the study runs."""
    service_stopping: asyncio.Event = field(default_factory=asyncio.Event)
    """Set before the folds are cancelled because the service stops: a run cut short then is
    ``lost`` (to run again), not ``cancelled`` (its trial ended first)."""


def fold_job(
    spec: StudySpec,
    study_id: int,
    trial: TrialHandle,
    fold: int,
    *,
    attempt: int = 0,
    keep_artifacts: bool = False,
    code_hash: str | None = None,
) -> FoldJob:
    """Everything a worker needs to train and validate one fold of one trial, with the study's
    task code (``code_hash``).

    With `keep_artifacts`, the fold checkpoints and saves its model under its key in the
    service's artifact store; attempts after the first resume from the checkpoint.
    """
    return FoldJob.from_spec(
        spec,
        params=trial.params,
        fold=fold,
        trial_key=f"study{study_id}-trial{trial.number}",
        artifact_key=fold_artifact_key(study_id, trial.number, fold) if keep_artifacts else None,
        resume=attempt > 0,
        code_hash=code_hash,
        attempt=attempt,
    )


class FoldTask:
    """Runs fold ``fold`` of ``trial`` to its end (``run``); ``stop`` ends it early.
    ``first_run``: its first attempt's stored (fold run id, attempt). ``on_training`` is told
    when an attempt starts to train on its workers and when it stops
    (``FoldRunStats.set_training``)."""

    def __init__(
        self,
        context: StudyContext,
        trial: TrialHandle,
        fold: int,
        on_training: Callable[[bool], None] | None = None,
        first_run: tuple[int, int] | None = None,
    ) -> None:
        self.context = context
        self.trial = trial
        self.fold = fold
        self.on_training = on_training
        self._first_run = first_run
        """(fold run id, attempt) of its first attempt, when the study runner created it with
        the other folds it started at once (else the attempt creates its own)."""
        self.run_id: int | None = None if first_run is None else first_run[0]
        """The fold run of the attempt in progress (None before the first is stored)."""
        self._stop = asyncio.Event()
        self._stop_reason: str | None = None
        self._stats: FoldRunStats | None = None

    @property
    def placing_since(self) -> float | None:
        """``time.monotonic()`` when the attempt in progress began to wait for its workers,
        or None (it has them, or has not asked yet)."""
        return None if self._stats is None else self._stats.placing_since

    def stop(self, reason: str) -> None:
        """End the run after the epoch in progress (or before it starts), for ``reason``."""
        if not self._stop.is_set():
            self._stop_reason = reason
            self._stop.set()

    async def run(self) -> FoldOutcome:
        """Every attempt the fold needs; the last one's outcome."""
        retries = self.context.spec.trainer.retries
        while True:
            if self._stop.is_set():  # its trial ended before this fold started
                return FoldOutcome(self.fold, self.run_id or 0, FoldStatus.CANCELLED)
            try:
                return await self._attempt()
            except FoldFailed as exc:
                run_id = self.run_id or 0
                if not exc.retryable or retries <= 0:
                    return FoldOutcome(
                        self.fold,
                        run_id,
                        FoldStatus.FAILED,
                        reason=exc.message,
                        traceback=exc.traceback,
                        fatal=exc.fatal,
                    )
                await self.context.store.finish_fold_run(  # this attempt's end, not the fold's
                    self.context.study_id,
                    run_id,
                    FoldStatus.FAILED,
                    error=exc.message,
                    traceback=exc.traceback,
                )
                retries -= 1

    async def _attempt(self) -> FoldOutcome:
        context, spec = self.context, self.context.spec
        store, study_id = context.store, context.study_id
        if self._first_run is not None:
            (self.run_id, attempt), self._first_run = self._first_run, None
        else:
            self.run_id, attempt = await store.start_fold_run(study_id, self.trial.id, self.fold)
        job = fold_job(
            spec,
            study_id,
            self.trial,
            self.fold,
            attempt=attempt,
            keep_artifacts=store.artifact_dir is not None,
            code_hash=context.code_hash,
        )
        run = _RunRecord(epochs_planned=job.epochs)
        stats = self._stats = FoldRunStats(world_size=job.world_size)
        stats.on_training = self.on_training
        run_id = self.run_id
        try:
            async for event in context.executor.run_fold(
                job,
                cpus_per_worker=spec.resources.cpus_per_worker,
                gpus_per_worker=spec.resources.gpus_per_worker,
                stop=self._stop,
                stats=stats,
            ):
                if not run.placed and stats.placement:
                    run.placed = True
                    store.record_placement(study_id, run_id, stats.placement)
                if isinstance(event, SavedArtifact):
                    store.record_artifact(study_id, run_id, event.kind, event.epoch)
                    continue
                if isinstance(event, FoldWarning):
                    store.record_warning(study_id, self.trial.number, event, fold_run_id=run_id)
                    continue
                store.record_epoch(study_id, run_id, event)
                self._take_epoch(run, event)
        except FoldFailed:
            if not run.placed and stats.placement:  # it failed before its first epoch
                store.record_placement(study_id, run_id, stats.placement)
            if not self._stop.is_set():
                raise
            # it failed in an epoch trained after it was told to stop: what counts is the end
            # it was told (pruned at its decision, or cancelled), not the failure
            run.stopped = True
        return self._outcome(run)

    def _take_epoch(self, run: _RunRecord, report: EpochReport) -> None:
        """Count an epoch in, and ask the pruning rule about the run so far."""
        if report.stopped:
            run.stopped = True
        if run.stopped or run.pruned is not None:
            return  # trained after the decision: stored, but it counts for nothing
        run.epochs.append(report)
        spec, curves = self.context.spec, self.context.curves
        if spec.objective.metric not in report.metrics:
            return
        run.curve.append(float(report.metrics[spec.objective.metric]))
        if curves is None:
            return
        run.pruned = prune_verdict(
            spec.pruning, curves, self.fold, run.curve, epochs=run.epochs_planned
        )
        if run.pruned is not None:
            self.stop(run.pruned)

    def _outcome(self, run: _RunRecord) -> FoldOutcome:
        """How the run ended: cancelled, pruned, completed, or failed when the objective
        metric was never reported."""
        run_id, seconds, curve = self.run_id or 0, trained_seconds(run.epochs), tuple(run.curve)
        if run.pruned is None and (run.stopped or (self._stop.is_set() and not run.epochs)):
            return FoldOutcome(
                self.fold,
                run_id,
                FoldStatus.CANCELLED,
                reason=self._stop_reason,
                train_seconds=seconds,
                curve=curve,
            )
        spec = self.context.spec
        objective, reports = spec.objective, [e.metrics for e in run.epochs]
        direction = objective.direction.value
        try:  # the scored metrics hold the objective's value, read where fold_value reads it
            metrics = None
            if spec.scored_metrics:
                metrics = fold_metric_values(
                    reports, spec.scored_metrics, objective.metric, direction, objective.use
                )
                value = metrics[objective.metric]
            else:
                value = fold_value(reports, objective.metric, direction, use=objective.use)
        except ValueError as exc:  # a metric the study scores was never reported
            return FoldOutcome(self.fold, run_id, FoldStatus.FAILED, reason=str(exc))
        if run.pruned is not None:
            return FoldOutcome(
                self.fold,
                run_id,
                FoldStatus.PRUNED,
                value,
                run.pruned,
                train_seconds=seconds,
                curve=curve,
            )
        return FoldOutcome(
            self.fold,
            run_id,
            FoldStatus.COMPLETED,
            value,
            train_seconds=seconds,
            curve=curve,
            metrics=metrics,
        )


@dataclass
class _RunRecord:
    """What one attempt has reported: the epochs that count, the objective's curve, and
    whether it was stopped (from outside) or pruned (by the rule, with the reason)."""

    epochs_planned: int
    epochs: list[EpochReport] = field(default_factory=list)
    curve: list[float] = field(default_factory=list)
    stopped: bool = False
    pruned: str | None = None
    placed: bool = False
