"""A study's fold slots: how many fold runs it keeps going at once, which ready folds get a
free slot, and why ready folds wait.

The study has ``slots`` fold slots (``trial_groups x folds``, at most what the cluster holds at
once); a free slot goes to the next fold of a trial in flight that may start (with racing,
folds run in waves: ``trial_progress.folds_to_start``), as far as the cluster's share among the
running studies allows. ``trials_wanted`` says how many trials to start: ``trial_groups`` in
flight, and with racing, while the trials in flight have fewer folds ready than slots are
free, more, whose first folds take the rest, so the slots do not wait while every trial runs
its first wave. When fold runs cannot start or are not placed, ``waiting`` says why in
words, which the study's answer carries.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Collection, Iterable

from foldwise.service.admission.cluster_fit import fold_capacity
from foldwise.service.executor.contract import Executor
from foldwise.service.metrics import FOLD_SLOT_SECONDS
from foldwise.service.scheduler.cluster_share import ClusterShare, fold_needs
from foldwise.service.scheduler.fold_task import FoldOutcome, FoldTask
from foldwise.service.scheduler.run_task import StudyContext
from foldwise.service.scheduler.slot_meter import SlotMeter
from foldwise.service.scheduler.store import SchedulerStore
from foldwise.service.scheduler.trial_progress import TrialProgress, folds_to_start
from foldwise.spec import StudySpec

log = logging.getLogger(__name__)

PLACEMENT_PATIENCE_S = 10.0
"""How long a fold run given a slot may wait for Ray to place its workers before the study's
``waiting`` says so (placing takes well under a second on a cluster that has room)."""

WAITING_REFRESH_S = 5.0
"""How often, at most, a study's waiting note is rewritten while only its figures change (the
fold runs ready, the CPUs free, the studies holding them): each fold run that starts or ends
anywhere changes them for every waiting study, and each write is a new revision of the study
that its pollers read again. A note that appears, goes or changes its reason is written at
once."""

FoldRun = asyncio.Task[FoldOutcome]


class WaitingNote:
    """The waiting note last written for a study, and whether a new one is due."""

    def __init__(self) -> None:
        self.text: str | None = None
        self.written_at = -float("inf")

    def due(self, text: str | None, now: float) -> bool:
        """Whether ``text`` should be written now: it appears, goes or gives another reason,
        or only its figures changed and the last write is ``WAITING_REFRESH_S`` old."""
        if text == self.text:
            return False
        if text is None or self.text is None or _reason(text) != _reason(self.text):
            return True
        return now - self.written_at >= WAITING_REFRESH_S

    def written(self, text: str | None, now: float) -> None:
        self.text, self.written_at = text, now


def _wave(spec: StudySpec) -> int | None:
    """The folds a trial runs before racing first judges it; None: racing is off."""
    return spec.racing.min_folds if spec.racing.rule != "off" else None


def _reason(note: str) -> str:
    """A note's reason: its words before the first colon (the figures follow it)."""
    return note.split(":", 1)[0]


