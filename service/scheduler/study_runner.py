"""One study's loop: its trials in flight, their folds in the study's fold slots, racing.

The unit of work is the fold run. Each turn of the loop takes in the folds that ended (their
verdicts: ``trial_verdicts``), creates trials up to N_G in flight and, while racing holds
trials to their first folds, more, whose first folds take the slots left free (as the budget
allows), and gives free fold slots to the folds that
may start (``fold_slots``); a trial found clearly worse by the racing rule is stored as
``pruned`` and its other folds are stopped, which frees their slots for other trials.

Everything it knows comes from the database when it starts, so a restarted service resumes a
study where the old one left it: unfinished trials re-run their missing folds (and are judged
again by the racing rule on the folds they finished), the optimizer is rebuilt from the
warm start's prior observations (copied at submit) followed by the finished trials, and the
budget counts every trial ever created (never a prior observation).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import traceback
from datetime import UTC, datetime, timedelta

from foldwise.optimizers import BaseOptimizer, Observation
from foldwise.pruners.in_fold import FoldCurves
from foldwise.schemas import FoldStatus, StudyStatus, TrialStatus
from foldwise.service.db.fold_runs import SERVICE_STOPPED
from foldwise.service.db.models import utcnow
from foldwise.service.db.trials import STOPPED_ERROR
from foldwise.service.executor.contract import Executor
from foldwise.service.metrics import SUGGESTION_SECONDS
from foldwise.service.scheduler.cluster_share import ClusterShare
from foldwise.service.scheduler.fold_slots import FoldSlots
from foldwise.service.scheduler.holdout_runner import queue_study_holdout
from foldwise.service.scheduler.lease import LeaseLost
from foldwise.service.scheduler.run_task import StudyContext
from foldwise.service.scheduler.store import SchedulerStore
from foldwise.service.scheduler.trial_verdicts import StudyCannotRun, TrialVerdicts
from foldwise.service.study_optimizer import build_optimizer
from foldwise.spec import StudySpec

log = logging.getLogger(__name__)


class StudyRunner:
    def __init__(
        self,
        study_id: int,
        store: SchedulerStore,
        executor: Executor,
        poll_seconds: float,
        share: ClusterShare | None = None,
    ) -> None:
        self.study_id = study_id
        self.store = store
        self.executor = executor
        self.poll_seconds = poll_seconds
        self.fold_slots = FoldSlots(study_id, store, executor, share, self.wake)
        self.verdicts: TrialVerdicts | None = None
        """The trials in flight and the verdicts on them, once the study has started."""
        self.context: StudyContext | None = None
        self.warm: list[Observation] = []
        """Prior observations from the studies the spec's warm start named, told first."""
        self._wake = asyncio.Event()

    def wake(self) -> None:
        self._wake.set()

    async def run(self) -> None:
        """Run the study to its end; an unexpected error marks it failed with the reason."""
        try:
            await self._run()
        except asyncio.CancelledError:  # the service stops
            if self.context is not None:
                self.context.service_stopping.set()
            await asyncio.shield(self._cancel_trials())
            raise
        except LeaseLost:  # another scheduler runs the study now: write nothing more
            log.warning("study %s: this instance lost the scheduler lease", self.study_id)
            await self._cancel_trials()
        except StudyCannotRun as exc:
            log.warning("study %s cannot run: %s", self.study_id, exc)
            await self._cancel_trials(error=f"the study ended: {exc}")
            await self.store.finish_study(self.study_id, StudyStatus.FAILED, error=str(exc))
        except Exception as exc:
            log.exception("study %s failed", self.study_id)
            await self._cancel_trials()
            error = "".join(traceback.format_exception_only(exc)).strip()
            await self.store.finish_study(self.study_id, StudyStatus.FAILED, error=error)
        finally:
            self.fold_slots.close()

    async def _run(self) -> None:
        start = await self.store.begin_study(self.study_id)
        if start is None:  # deleted before it started
            return
        spec = start.spec
        self.warm = await self.store.warm_start(self.study_id)
        optimizer = build_optimizer(spec, warm_observations=len(self.warm))
        curves = await self._pruning_curves(spec)
        self.context = StudyContext(
            spec, self.study_id, self.store, self.executor, curves, code_hash=start.code_hash
        )
        verdicts = self.verdicts = TrialVerdicts(self.study_id, self.store, spec, curves)
        await self.fold_slots.open(spec)
        await verdicts.read_history()
        await verdicts.read_incumbent()
        for handle in start.unfinished:
            await verdicts.resume(handle)
        deadline = _deadline(spec, start.started_at)
        trials_ended = True  # the trials a restart found may already have failed alike
        while True:
            trials_ended = await self._reap(verdicts) or trials_ended
            if await self.store.stop_requested(self.study_id):
                await self._stop()
                return
            if trials_ended and await self._hopeless(spec, verdicts):
                return
            trials_ended = False
            out_of_time = deadline is not None and utcnow() >= deadline
            created = 0 if out_of_time else await self._fill(spec, optimizer, verdicts)
            await self.fold_slots.start(self.context, verdicts.trials.values())
            if not verdicts.trials and not self.fold_slots.folds and created == 0:
                await self._finish()
                return
            await self._wait()

    async def _pruning_curves(self, spec: StudySpec) -> FoldCurves | None:
        """The learning curves pruning compares with, read from the study's ended fold runs."""
        if spec.pruning.rule == "off":
            return None
        curves = FoldCurves(maximize=spec.objective.maximize)
        for fold, finished, values in await self.store.fold_curves(
            self.study_id, spec.objective.metric
        ):
            curves.add(fold, values, finished=finished)
        return curves

    async def _hopeless(self, spec: StudySpec, verdicts: TrialVerdicts) -> bool:
        """End the study as failed when its last trials all failed with the same error: the
        next would too, and a budget of them is compute burnt for nothing. Asked only after
        folds ended."""
        count = spec.budget.max_consecutive_failures
        error = verdicts.repeated_failure()
        if error is None:
            return False
        log.warning("study %s: the last %d trials failed with: %s", self.study_id, count, error)
        await self._cancel_trials()
        message = f"the last {count} trials failed with the same error: {error}"
        await self.store.finish_study(self.study_id, StudyStatus.FAILED, error=message)
        return True

    async def _fill(
        self, spec: StudySpec, optimizer: BaseOptimizer, verdicts: TrialVerdicts
    ) -> int:
        """Create trials up to N_G in flight and, under racing, those the free fold slots can
        take besides (``FoldSlots.trials_wanted``), within the budget."""
        trials = verdicts.trials
        room = spec.budget.trials - verdicts.total
        wanted = min(self.fold_slots.trials_wanted(spec, trials.values()), room)
        if wanted <= 0:
            return 0
        pending = [trial.handle.params for trial in trials.values()]
        started = time.perf_counter()
        optimizer.update([*self.warm, *verdicts.history], pending)
        configs = await asyncio.to_thread(optimizer.suggest, wanted)
        SUGGESTION_SECONDS.labels(spec.optimizer.name).observe(time.perf_counter() - started)
        handles = await self.store.create_trials(self.study_id, configs, room)
        for handle in handles:
            verdicts.add(handle)
        return len(handles)

    async def _reap(self, verdicts: TrialVerdicts) -> bool:
        """Take in the folds that ended: record finished trials, race the others; whether any
        fold ended (only then can a trial have ended). An error escaping a fold task is a bug:
        re-raise it."""
        ended = self.fold_slots.ended()
        try:
            for trial, _fold_task, task in ended:
                if task.cancelled():
                    continue
                error = task.exception()
                if error is not None:
                    raise error
                await verdicts.take(trial, task.result())
        finally:  # the fold ends no verdict wrote, the folds taken in before an error too
            await verdicts.write_fold_ends()
        self.fold_slots.count_time()
        return bool(ended)

    async def _wait(self) -> None:
        self._wake.clear()
        if self.fold_slots.any_ended():
            return
        try:
            await asyncio.wait_for(self._wake.wait(), timeout=self.poll_seconds)
        except TimeoutError:
            pass

    async def _finish(self) -> None:
        status, error = await self.store.outcome(self.study_id)
        if status is StudyStatus.COMPLETED and self.context is not None:
            # asked for before the study ends: the end is what lets it run
            await queue_study_holdout(self.store, self.study_id, self.context.spec)
        await self.store.finish_study(self.study_id, status, error=error)
        log.info(
            "study %s: %d fold slots, %.0f%% busy while it ran",
            self.study_id,
            self.fold_slots.slots,
            100 * self.fold_slots.meter.utilisation(),
        )

    async def _stop(self) -> None:
        await self._cancel_trials(error=STOPPED_ERROR)
        await self.store.finish_study(self.study_id, StudyStatus.STOPPED)

    async def _cancel_trials(self, error: str | None = None) -> None:
        """Cancel every running fold; with ``error`` the trials in flight are recorded as
        failed, else left to resume when the service starts again. The runs cut short are
        ``lost`` when the service stops (they run again), else ``cancelled``."""
        cancelled = await self.fold_slots.cancel_all()
        stopping = self.context is not None and self.context.service_stopping.is_set()
        runs = [fold_task.run_id for fold_task in cancelled if fold_task.run_id]
        status, why = (
            (FoldStatus.LOST, SERVICE_STOPPED) if stopping else (FoldStatus.CANCELLED, error)
        )
        with contextlib.suppress(LeaseLost):  # then the next scheduler reclaims the runs
            await asyncio.shield(self.store.close_fold_runs(self.study_id, runs, status, why))
        trials = [] if self.verdicts is None else list(self.verdicts.trials.values())
        if self.verdicts is not None:
            self.verdicts.trials.clear()
        if error is not None:
            for trial in trials:
                await self.store.finish_trial(
                    self.study_id, trial.handle.id, TrialStatus.FAILED, error=error
                )


def _deadline(spec: StudySpec, started_at: datetime) -> datetime | None:
    """No new trials after ``max_minutes`` from the study's first start, across restarts."""
    if spec.budget.max_minutes is None:
        return None
    if started_at.tzinfo is None:  # SQLite hands back naive UTC datetimes
        started_at = started_at.replace(tzinfo=UTC)
    return started_at + timedelta(minutes=spec.budget.max_minutes)
