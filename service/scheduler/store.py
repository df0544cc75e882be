"""The scheduler's database reads and writes, each its own short transaction off the event loop.

The scheduler is the only writer of trial and fold state (DESIGN §7); every state change it
makes goes through here, so the database is always the whole truth a restart needs. Every write
also bumps the study's revision in the same transaction, so readers know their copy is old.

Two lanes: the control path (fold starts and ends, verdicts, trials, a study's state) writes at
once on the store's connections; what fold runs report while they train (epochs, checkpoints,
placements, warnings) is queued and written in batches on connections of its own
(``report_batch``), so the control path never waits behind it.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy.orm import Session

from foldwise.optimizers.base import Observation
from foldwise.pruners.dominance import FrontMember
from foldwise.pruners.racing import Incumbent
from foldwise.schemas import FoldStatus, StudyStatus, TrialStatus
from foldwise.service.db import fold_runs as fold_repo
from foldwise.service.db import pareto as pareto_repo
from foldwise.service.db import studies as study_repo
from foldwise.service.db import trials as trial_repo
from foldwise.service.db import warm_start as warm_repo
from foldwise.service.db.engine import SessionRunner
from foldwise.service.db.models import StudyRow, utcnow
from foldwise.service.db.trials import STOPPED_ERROR
from foldwise.service.metrics import FOLDS_ENDED, TRIALS_ENDED
from foldwise.service.scheduler.report_batch import FoldReport, ReportBatcher, write_reports
from foldwise.service.scheduler.stop_flags import StopFlags
from foldwise.spec import Constraint, StudySpec
from foldwise.trainers.report import ArtifactKind, EpochReport, FoldWarning

T = TypeVar("T")
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrialHandle:
    id: int
    number: int
    params: dict[str, Any]


@dataclass(frozen=True)
class FoldEnd:
    """How fold run ``run_id`` ended: its ``status`` and ``finish_fold_run``'s ``fields``."""

    run_id: int
    status: FoldStatus
    fields: dict[str, Any]


@dataclass(frozen=True)
class StudyStart:
    spec: StudySpec
    unfinished: list[TrialHandle]
    started_at: datetime
    code_hash: str | None = None
    """The snapshot of the task's package the study runs (``service.task_code``)."""