class FoldSlots:
    """The fold runs of one study (``share``: the cluster, shared with the other running
    studies; None: this study alone). ``wake`` is called when a fold run ends."""

    def __init__(
        self,
        study_id: int,
        store: SchedulerStore,
        executor: Executor,
        share: ClusterShare | None,
        wake: Callable[[], None],
    ) -> None:
        self.study_id = study_id
        self.store = store
        self.executor = executor
        self.share = share
        self.wake = wake
        self.folds: dict[FoldRun, tuple[TrialProgress, FoldTask]] = {}
        """Running fold tasks, those of trials that already ended (winding down) included."""
        self.slots = 1
        self.fold_cpus = self.fold_gpus = 0.0
        """What one fold run of the study holds."""
        self.meter = SlotMeter()
        self.training = 0
        """Fold runs that hold their workers and train now: what ``slots busy`` counts."""
        self.note = WaitingNote()

    async def open(self, spec: StudySpec) -> None:
        """Size the slots to the study and the cluster, and join the cluster's share."""
        self.slots = await self._count(spec)
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

    def close(self) -> None:
        """Leave the cluster's share."""
        if self.share is not None:
            self.share.leave(self.study_id)

    async def _count(self, spec: StudySpec) -> int:
        """Fold runs the study keeps going at once: trial_groups x folds, or fewer when the
        cluster holds fewer (so the order of ``folds_to_start`` decides what runs first)."""
        slots = spec.parallel.trial_groups * spec.fold_count
        try:
            nodes = await asyncio.to_thread(self.executor.node_capacities)
        except Exception as exc:  # Ray slow to answer: run as if it held everything
            log.warning("study %s: could not read the cluster's nodes: %s", self.study_id, exc)
            return slots
        if nodes is None:  # an executor that cannot tell
            return slots
        fits = fold_capacity(
            nodes,
            workers=spec.parallel.workers_per_fold,
            cpus=spec.resources.cpus_per_worker,
            gpus=spec.resources.gpus_per_worker,
        )
        return slots if fits is None else max(1, min(slots, fits))

    def trials_wanted(self, spec: StudySpec, trials: Collection[TrialProgress]) -> int:
        """New trials to start now: up to ``trial_groups`` in flight; and under racing, while
        the trials in flight have fewer folds ready than slots are free, as many more as fill
        the rest with their first ``min_folds`` folds. Without racing every trial runs all its
        folds at once, so ``trial_groups`` trials fill the slots."""
        groups = spec.parallel.trial_groups - len(trials)
        wave = _wave(spec)
        if wave is None:
            return max(0, groups)
        free = self.slots - len(self.folds)
        ready = len(folds_to_start(trials, folds=spec.fold_count, min_folds=wave, free=free))
        fill = -(-(free - ready) // min(wave, spec.fold_count))
        return max(0, groups, fill)

    async def start(self, context: StudyContext, trials: Iterable[TrialProgress]) -> None:
        """Give free slots to the folds of ``trials`` that may start, oldest trial first, as
        far as the cluster's share allows; say why in ``waiting`` when no alive node can run a
        fold, when ready folds wait with nothing running, or when Ray has not placed a fold's
        workers."""
        spec = context.spec
        free = self.slots - len(self.folds)
        ready = folds_to_start(trials, folds=spec.fold_count, min_folds=_wave(spec), free=free)
        allowed = len(ready)
        if self.share is not None:
            allowed = self.share.grant(self.study_id, running=len(self.folds), ready=len(ready))
        starting = ready[:allowed]
        runs = []
        if starting:  # one transaction for every fold starting
            folds = [(trial.handle.id, fold) for trial, fold in starting]
            runs = await self.store.start_fold_runs(self.study_id, folds)
        for (trial, fold), run in zip(starting, runs, strict=True):
            fold_task = FoldTask(
                context, trial.handle, fold, on_training=self._training, first_run=run
            )
            task = asyncio.create_task(fold_task.run(), name=f"fold-{fold}")
            task.add_done_callback(lambda _t: self.wake())
            trial.running[fold] = fold_task
            self.folds[task] = (trial, fold_task)
        self.count_time()
        waiting = None
        if self.share is not None and (ready or self.folds):
            waiting = self.share.unrunnable(self.study_id)
        if waiting is None and self.share is not None and allowed < len(ready) and not self.folds:
            waiting = self.share.explain(self.study_id)
        if waiting is None:
            waiting = await self._placement_waiting()
        now = time.monotonic()
        if self.note.due(waiting, now):
            self.note.written(waiting, now)
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

    def ended(self) -> list[tuple[TrialProgress, FoldTask, FoldRun]]:
        """The fold runs that ended since the last call, taken out of their slots."""
        done = []
        for task in [t for t in self.folds if t.done()]:
            trial, fold_task = self.folds.pop(task)
            trial.running.pop(fold_task.fold, None)
            done.append((trial, fold_task, task))
        return done

    def any_ended(self) -> bool:
        return any(task.done() for task in self.folds)

    def _training(self, started: bool) -> None:
        """A fold run started or stopped training: count the time until now, then the new
        number of training runs."""
        self.training += 1 if started else -1
        self.count_time()

    def count_time(self) -> None:
        """Add the time since the last count to the busy and idle slot-seconds: a slot is busy
        while its fold run trains (not while it waits for workers or for the database)."""
        busy, idle = self.meter.update(self.training)
        FOLD_SLOT_SECONDS.labels("busy").inc(busy)
        FOLD_SLOT_SECONDS.labels("idle").inc(idle)

    async def cancel_all(self) -> list[FoldTask]:
        """Cancel every running fold run and wait for them: their fold tasks."""
        running = list(self.folds.items())
        for task, _ in running:
            if not task.cancelling():
                task.cancel()
        await asyncio.gather(*(task for task, _ in running), return_exceptions=True)
        self.folds.clear()
        return [fold_task for _, (_, fold_task) in running]
