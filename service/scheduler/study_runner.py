"""One study's loop: keep N_G trials in flight, ask the optimizer for more, stop on budget.

Everything it knows comes from the database when it starts, so a restarted service resumes a
study where the old one left it: unfinished trials re-run their missing folds, the optimizer is
rebuilt from the finished trials, and the budget counts every trial ever created.
"""

from __future__ import annotations

import asyncio
import logging
import time
import traceback
from datetime import UTC, datetime, timedelta

from foldwise.schemas import StudyStatus, TrialStatus
from foldwise.spec import StudySpec
from optimizers import BaseOptimizer
from service.db.models import utcnow
from service.metrics import SUGGESTION_SECONDS
from service.scheduler.lease import LeaseLost
from service.scheduler.store import SchedulerStore, TrialHandle
from service.scheduler.trial_runner import FoldExecutor, TrialRunner
from service.study_optimizer import build_optimizer

log = logging.getLogger(__name__)

STOPPED_ERROR = "the study was stopped while this trial ran"


class StudyRunner:
    def __init__(
        self, study_id: int, store: SchedulerStore, executor: FoldExecutor, poll_seconds: float
    ) -> None:
        self.study_id = study_id
        self.store = store
        self.executor = executor
        self.poll_seconds = poll_seconds
        self.running: dict[asyncio.Task[None], TrialHandle] = {}
        self._wake = asyncio.Event()

    def wake(self) -> None:
        self._wake.set()

    async def run(self) -> None:
        """Run the study to its end; an unexpected error marks it failed with the reason."""
        try:
            await self._run()
        except asyncio.CancelledError:
            await asyncio.shield(self._cancel_trials())
            raise
        except LeaseLost:  # another scheduler runs the study now: write nothing more
            log.warning("study %s: this instance lost the scheduler lease", self.study_id)
            await self._cancel_trials()
        except Exception as exc:
            log.exception("study %s failed", self.study_id)
            await self._cancel_trials()
            error = "".join(traceback.format_exception_only(exc)).strip()
            await self.store.finish_study(self.study_id, StudyStatus.FAILED, error=error)

    async def _run(self) -> None:
        start = await self.store.begin_study(self.study_id)
        if start is None:  # deleted before it started
            return
        spec = StudySpec.model_validate(start.spec)
        optimizer = build_optimizer(spec)
        trials = TrialRunner(spec, self.study_id, self.store, self.executor)
        for handle in start.unfinished:
            self._launch(trials, handle)
        deadline = _deadline(spec, start.started_at)
        while True:
            self._reap()
            if await self.store.stop_requested(self.study_id):
                await self._stop()
                return
            if await self._hopeless(spec):
                return
            out_of_time = deadline is not None and utcnow() >= deadline
            created = 0 if out_of_time else await self._fill(spec, optimizer, trials)
            if not self.running and created == 0:
                status, error = await self.store.outcome(self.study_id)
                await self.store.finish_study(self.study_id, status, error=error)
                return
            await self._wait()

    async def _hopeless(self, spec: StudySpec) -> bool:
        """End the study as failed when its last trials all failed with the same error: the
        next would too, and a budget of them is compute burnt for nothing."""
        count = spec.budget.max_consecutive_failures
        error = await self.store.repeated_failure(self.study_id, count)
        if error is None:
            return False
        log.warning("study %s: the last %d trials failed with: %s", self.study_id, count, error)
        await self._cancel_trials()
        message = f"the last {count} trials failed with the same error: {error}"
        await self.store.finish_study(self.study_id, StudyStatus.FAILED, error=message)
        return True

    async def _fill(self, spec: StudySpec, optimizer: BaseOptimizer, trials: TrialRunner) -> int:
        """Create and launch trials up to N_G in flight and within the budget."""
        history, total = await self.store.history(self.study_id)
        free = spec.parallel.trial_groups - len(self.running)
        wanted = min(free, spec.budget.trials - total)
        if wanted <= 0:
            return 0
        pending = [handle.params for handle in self.running.values()]
        started = time.perf_counter()
        optimizer.update(history, pending)
        configs = await asyncio.to_thread(optimizer.suggest, wanted)
        SUGGESTION_SECONDS.labels(spec.optimizer.name).observe(time.perf_counter() - started)
        handles = await self.store.create_trials(self.study_id, configs, spec.budget.trials)
        for handle in handles:
            self._launch(trials, handle)
        return len(handles)

    def _launch(self, trials: TrialRunner, handle: TrialHandle) -> None:
        task = asyncio.create_task(trials.run(handle), name=f"trial-{handle.number}")
        task.add_done_callback(lambda _t: self._wake.set())
        self.running[task] = handle

    def _reap(self) -> None:
        """Forget finished trial tasks; an error escaping a trial task is a bug: re-raise it."""
        for task in [t for t in self.running if t.done()]:
            del self.running[task]
            if not task.cancelled() and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]

    async def _wait(self) -> None:
        self._wake.clear()
        try:
            await asyncio.wait_for(self._wake.wait(), timeout=self.poll_seconds)
        except TimeoutError:
            pass

    async def _stop(self) -> None:
        await self._cancel_trials(error=STOPPED_ERROR)
        await self.store.finish_study(self.study_id, StudyStatus.STOPPED)

    async def _cancel_trials(self, error: str | None = None) -> None:
        """Cancel running trials; with ``error`` they are recorded as failed, else left to
        resume when the service starts again."""
        handles = list(self.running.items())
        for task, _handle in handles:
            task.cancel()
        await asyncio.gather(*(t for t, _ in handles), return_exceptions=True)
        self.running.clear()
        if error is not None:
            for _task, handle in handles:
                await self.store.finish_trial(
                    self.study_id, handle.id, TrialStatus.FAILED, error=error
                )


def _deadline(spec: StudySpec, started_at: datetime) -> datetime | None:
    """No new trials after ``max_minutes`` from the study's first start, across restarts."""
    if spec.budget.max_minutes is None:
        return None
    if started_at.tzinfo is None:  # SQLite hands back naive UTC datetimes
        started_at = started_at.replace(tzinfo=UTC)
    return started_at + timedelta(minutes=spec.budget.max_minutes)
