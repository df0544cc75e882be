"""One trial: its K fold runs in parallel, retries of folds whose workers died, and the mean.

A fold that raises in the user's code fails the whole trial (the same code would fail again);
a fold whose workers died is relaunched as a new attempt, up to ``trainer.retries`` times, and
resumes from the checkpoint its earlier attempt left under the artifact directory.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import statistics
from pathlib import Path
from typing import Any, Protocol

from foldwise.schemas import FoldStatus, TrialStatus
from foldwise.spec import StudySpec
from service.executor import FoldFailed
from service.scheduler.lease import LeaseLost
from service.scheduler.store import SchedulerStore, TrialHandle
from trainers.checkpoint import fold_artifact_dir
from trainers.job import FoldJob, trained_seconds
from trainers.objective import fold_value


class FoldExecutor(Protocol):
    def run_fold(
        self,
        job: FoldJob,
        *,
        cpus_per_worker: float,
        gpus_per_worker: float,
        timeout: float | None = None,
    ) -> Any: ...


class TrialFailed(Exception):
    """A fold of the trial failed for good; the message says which and why."""


def fold_job(
    spec: StudySpec,
    study_id: int,
    trial: TrialHandle,
    fold: int,
    *,
    attempt: int = 0,
    artifact_dir: Path | None = None,
) -> FoldJob:
    """Everything a worker needs to train and validate one fold of one trial.

    With `artifact_dir`, the fold checkpoints and saves its model under it (an absolute path,
    since workers may run elsewhere); attempts after the first resume from the checkpoint.
    """
    stopping = spec.early_stopping
    directory = None
    if artifact_dir is not None:
        root = Path(artifact_dir).resolve()
        directory = str(fold_artifact_dir(root, study_id, trial.number, fold))
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
        checkpoint_dir=directory,
        checkpoint_every=spec.trainer.checkpoint_every,
        resume=attempt > 0,
    )


class TrialRunner:
    def __init__(
        self, spec: StudySpec, study_id: int, store: SchedulerStore, executor: FoldExecutor
    ) -> None:
        self.spec = spec
        self.study_id = study_id
        self.store = store
        self.executor = executor

    async def run(self, trial: TrialHandle) -> None:
        """Run the folds not yet completed, then record the trial as completed or failed."""
        values = await self.store.completed_fold_values(trial.id)
        todo = [k for k in range(self.spec.parallel.folds) if k not in values]
        tasks = {k: asyncio.create_task(self._run_fold_with_retries(trial, k)) for k in todo}
        try:
            for k, value in zip(tasks, await asyncio.gather(*tasks.values()), strict=True):
                values[k] = value
        except TrialFailed as exc:
            await _cancel(tasks.values())
            await self.store.finish_trial(
                self.study_id, trial.id, TrialStatus.FAILED, error=str(exc)
            )
            return
        except BaseException:
            await _cancel(tasks.values())
            raise
        mean, std_error = aggregate([values[k] for k in sorted(values)])
        await self.store.finish_trial(
            self.study_id, trial.id, TrialStatus.COMPLETED, value=mean, std_error=std_error
        )

    async def _run_fold_with_retries(self, trial: TrialHandle, fold: int) -> float:
        retries = self.spec.trainer.retries
        while True:
            try:
                return await self._run_fold(trial, fold)
            except FoldFailed as exc:
                if not exc.retryable or retries <= 0:
                    raise TrialFailed(f"fold {fold}: {exc.message}") from exc
                retries -= 1

    async def _run_fold(self, trial: TrialHandle, fold: int) -> float:
        run_id, attempt = await self.store.start_fold_run(self.study_id, trial.id, fold)
        job = fold_job(
            self.spec,
            self.study_id,
            trial,
            fold,
            attempt=attempt,
            artifact_dir=self.store.artifact_dir,
        )
        epochs: list[dict[str, float]] = []
        try:
            async for metrics in self.executor.run_fold(
                job,
                cpus_per_worker=self.spec.resources.cpus_per_worker,
                gpus_per_worker=self.spec.resources.gpus_per_worker,
                timeout=self.spec.trainer.fold_timeout,
            ):
                epochs.append(metrics)
                await self.store.record_epoch(
                    self.study_id, run_id, int(metrics["epoch"]), metrics
                )
            value = fold_value(
                epochs,
                self.spec.objective.metric,
                self.spec.objective.direction.value,
                use=self.spec.objective.use,
            )
        except FoldFailed as exc:
            await self.store.finish_fold_run(
                self.study_id,
                run_id,
                FoldStatus.FAILED,
                error=exc.message,
                traceback=exc.traceback,
            )
            raise
        except (ValueError, KeyError) as exc:  # the objective metric was never reported
            await self.store.finish_fold_run(
                self.study_id, run_id, FoldStatus.FAILED, error=str(exc)
            )
            raise TrialFailed(f"fold {fold}: {exc}") from exc
        except asyncio.CancelledError:
            with contextlib.suppress(LeaseLost):  # then the next scheduler reclaims the run
                await asyncio.shield(
                    self.store.finish_fold_run(self.study_id, run_id, FoldStatus.CANCELLED)
                )
            raise
        await self.store.finish_fold_run(
            self.study_id,
            run_id,
            FoldStatus.COMPLETED,
            value=value,
            train_seconds=trained_seconds(epochs),
        )
        return value


def aggregate(values: list[float]) -> tuple[float, float]:
    """The trial's value (mean over folds) and its standard error (sample std / sqrt(K))."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, 0.0
    return mean, statistics.stdev(values) / math.sqrt(len(values))


async def _cancel(tasks: Any) -> None:
    """Cancel the tasks and wait for them. A task already being cancelled is not cancelled
    again: that would cut short its own clean-up (the shielded write of its fold's end)."""
    pending = [t for t in tasks if not t.done()]
    for task in pending:
        if not task.cancelling():
            task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
