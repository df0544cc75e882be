"""One fold of one trial, the scheduler's unit of work: a run (``run_task``) whose epochs the
pruning rule judges, and whose end is the fold's value.

After each epoch the pruning rule may stop the run; the study runner may stop it too (its trial
was pruned or failed). How the fold ended the task only returns (``FoldOutcome``): the study
runner alone writes fold ends and trial verdicts, one after the other, so a verdict always sees
every fold end before it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from foldwise.pruners.in_fold import prune_verdict
from foldwise.schemas import FoldStatus
from foldwise.service.executor.contract import FoldFailed
from foldwise.service.scheduler.run_task import RunRecord, RunTask, StudyContext
from foldwise.service.scheduler.store import TrialHandle
from foldwise.spec import StudySpec
from foldwise.trainers.artifact_keys import fold_artifact_key
from foldwise.trainers.job import FoldJob, trained_seconds
from foldwise.trainers.objective import fold_metric_values, fold_value
from foldwise.trainers.report import EpochReport


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


class FoldTask(RunTask[FoldOutcome]):
    """Runs fold ``fold`` of ``trial`` to its end (``run``); ``stop`` ends it early.
    ``first_run``: its first attempt's stored (fold run id, attempt), when the study runner
    created it with the other folds it started at once."""

    def __init__(
        self,
        context: StudyContext,
        trial: TrialHandle,
        fold: int,
        on_training: Callable[[bool], None] | None = None,
        first_run: tuple[int, int] | None = None,
    ) -> None:
        super().__init__(context, trial.number, on_training=on_training, first_run=first_run)
        self.trial = trial
        self.fold = fold

    async def _start(self) -> tuple[int, int]:
        context = self.context
        return await context.store.start_fold_run(context.study_id, self.trial.id, self.fold)

    def _job(self, attempt: int) -> FoldJob:
        context = self.context
        return fold_job(
            context.spec,
            context.study_id,
            self.trial,
            self.fold,
            attempt=attempt,
            keep_artifacts=context.store.artifact_dir is not None,
            code_hash=context.code_hash,
        )

    def _cancelled(self) -> FoldOutcome:  # its trial ended before this fold started
        return FoldOutcome(self.fold, self.run_id or 0, FoldStatus.CANCELLED)

    async def _failed(self, error: FoldFailed) -> FoldOutcome:
        return FoldOutcome(
            self.fold,
            self.run_id or 0,
            FoldStatus.FAILED,
            reason=error.message,
            traceback=error.traceback,
            fatal=error.fatal,
        )

    def _take_epoch(self, run: RunRecord, report: EpochReport) -> None:
        """Count an epoch in, and ask the pruning rule about the run so far."""
        counted = len(run.epochs)
        super()._take_epoch(run, report)
        if len(run.epochs) == counted:
            return  # trained after the decision: stored, but it counts for nothing
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

    def _outcome(self, run: RunRecord) -> FoldOutcome:
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
