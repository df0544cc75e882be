"""One run of a study's task on the executor, a fold of a trial or a refit: its attempts and
what it reports.

A run whose workers died is relaunched as a new attempt, up to ``trainer.retries`` times, and
resumes from the checkpoint its earlier attempt left; a run whose user code raised fails (the
same code would fail again). A stopped run ends after the epoch it is in, and its workers stay
warm for the next run.

What a run reports (epochs, files, placement, warnings) is queued as it comes and written in
batches (``report_batch``): the executor's stream is never held up by the database. The end
of an attempt that is tried again is written here; the end of the last attempt is written by
whoever ran the run (the study runner for a fold, so that a verdict always sees every fold end
before it; the hold-out runner for a refit), in the transaction that takes the run's reports
still queued: an end is never stored without the epochs before it.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from foldwise.pruners.in_fold import FoldCurves
from foldwise.schemas import FoldStatus
from foldwise.service.executor.contract import Executor, FoldFailed, FoldRunStats
from foldwise.service.scheduler.store import SchedulerStore
from foldwise.spec import StudySpec
from foldwise.trainers.job import FoldJob
from foldwise.trainers.report import EpochReport, FoldWarning, SavedArtifact

OutcomeT = TypeVar("OutcomeT")
T = TypeVar("T")


async def retried(
    call: Callable[[], Awaitable[T]],
    retries: int,
    on_lost: Callable[[FoldFailed], Awaitable[None]] | None = None,
) -> T:
    """``call()``, made again up to ``retries`` times while it fails because its workers were
    lost (``FoldFailed.retryable``; ``on_lost`` is told first): the one retry rule of runs and
    of scores. A failure of the user's code, or the last one, is raised."""
    while True:
        try:
            return await call()
        except FoldFailed as exc:
            if not exc.retryable or retries <= 0:
                raise
            if on_lost is not None:
                await on_lost(exc)
            retries -= 1


@dataclass(frozen=True)
class StudyContext:
    """What every run of a study shares; ``curves`` is None when pruning is off."""

    spec: StudySpec
    study_id: int
    store: SchedulerStore
    executor: Executor
    curves: FoldCurves | None = None
    code_hash: str | None = None
    """The snapshot of the task's package every run of the study runs."""
    service_stopping: asyncio.Event = field(default_factory=asyncio.Event)
    """Set before the runs are cancelled because the service stops: a run cut short then is
    ``lost`` (to run again), not ``cancelled`` (its trial ended first)."""


@dataclass
class RunRecord:
    """What one attempt has reported: the epochs that count, the objective's curve, and
    whether it was stopped (from outside) or pruned (by the rule, with the reason)."""

    epochs_planned: int
    epochs: list[EpochReport] = field(default_factory=list)
    curve: list[float] = field(default_factory=list)
    stopped: bool = False
    pruned: str | None = None
    placed: bool = False


class RunTask(ABC, Generic[OutcomeT]):
    """Runs one run to its end (``run``); ``stop`` ends it early. A kind of run says how an
    attempt is stored (``_start``) and what it trains (``_job``), and what its end is
    (``_outcome``, ``_failed``, ``_cancelled``). ``trial``: the trial number its warnings
    name. ``first_run``: its first attempt's stored (run id, attempt), when its starter
    created it (else the attempt creates its own). ``on_training`` is told when an attempt
    starts to train on its workers and when it stops (``FoldRunStats.set_training``)."""

    def __init__(
        self,
        context: StudyContext,
        trial: int,
        *,
        on_training: Callable[[bool], None] | None = None,
        first_run: tuple[int, int] | None = None,
    ) -> None:
        self.context = context
        self.trial_number = trial
        self.on_training = on_training
        self._first_run = first_run
        self.run_id: int | None = None if first_run is None else first_run[0]
        """The run of the attempt in progress (None before the first is stored)."""
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

    async def run(self) -> OutcomeT:
        """Every attempt the run needs (``trainer.retries`` more when workers are lost); the
        last one's outcome."""
        try:
            return await retried(self._attempt, self.context.spec.trainer.retries, self._lost)
        except FoldFailed as exc:
            return await self._failed(exc)

    async def _lost(self, error: FoldFailed) -> None:
        """An attempt's workers were lost: its end (not the run's), before the next attempt."""
        context = self.context
        await context.store.finish_fold_run(
            context.study_id,
            self.run_id or 0,
            FoldStatus.FAILED,
            error=error.message,
            traceback=error.traceback,
        )

    async def _attempt(self) -> OutcomeT:
        if self._stop.is_set():  # it was stopped before it started
            return self._cancelled()
        context, spec = self.context, self.context.spec
        store, study_id = context.store, context.study_id
        if self._first_run is not None:
            (self.run_id, attempt), self._first_run = self._first_run, None
        else:
            self.run_id, attempt = await self._start()
        job = self._job(attempt)
        run = RunRecord(epochs_planned=job.epochs)
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
                    store.record_warning(study_id, self.trial_number, event, fold_run_id=run_id)
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

    def _take_epoch(self, run: RunRecord, report: EpochReport) -> None:
        """Count an epoch in (one trained after the run was told to stop counts for nothing)."""
        if report.stopped:
            run.stopped = True
        if run.stopped or run.pruned is not None:
            return
        run.epochs.append(report)

    @abstractmethod
    async def _start(self) -> tuple[int, int]:
        """Store a new attempt: its (run id, attempt)."""

    @abstractmethod
    def _job(self, attempt: int) -> FoldJob:
        """What attempt ``attempt`` trains (attempts after the first resume)."""

    @abstractmethod
    def _outcome(self, run: RunRecord) -> OutcomeT:
        """How an attempt that reported ``run`` and ended ended the run."""

    @abstractmethod
    async def _failed(self, error: FoldFailed) -> OutcomeT:
        """The run failed with ``error`` (not retryable, or out of retries)."""

    @abstractmethod
    def _cancelled(self) -> OutcomeT:
        """The run was stopped before an attempt started."""
