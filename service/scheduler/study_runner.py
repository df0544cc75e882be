"""One study's loop: N_G trials in flight, their folds in the study's fold slots, racing.

The unit of work is the fold run. The study has ``slots`` fold slots (``trial_groups x folds``,
at most what the cluster holds at once); a free slot goes to the next fold of a trial in flight
that may start (with racing, folds run in waves: ``trial_progress.folds_to_start``), and new
trials are created whenever fewer than ``trial_groups`` are in flight. After each finished fold
the racing rule compares the trial with the incumbent on the same folds; a trial found clearly
worse is stored as ``pruned`` and its other folds are stopped, which frees their slots for
other trials.

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
import statistics
import time
import traceback
from datetime import UTC, datetime, timedelta

from foldwise.schemas import FoldStatus, StudyStatus, TrialStatus
from foldwise.spec import StudySpec
from optimizers import BaseOptimizer, Observation
from service.cluster_fit import fold_capacity
from service.db.fold_runs import SERVICE_STOPPED
from service.db.models import utcnow
from service.db.trials import STOPPED_ERROR
from service.metrics import FOLD_SLOT_SECONDS, SUGGESTION_SECONDS
from service.scheduler.cluster_share import ClusterShare, fold_needs
from service.scheduler.fold_task import FoldExecutor, FoldOutcome, FoldTask, StudyContext
from service.scheduler.holdout_runner import queue_study_holdout
from service.scheduler.lease import LeaseLost
from service.scheduler.pruning import FoldCurves
from service.scheduler.racing import Incumbent, race_verdict
from service.scheduler.slot_meter import SlotMeter
from service.scheduler.store import SchedulerStore, TrialHandle
from service.scheduler.trial_progress import (
    TrialProgress,
    aggregate,
    folds_to_start,
    partial_std_error,
)
from service.study_optimizer import build_optimizer

log = logging.getLogger(__name__)

PLACEMENT_PATIENCE_S = 10.0
"""How long a fold run given a slot may wait for Ray to place its workers before the study's
``waiting`` says so (placing takes well under a second on a cluster that has room)."""


class StudyCannotRun(Exception):
    """No trial of the study can run (its data cannot be split as it asks): it fails now."""


class StudyRunner:
    def __init__(
        self,
        study_id: int,
        store: SchedulerStore,
        executor: FoldExecutor,
        poll_seconds: float,
        share: ClusterShare | None = None,
    ) -> None:
        self.study_id = study_id
        self.share = share
        """The cluster, shared with the other running studies; None: this study alone."""
        self.waiting: str | None = None
        self.store = store
        self.executor = executor
        self.poll_seconds = poll_seconds
        self.trials: dict[int, TrialProgress] = {}
        """Trials in flight (not yet ended), by id."""
        self.folds: dict[asyncio.Task[FoldOutcome], tuple[TrialProgress, FoldTask]] = {}
        """Running fold tasks, those of trials that already ended (winding down) included."""
        self.slots = 1
        self.fold_cpus = self.fold_gpus = 0.0
        """What one fold run of the study holds."""
        self.meter = SlotMeter()
        self.incumbent: Incumbent | None = None
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
            if self.share is not None:
                self.share.leave(self.study_id)

    async def _run(self) -> None:
        start = await self.store.begin_study(self.study_id)
        if start is None:  # deleted before it started
            return
        spec = start.spec
        self.warm = await self.store.warm_start(self.study_id)
        optimizer = build_optimizer(spec, warm_observations=len(self.warm))
        self.context = StudyContext(
            spec,
            self.study_id,
            self.store,
            self.executor,
            await self._pruning_curves(spec),
            code_hash=start.code_hash,
        )
        self.slots = await self._fold_slots(spec)
        self.meter = SlotMeter(self.slots)
        workers, resources = spec.parallel.workers_per_fold, spec.resources
        self.fold_cpus = workers * resources.cpus_per_worker
        self.fold_gpus = workers * resources.gpus_per_worker
        if self.share is not None:
            self.share.join(
                self.study_id,
                cpus=self.fold_cpus,
                gpus=self.fold_gpus,
                priority=spec.priority,
                wake=self.wake,
            )
        if spec.racing.rule != "off":
            self.incumbent = await self.store.incumbent(self.study_id)
        for handle in start.unfinished:
            await self._resume(handle)
        deadline = _deadline(spec, start.started_at)
        while True:
            await self._reap()
            if await self.store.stop_requested(self.study_id):
                await self._stop()
                return
            if await self._hopeless(spec):
                return
            out_of_time = deadline is not None and utcnow() >= deadline
            created = 0 if out_of_time else await self._fill(spec, optimizer)
            await self._start_folds()
            if not self.trials and not self.folds and created == 0:
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

    async def _fold_slots(self, spec: StudySpec) -> int:
        """Fold runs the study keeps going at once: trial_groups x folds, or fewer when the
        cluster holds fewer (so the order of ``folds_to_start`` decides what runs first)."""
        slots = spec.parallel.trial_groups * spec.fold_count
        capacities = getattr(self.executor, "node_capacities", None)
        if capacities is None:
            return slots
        try:
            nodes = await asyncio.to_thread(capacities)
        except Exception as exc:  # Ray slow to answer: run as if it held everything
            log.warning("study %s: could not read the cluster's nodes: %s", self.study_id, exc)
            return slots
        fits = fold_capacity(
            nodes,
            workers=spec.parallel.workers_per_fold,
            cpus=spec.resources.cpus_per_worker,
            gpus=spec.resources.gpus_per_worker,
        )
        return slots if fits is None else max(1, min(slots, fits))

    async def _resume(self, handle: TrialHandle) -> None:
        """Take up a trial a previous run of the study left unfinished."""
        trial = TrialProgress(handle, await self.store.completed_fold_values(handle.id))
        self.trials[handle.id] = trial
        await self._judge(trial)

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

    async def _fill(self, spec: StudySpec, optimizer: BaseOptimizer) -> int:
        """Create trials up to N_G in flight and within the budget."""
        if len(self.trials) >= spec.parallel.trial_groups:
            return 0
        history, total = await self.store.history(self.study_id)
        wanted = min(spec.parallel.trial_groups - len(self.trials), spec.budget.trials - total)
        if wanted <= 0:
            return 0
        pending = [trial.handle.params for trial in self.trials.values()]
        started = time.perf_counter()
        optimizer.update([*self.warm, *history], pending)
        configs = await asyncio.to_thread(optimizer.suggest, wanted)
        SUGGESTION_SECONDS.labels(spec.optimizer.name).observe(time.perf_counter() - started)
        handles = await self.store.create_trials(self.study_id, configs, spec.budget.trials)
        for handle in handles:
            self.trials[handle.id] = TrialProgress(handle)
        return len(handles)

    async def _start_folds(self) -> None:
        """Give free slots to the folds that may start, oldest trial first, as far as the
        cluster's share allows; say why in ``waiting`` when no alive node can run a fold, when
        ready folds wait with nothing running, or when Ray has not placed a fold's workers."""
        context = self.context
        assert context is not None, "the study has not started"
        spec = context.spec
        racing = spec.racing.min_folds if spec.racing.rule != "off" else None
        free = self.slots - len(self.folds)
        ready = folds_to_start(
            self.trials.values(), folds=spec.fold_count, min_folds=racing, free=free
        )
        allowed = len(ready)
        if self.share is not None:
            allowed = self.share.grant(self.study_id, running=len(self.folds), ready=len(ready))
        for trial, fold in ready[:allowed]:
            fold_task = FoldTask(context, trial.handle, fold)
            task = asyncio.create_task(fold_task.run(), name=f"fold-{fold}")
            task.add_done_callback(lambda _t: self._wake.set())
            trial.running[fold] = fold_task
            self.folds[task] = (trial, fold_task)
        self._meter()
        waiting = None
        if self.share is not None and (ready or self.folds):
            waiting = self.share.unrunnable(self.study_id)
        if waiting is None and self.share is not None and allowed < len(ready) and not self.folds:
            waiting = self.share.explain(self.study_id)
        if waiting is None:
            waiting = await self._placement_waiting()
        if waiting != self.waiting:
            self.waiting = waiting
            await self.store.set_waiting(self.study_id, waiting)

    async def _placement_waiting(self) -> str | None:
        """Why fold runs that were given a slot have no workers yet, once the first of them
        has waited ``PLACEMENT_PATIENCE_S``: Ray cannot place them (its nodes died, or what
        they need is held outside this service), which it would not say on its own."""
        folds = (task for _trial, task in self.folds.values())
        waiting = [task.placing_since for task in folds if task.placing_since is not None]
        if not waiting or time.monotonic() - min(waiting) < PLACEMENT_PATIENCE_S:
            return None
        need = fold_needs(self.fold_cpus, self.fold_gpus)
        runs = f"{len(waiting)} fold run{'s' if len(waiting) != 1 else ''}"
        capacity = await self.executor.describe_capacity(gpus=self.fold_gpus > 0)
        return (
            f"waiting for Ray to place the workers of {runs} ({need} each) for over "
            f"{PLACEMENT_PATIENCE_S:g} s: {capacity}"
        )

    async def _reap(self) -> None:
        """Take in the folds that ended: record finished trials, race the others. An error
        escaping a fold task is a bug: re-raise it."""
        for task in [t for t in self.folds if t.done()]:
            trial, fold_task = self.folds.pop(task)
            trial.running.pop(fold_task.fold, None)
            if task.cancelled():
                continue
            error = task.exception()
            if error is not None:
                raise error
            await self._take(trial, task.result())
        self._meter()

    async def _take(self, trial: TrialProgress, outcome: FoldOutcome) -> None:
        """A fold of ``trial`` ended: write how, then what that means for the trial. A fold
        of a trial already decided ends cancelled, whatever its timing."""
        decided = trial.handle.id not in self.trials
        status = FoldStatus.CANCELLED if decided else outcome.status
        if outcome.run_id:
            reason = outcome.reason
            if decided and outcome.status is not FoldStatus.CANCELLED:
                reason = "its trial ended first"
            await self.store.finish_fold_run(
                self.study_id,
                outcome.run_id,
                status,
                value=None if status is FoldStatus.CANCELLED else outcome.value,
                error=reason,
                traceback=outcome.traceback,
                train_seconds=outcome.train_seconds,
            )
        curves = self.context.curves if self.context is not None else None
        if curves is not None and status is not FoldStatus.FAILED and outcome.curve:
            curves.add(outcome.fold, list(outcome.curve), finished=status is FoldStatus.COMPLETED)
        if decided:
            return
        if status is FoldStatus.COMPLETED and outcome.value is not None:
            trial.values[outcome.fold] = outcome.value
            await self._judge(trial)
        elif status is FoldStatus.PRUNED and outcome.value is not None:
            await self._prune(trial, outcome.reason or "pruned", stopped_at=outcome.value)
        elif status is FoldStatus.FAILED:
            error = f"fold {outcome.fold}: {outcome.reason}"
            await self._end_trial(trial, TrialStatus.FAILED, error=error)
            if outcome.fatal:  # every trial would fail so: end the study now, saying why
                raise StudyCannotRun(outcome.reason or error)
        else:  # only a trial that ended stops its folds: never run this one again
            error = f"fold {outcome.fold} ended {status} while its trial still ran"
            log.error("study %s trial %s: %s", self.study_id, trial.handle.number, error)
            await self._end_trial(trial, TrialStatus.FAILED, error=error)

    async def _judge(self, trial: TrialProgress) -> None:
        """Complete a trial whose every fold finished; prune one the racing rule finds clearly
        worse than the incumbent on the same folds."""
        assert self.context is not None, "the study has not started"
        spec = self.context.spec
        folds = spec.fold_count
        if len(trial.values) >= folds:
            mean, std_error = aggregate([trial.values[k] for k in sorted(trial.values)])
            await self._end_trial(
                trial,
                TrialStatus.COMPLETED,
                value=mean,
                std_error=std_error,
                value_folds=len(trial.values),
            )
            if spec.racing.rule != "off":
                await self._new_incumbent()
            return
        reason = race_verdict(
            spec.racing,
            trial.values,
            self.incumbent,
            folds=folds,
            maximize=spec.objective.maximize,
        )
        if reason is not None:
            await self._prune(trial, reason)

    async def _new_incumbent(self) -> None:
        """Read the incumbent again after a trial completed; trials in flight that are now
        clearly worse than a new incumbent are pruned at once."""
        incumbent = await self.store.incumbent(self.study_id)
        if incumbent == self.incumbent:
            return
        self.incumbent = incumbent
        for trial in list(self.trials.values()):
            await self._judge(trial)

    async def _prune(
        self, trial: TrialProgress, reason: str, *, stopped_at: float | None = None
    ) -> None:
        """Store ``trial`` as pruned for ``reason`` with the mean of its finished folds' values
        and ``stopped_at``, the value of a fold the pruning rule stopped."""
        values = [trial.values[k] for k in sorted(trial.values)]
        if stopped_at is not None:
            values.append(stopped_at)
        spread = None
        if self.incumbent is not None and len(self.incumbent.values) >= 2:
            spread = statistics.stdev(self.incumbent.values.values())
        await self._end_trial(
            trial,
            TrialStatus.PRUNED,
            value=statistics.fmean(values),
            std_error=partial_std_error(values, spread),
            value_folds=len(values),
            pruned_reason=reason,
        )

    async def _end_trial(self, trial: TrialProgress, status: TrialStatus, **fields) -> None:
        """Record how ``trial`` ended and stop its folds still running (their slots free up
        after the epoch they are in)."""
        if trial.handle.id not in self.trials:
            return
        await self.store.finish_trial(self.study_id, trial.handle.id, status, **fields)
        del self.trials[trial.handle.id]
        why = fields.get("pruned_reason") or fields.get("error") or f"the trial {status}"
        for fold_task in trial.running.values():
            fold_task.stop(f"trial {trial.handle.number} ended first ({status}): {why}")

    def _meter(self) -> None:
        busy, idle = self.meter.update(len(self.folds))
        FOLD_SLOT_SECONDS.labels("busy").inc(busy)
        FOLD_SLOT_SECONDS.labels("idle").inc(idle)

    async def _wait(self) -> None:
        self._wake.clear()
        if any(task.done() for task in self.folds):
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
            self.slots,
            100 * self.meter.utilisation(),
        )

    async def _stop(self) -> None:
        await self._cancel_trials(error=STOPPED_ERROR)
        await self.store.finish_study(self.study_id, StudyStatus.STOPPED)

    async def _cancel_trials(self, error: str | None = None) -> None:
        """Cancel every running fold; with ``error`` the trials in flight are recorded as
        failed, else left to resume when the service starts again. The runs cut short are
        ``lost`` when the service stops (they run again), else ``cancelled``."""
        running = list(self.folds.items())
        for task, _ in running:
            if not task.cancelling():
                task.cancel()
        await asyncio.gather(*(task for task, _ in running), return_exceptions=True)
        self.folds.clear()
        stopping = self.context is not None and self.context.service_stopping.is_set()
        runs = [fold_task.run_id for _, (_, fold_task) in running if fold_task.run_id]
        status, why = (
            (FoldStatus.LOST, SERVICE_STOPPED) if stopping else (FoldStatus.CANCELLED, error)
        )
        with contextlib.suppress(LeaseLost):  # then the next scheduler reclaims the runs
            await asyncio.shield(self.store.close_fold_runs(self.study_id, runs, status, why))
        trials = list(self.trials.values())
        self.trials.clear()
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