class SchedulerStore:
    """`db` runs each unit of work in its own transaction (the scheduler's own connections);
    `fence` starts every write's transaction (``SchedulerLease.fence``: ``LeaseLost`` when
    this instance no longer schedules); `artifact_dir`: the artifact store's location (a
    directory or an fsspec URL), None when fold runs keep no checkpoints or models.
    `reports_db` writes the batches of fold reports every `report_tick_seconds` (``db`` when
    not given)."""

    def __init__(
        self,
        db: SessionRunner,
        *,
        fence: Callable[[Session], None] | None = None,
        artifact_dir: str | os.PathLike[str] | None = None,
        reports_db: SessionRunner | None = None,
        report_tick_seconds: float = 0.2,
    ) -> None:
        self._db = db
        self.stop_flags = StopFlags(db)
        self._fence = fence or (lambda _session: None)
        self.artifact_dir = None if artifact_dir is None else os.fspath(artifact_dir)
        self.reports = ReportBatcher(
            reports_db or db, fence=self._fence, tick_seconds=report_tick_seconds
        )

    async def write(
        self, study_id: int, work: Callable[[Session], T], *, trials: bool = True
    ) -> T:
        """``work`` in one transaction that also marks the study changed; ``trials=False``
        when only a fold run or its epochs change."""

        def changed(session: Session) -> T:
            self._fence(session)
            result = work(session)
            study_repo.touch_study(session, study_id, trials=trials)
            return result

        return await self._db.write(changed)

    async def read(self, work: Callable[[Session], T]) -> T:
        """``work`` in a read-only transaction."""
        return await self._db.read(work)

    async def active_study_ids(self) -> list[int]:
        return await self._db.read(study_repo.active_study_ids)

    async def begin_study(self, study_id: int) -> StudyStart | None:
        """Mark the study running, mark fold runs a dead service left as lost, and return the
        stored spec with the trials still to finish; None when the study is gone, or was asked
        to stop before it ran (it is then marked stopped, its open trials closed)."""

        def work(session: Session) -> StudyStart | None:
            study = session.get(StudyRow, study_id)
            if study is None:
                return None
            # first: a fold the dead service ran was lost with it, even if the study now stops
            fold_repo.mark_lost_fold_runs(session, study_id)
            if study.stop_requested:
                _finish_study(session, study, StudyStatus.STOPPED, None)
                return None
            study_repo.mark_study(session, study, StudyStatus.RUNNING)
            study.waiting = None  # what a previous scheduler said; this one says it anew
            unfinished = trial_repo.unfinished_trials(session, study_id)
            handles = [TrialHandle(t.id, t.number, t.params) for t in unfinished]
            started_at = study.started_at or utcnow()
            return StudyStart(study.spec, handles, started_at, study.code_hash)

        return await self.write(study_id, work)

    async def stop_requested(self, study_id: int) -> bool:
        """Whether the study was asked to stop, or is gone (``stop_flags``: one read serves
        every study that asks within a fraction of a poll)."""
        return await self.stop_flags.requested(study_id)

    async def history(
        self, study_id: int, constraints: Sequence[Constraint] = ()
    ) -> tuple[list[Observation], int]:
        """Finished trials as observations (``constraints``: the study's, which say how far
        each trial broke them), and how many trials the study has in all."""

        def work(session: Session) -> tuple[list[Observation], int]:
            rows = trial_repo.finished_trials(session, study_id)
            observations = [_observation(row, constraints=constraints) for row in rows]
            return observations, trial_repo.count_trials(session, study_id)

        return await self._db.read(work)

    async def warm_start(self, study_id: int) -> list[Observation]:
        """The prior observations the study's warm start copied in at submit, in their order:
        the optimizer is told them before the study's own trials."""

        def work(session: Session) -> list[Observation]:
            return [
                _observation(o, extra={"warm_start": {"study": o.study_id, "trial": o.number}})
                for o in warm_repo.observations(session, study_id)
            ]

        return await self._db.read(work)

    async def create_trials(
        self, study_id: int, configs: list[dict[str, Any]], room: int
    ) -> list[TrialHandle]:
        """Create trials for ``configs``, no more than ``room`` (what the budget leaves: the
        scheduler alone creates trials, so it counts them itself)."""

        def work(session: Session) -> list[TrialHandle]:
            chosen = configs[: max(room, 0)]
            created = trial_repo.create_trials(session, study_id, chosen)
            return [
                TrialHandle(trial_id, number, params)
                for (trial_id, number), params in zip(created, chosen, strict=True)
            ]

        return await self.write(study_id, work)

    async def finish_trial(
        self,
        study_id: int,
        trial_id: int,
        status: TrialStatus,
        *,
        constraints: Sequence[Constraint] = (),
        fold_ends: Sequence[FoldEnd] = (),
        **fields: Any,
    ) -> Observation | None:
        """Record how the trial ended, after ``fold_ends`` (the fold ends taken in and not yet
        written, the one that decided it among them) in the same transaction; any of its fold
        runs still open are closed with it. The trial as the optimizer sees it now
        (``constraints``: the study's), or None when it is gone."""
        end_folds = await self._fold_ends_work(study_id, fold_ends)

        def work(session: Session) -> tuple[int, Observation] | None:
            end_folds(session)
            trial = trial_repo.end_trial(session, trial_id, status, **fields)
            if trial is None:  # deleted with its study while the trial was ending
                return None
            fold_repo.close_open_fold_runs(session, [trial_id])
            return trial.number, _observation(trial, constraints=constraints)

        ended = await self.write(study_id, work)
        for fold_end in fold_ends:
            FOLDS_ENDED.labels(fold_end.status.value).inc()
        if ended is None:
            return None
        TRIALS_ENDED.labels(status.value).inc()
        outcome = fields.get("error") or f"value {fields.get('value')}"
        log.info("study %s trial %s %s: %s", study_id, ended[0], status, outcome)
        return ended[1]

    async def finish_study(
        self, study_id: int, status: StudyStatus, error: str | None = None
    ) -> None:
        """Record how the study ended; trials still open fail with the reason, so nothing
        stays running inside a finished study."""

        def work(session: Session) -> None:
            study = session.get(StudyRow, study_id)
            if study is not None:
                _finish_study(session, study, status, error)

        await self.write(study_id, work)
        log.info("study %s %s%s", study_id, status, f": {error}" if error else "")

    async def deletion_requests(self) -> list[int]:
        return await self._db.read(study_repo.deletion_requests)

    async def delete_study(self, study_id: int) -> None:
        """Delete the study's rows (its deletion was asked for and it no longer runs)."""

        def work(session: Session) -> None:
            self._fence(session)
            study = session.get(StudyRow, study_id)
            if study is not None:
                study_repo.delete_study(session, study)

        await self._db.write(work)

    async def outcome(self, study_id: int) -> tuple[StudyStatus, str | None]:
        """How a study that has run out of trials to run ended: failed, with the error seen
        most often, when every trial it finished failed; else completed."""

        def work(session: Session) -> tuple[StudyStatus, str | None]:
            counts = study_repo.count_trials_by_status(session, [study_id])[study_id]
            failed = counts.get(TrialStatus.FAILED, 0)
            if failed == 0 or failed < sum(counts.values()):
                return StudyStatus.COMPLETED, None
            error = trial_repo.commonest_error(session, study_id)
            return StudyStatus.FAILED, f"all {failed} trials failed; most often: {error}"

        return await self._db.read(work)

    async def recent_errors(self, study_id: int, count: int) -> list[str | None]:
        """The errors of the last ``count`` finished trials (None for one that did not fail),
        their fold aside, oldest first: what the study runner keeps up to date from there."""

        def work(session: Session) -> list[str | None]:
            last = trial_repo.last_finished(session, study_id, count)
            return [
                without_fold(t.error or "") if t.status is TrialStatus.FAILED else None
                for t in reversed(last)
            ]

        return await self._db.read(work)

    async def incumbent(self, study_id: int) -> Incumbent | None:
        """The study's best completed trial with its fold values (racing's reference)."""

        def work(session: Session) -> Incumbent | None:
            study = session.get(StudyRow, study_id)
            best = None if study is None else study_repo.best_trials(session, [study])
            if not best:
                return None
            trial = best[study_id]
            values = fold_repo.completed_fold_values(session, trial.id)
            return Incumbent(trial.number, values)

        return await self._db.read(work)

    async def front(self, study_id: int) -> list[FrontMember]:
        """The study's Pareto front with each member's fold metrics (racing by dominance's
        reference)."""

        def work(session: Session) -> list[FrontMember]:
            study = session.get(StudyRow, study_id)
            if study is None:
                return []
            return [
                FrontMember(row.number, fold_repo.completed_fold_metrics(session, row.id))
                for row in pareto_repo.pareto_front(session, study)
            ]

        return await self._db.read(work)

    async def fold_curves(self, study_id: int, metric: str) -> list[tuple[int, bool, list]]:
        """(fold, finished, ``metric`` per epoch) of the study's ended fold runs (pruning's
        references); ``finished``: it trained to its end rather than being stopped."""

        def work(session: Session) -> list[tuple[int, bool, list]]:
            curves = fold_repo.ended_fold_curves(session, study_id, metric)
            return [(f, s is FoldStatus.COMPLETED, v) for f, s, v in curves]

        return await self._db.read(work)

    async def completed_fold_values(self, trial_id: int) -> dict[int, float]:
        return await self._db.read(lambda s: fold_repo.completed_fold_values(s, trial_id))

    async def finished_trials_fold_values(self, study_id: int) -> dict[int, dict[int, float]]:
        return await self._db.read(lambda s: fold_repo.finished_trials_fold_values(s, study_id))

    async def completed_fold_metrics(self, trial_id: int) -> dict[int, dict[str, float]]:
        return await self._db.read(lambda s: fold_repo.completed_fold_metrics(s, trial_id))

    async def start_fold_run(self, study_id: int, trial_id: int, fold: int) -> tuple[int, int]:
        """Create the next attempt of a fold; returns (fold run id, attempt)."""
        [started] = await self.start_fold_runs(study_id, [(trial_id, fold)])
        return started

    async def start_fold_runs(
        self, study_id: int, folds: list[tuple[int, int]]
    ) -> list[tuple[int, int]]:
        """Create the next attempt of each (trial id, fold), in one transaction: their (fold
        run id, attempt)."""
        return await self.write(
            study_id, lambda s: fold_repo.start_fold_runs(s, folds), trials=False
        )

    def record_epoch(self, study_id: int, fold_run_id: int, report: EpochReport) -> None:
        """Queue an epoch's report for the next batch (``report_batch``)."""
        self.reports.add(FoldReport(study_id, fold_run_id, epoch=report))

    def record_warning(
        self, study_id: int, trial: int | None, warning: FoldWarning, *, fold_run_id: int = 0
    ) -> None:
        """A run (``fold_run_id``: a fold's or a refit's) of trial number ``trial`` warned of
        something suspect: a warning of the study (``db.study_warnings``), seen by every reader
        of it, in the next batch."""
        self.reports.add(FoldReport(study_id, fold_run_id, warning=warning, trial=trial))

    def record_artifact(
        self, study_id: int, fold_run_id: int, kind: ArtifactKind, epoch: int
    ) -> None:
        """The fold run saved a checkpoint after ``epoch``, or its model (in the store)."""
        self.reports.add(FoldReport(study_id, fold_run_id, artifact=(kind, epoch)))

    def record_placement(
        self, study_id: int, fold_run_id: int, placement: list[dict[str, Any]]
    ) -> None:
        self.reports.add(FoldReport(study_id, fold_run_id, placement=placement))

    async def flush_reports(self) -> None:
        """Write the queued fold reports now."""
        await self.reports.flush()

    async def set_waiting(self, study_id: int, reason: str | None) -> None:
        """Say why the study's ready folds do not start (None: they do)."""

        def work(session: Session) -> None:
            study = session.get(StudyRow, study_id)
            if study is not None:
                study.waiting = reason

        await self.write(study_id, work)  # the study's own answer shows it: a new revision

    async def close_fold_runs(
        self, study_id: int, fold_run_ids: list[int], status: FoldStatus, error: str | None
    ) -> None:
        """End the fold runs among these still running with ``status`` (cut short)."""
        if not fold_run_ids:
            return
        await self.write(
            study_id,
            lambda s: fold_repo.close_fold_runs(s, fold_run_ids, status, error),
            trials=False,
        )

    async def finish_fold_run(
        self, study_id: int, fold_run_id: int, status: FoldStatus, **fields: Any
    ) -> None:
        """Record how a run ended, with its reports not yet written, in one transaction: a run's
        end is never stored without the epochs before it."""
        await self.finish_fold_runs(study_id, [FoldEnd(fold_run_id, status, fields)])

    async def finish_fold_runs(self, study_id: int, fold_ends: Sequence[FoldEnd]) -> None:
        """``finish_fold_run`` of each of ``fold_ends``, in one transaction."""
        if not fold_ends:
            return
        work = await self._fold_ends_work(study_id, fold_ends)
        await self.write(study_id, work, trials=False)
        for fold_end in fold_ends:
            FOLDS_ENDED.labels(fold_end.status.value).inc()

    async def _fold_ends_work(
        self, study_id: int, fold_ends: Sequence[FoldEnd]
    ) -> Callable[[Session], None]:
        """What writes ``fold_ends`` in a transaction: first their runs' reports still queued
        (taken out of the queue now), then their ends."""
        if not fold_ends:
            return lambda _session: None
        reports = [r for end in fold_ends for r in await self.reports.take(end.run_id)]
        ran = {end.run_id for end in fold_ends}  # the scheduler deletes no run not ended

        def work(session: Session) -> None:
            if write_reports(session, reports, alive=ran):  # a warning: the trials show it
                study_repo.touch_study(session, study_id)
            for end in fold_ends:
                fold_repo.finish_fold_run(session, end.run_id, end.status, **end.fields)

        return work


