"""One fold of one trial, the scheduler's unit of work: its attempts, epochs and pruning.

A fold whose user code raises fails its trial (the same code would fail again); a fold whose
workers died is relaunched as a new attempt, up to ``trainer.retries`` times, and resumes from
the checkpoint its earlier attempt left. After each epoch the pruning rule may stop the run;
the study runner may stop it too (its trial was pruned or failed). A stopped run ends after the
epoch it is in, and its workers stay warm for the next fold.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Any, Protocol

from foldwise.schemas import FoldStatus
from foldwise.spec import StudySpec
from service.db.fold_runs import SERVICE_STOPPED
from service.executor import FoldFailed, FoldRunStats
from service.scheduler.lease import LeaseLost
from service.scheduler.pruning import FoldCurves, prune_verdict
from service.scheduler.store import SchedulerStore, TrialHandle
from trainers.checkpoint import fold_artifact_key
from trainers.job import FoldJob, trained_seconds
from trainers.objective import fold_value


class FoldExecutor(Protocol):
    async def describe_capacity(self, *, gpus: bool = False) -> str: ...

    def run_fold(
        self,
        job: FoldJob,
        *,
        cpus_per_worker: float,
        gpus_per_worker: float,
        timeout: float | None = None,
        stop: asyncio.Event | None = None,
        stats: FoldRunStats | None = None,
    ) -> Any: ...


class TrialFailed(Exception):
    """A fold of the trial failed for good; the message says which and why."""


@dataclass(frozen=True)
class FoldOutcome:
    """How a fold ended: ``completed`` with its value, ``pruned`` with the value it had
    reached and the reason, or ``cancelled`` (stopped from outside before it finished)."""

    fold: int
    status: FoldStatus
    value: float | None = None
    reason: str | None = None


@dataclass(frozen=True)
class StudyContext:
    """What every fold task of a study shares; ``curves`` is None when pruning is off."""

    spec: StudySpec
    study_id: int
    store: SchedulerStore
    executor: FoldExecutor
    curves: FoldCurves | None = None
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
) -> FoldJob:
    """Everything a worker needs to train and validate one fold of one trial.

    With `keep_artifacts`, the fold checkpoints and saves its model under its key in the
    service's artifact store; attempts after the first resume from the checkpoint.
    """
    stopping = spec.early_stopping
    key = fold_artifact_key(study_id, trial.number, fold) if keep_artifacts else None
    return FoldJob(
        task=spec.trainer.task,
        params=trial.params,
        fold=fold,
        folds=spec.parallel.folds,
        seed=spec.seed,
        epochs=spec.trainer.epochs,
        batch_size=spec.trainer.batch_size,
        objective_metric=spec.objective.metric,
        direction=spec.objective.direction.value,
        patience=stopping.patience if stopping else None,
        min_delta=stopping.min_delta if stopping else 0.0,
        stopping_rule=stopping.rule if stopping else "patience",
        objective_use=spec.objective.use,
        lr_scaling=spec.trainer.lr_scaling,
        warmup_epochs=spec.trainer.warmup_epochs,
        world_size=spec.parallel.workers_per_fold,
        backend="nccl" if spec.resources.gpus_per_worker > 0 else "gloo",
        options=spec.trainer.options,
        trial_key=f"study{study_id}-trial{trial.number}",
        artifact_key=key,
        checkpoint_every=spec.trainer.checkpoint_every,
        resume=attempt > 0,
    )


class FoldTask:
    """Runs fold ``fold`` of ``trial`` to its end (``run``); ``stop`` ends it early."""

    def __init__(self, context: StudyContext, trial: TrialHandle, fold: int) -> None:
        self.context = context
        self.trial = trial
        self.fold = fold
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
        """Every attempt the fold needs; ``TrialFailed`` when it failed for good."""
        retries = self.context.spec.trainer.retries
        while True:
            try:
                return await self._attempt()
            except FoldFailed as exc:
                if not exc.retryable or retries <= 0:
                    raise TrialFailed(f"fold {self.fold}: {exc.message}") from exc
                retries -= 1

    async def _attempt(self) -> FoldOutcome:
        context, spec = self.context, self.context.spec
        if self._stop.is_set():  # its trial ended before this fold started
            return FoldOutcome(self.fold, FoldStatus.CANCELLED)
        store, study_id = context.store, context.study_id
        run_id, attempt = await store.start_fold_run(study_id, self.trial.id, self.fold)
        job = fold_job(
            spec,
            study_id,
            self.trial,
            self.fold,
            attempt=attempt,
            keep_artifacts=store.artifact_dir is not None,
        )
        run = _RunRecord()
        stats = self._stats = FoldRunStats(world_size=job.world_size)
        try:
            async for metrics in context.executor.run_fold(
                job,
                cpus_per_worker=spec.resources.cpus_per_worker,
                gpus_per_worker=spec.resources.gpus_per_worker,
                timeout=spec.trainer.fold_timeout,
                stop=self._stop,
                stats=stats,
            ):
                if not run.placed and stats.placement:
                    run.placed = True
                    await store.record_placement(study_id, run_id, stats.placement)
                await store.record_epoch(study_id, run_id, int(metrics["epoch"]), metrics)
                self._take_epoch(run, metrics)
            outcome = self._outcome(run)
        except FoldFailed as exc:
            if not run.placed and stats.placement:  # it failed before its first epoch
                await store.record_placement(study_id, run_id, stats.placement)
            if not self._stop.is_set():
                await store.finish_fold_run(
                    study_id, run_id, FoldStatus.FAILED, error=exc.message, traceback=exc.traceback
                )
                raise
            # it failed in an epoch trained after it was told to stop: what counts is the end
            # it was told (pruned at its decision, or cancelled), not the failure
            run.stopped = True
            outcome = self._outcome(run)
        except (ValueError, KeyError) as exc:  # the objective metric was never reported
            await store.finish_fold_run(study_id, run_id, FoldStatus.FAILED, error=str(exc))
            raise TrialFailed(f"fold {self.fold}: {exc}") from exc
        except asyncio.CancelledError:
            status, error = FoldStatus.CANCELLED, None
            if context.service_stopping.is_set():
                status, error = FoldStatus.LOST, SERVICE_STOPPED
            with contextlib.suppress(LeaseLost):  # then the next scheduler reclaims the run
                await asyncio.shield(store.finish_fold_run(study_id, run_id, status, error=error))
            raise
        await store.finish_fold_run(
            study_id,
            run_id,
            outcome.status,
            value=outcome.value,
            error=outcome.reason,
            train_seconds=trained_seconds(run.epochs),
        )
        if context.curves is not None:  # a reference for the runs of this fold from now on
            finished = outcome.status is FoldStatus.COMPLETED
            context.curves.add(self.fold, run.curve, finished=finished)
        return outcome

    def _take_epoch(self, run: _RunRecord, metrics: dict[str, float]) -> None:
        """Count an epoch in, and ask the pruning rule about the run so far."""
        if metrics.get("stopped"):
            run.stopped = True
        if run.stopped or run.pruned is not None:
            return  # trained after the decision: stored, but it counts for nothing
        run.epochs.append(metrics)
        spec, curves = self.context.spec, self.context.curves
        if spec.objective.metric not in metrics or curves is None:
            return
        run.curve.append(float(metrics[spec.objective.metric]))
        run.pruned = prune_verdict(
            spec.pruning, curves, self.fold, run.curve, epochs=spec.trainer.epochs
        )
        if run.pruned is not None:
            self.stop(run.pruned)

    def _outcome(self, run: _RunRecord) -> FoldOutcome:
        """How the run ended; ``ValueError`` when the objective metric was never reported."""
        objective = self.context.spec.objective
        if run.pruned is None and (run.stopped or (self._stop.is_set() and not run.epochs)):
            return FoldOutcome(self.fold, FoldStatus.CANCELLED, reason=self._stop_reason)
        value = fold_value(
            run.epochs, objective.metric, objective.direction.value, use=objective.use
        )
        if run.pruned is not None:
            return FoldOutcome(self.fold, FoldStatus.PRUNED, value, run.pruned)
        return FoldOutcome(self.fold, FoldStatus.COMPLETED, value)


@dataclass
class _RunRecord:
    """What one attempt has reported: the epochs that count, the objective's curve, and
    whether it was stopped (from outside) or pruned (by the rule, with the reason)."""

    epochs: list[dict[str, float]] = field(default_factory=list)
    curve: list[float] = field(default_factory=list)
    stopped: bool = False
    pruned: str | None = None
    placed: bool = False