def _finish_study(
    session: Session, study: StudyRow, status: StudyStatus, error: str | None
) -> None:
    """Mark the study ended; trials still open fail with the reason (a stop's own, which a warm
    start knows), so nothing stays running inside a finished study."""
    study_repo.mark_study(session, study, status, error=error)
    ended = STOPPED_ERROR if status is StudyStatus.STOPPED else None
    reason = error or ended or f"the study ended ({status}) while this trial ran"
    closed = trial_repo.fail_unfinished_trials(session, study.id, error=reason)
    fold_repo.close_open_fold_runs(session, closed)


def without_fold(error: str) -> str:
    """A trial's error without the fold it happened in: the same bug fails whichever fold."""
    return re.sub(r"^fold \d+: ", "", error)


def _observation(
    row: Any, extra: dict[str, Any] | None = None, constraints: Sequence[Constraint] = ()
) -> Observation:
    """A finished trial, the study's own or one a warm start copied, as the optimizer sees it:
    with several objectives, each one's value and standard error; with constraints, its gap
    to each limit."""
    several = getattr(row, "objective_values", None)
    held = getattr(row, "constraint_values", None)
    return Observation(
        params=row.params,
        value=row.value,
        std_error=row.std_error,
        failed=row.status is TrialStatus.FAILED,
        folds=row.value_folds,
        pruned=row.status is TrialStatus.PRUNED,
        extra=extra or {},
        values=None if several is None else tuple(v[0] for v in several),
        std_errors=None if several is None else tuple(v[1] for v in several),
        constraint_gaps=()
        if held is None
        else tuple(c.gap(v) for c, v in zip(constraints, held, strict=True)),
    )
