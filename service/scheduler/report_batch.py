"""The scheduler's write-behind lane for what fold runs report as they train: epoch reports,
checkpoint and model records, placements and warnings, written in batches.

Every ``tick_seconds`` whatever came in is written in one transaction of its own connection (a
group commit): the lease is checked once for the batch (``SchedulerLease.fence``), every row is
inserted or updated in bulk, and each study it touched gets one new revision. The control path
(a fold's end, a verdict, the next trial, a fold's start) has its own connections and never
waits behind a batch; a fold's end takes that run's reports still waiting into its own
transaction, so a fold end is never stored without the epochs before it.

Durability: a SIGKILL may lose the reports that came in since the last batch committed (at
most ``tick_seconds`` of them, plus the batch being written), never a fold end, a verdict or a
trial: the killed service's fold runs are marked lost at the next start and run again, and
report their epochs anew. A scheduler that lost the lease writes nothing: its batch's fence
fails, and the batch is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from foldwise.service.db import fold_runs as fold_repo
from foldwise.service.db import studies as study_repo
from foldwise.service.db import study_warnings as warning_repo
from foldwise.service.db.engine import SessionRunner
from foldwise.service.metrics import REPORT_BATCH_ROWS, REPORT_WRITE_SECONDS
from foldwise.service.scheduler.lease import LeaseLost
from foldwise.trainers.report import ArtifactKind, EpochReport, FoldWarning

log = logging.getLogger(__name__)

RETRY_SECONDS = (0.1, 0.5, 1.0, 2.0, 5.0)
"""Waits before a batch the database refused (not the lease) is tried again; then every 5 s."""


@dataclass
class FoldReport:
    """One thing a fold run reported: an epoch, an artifact (``kind``, after ``epoch``), its
    placement, or a warning of the study (``trial``: the trial number it came from). A
    refit's attempts are runs too: their reports take the same path."""

    study_id: int
    run_id: int
    epoch: EpochReport | None = None
    artifact: tuple[ArtifactKind, int] | None = None
    placement: list[dict[str, Any]] | None = None
    warning: FoldWarning | None = None
    trial: int | None = None
    came_at: float = field(default_factory=time.monotonic)


def write_reports(
    session: Session, reports: Iterable[FoldReport], *, alive: set[int] | None = None
) -> set[int]:
    """Store ``reports`` in the caller's transaction, in bulk; the studies whose trials changed
    (a warning: its trials' answer shows it). Reports of fold runs that are gone (deleted with
    their study) are dropped; ``alive``: the runs known to be stored (not read again)."""
    reports = list(reports)
    if not reports:
        return set()
    if alive is None:
        alive = fold_repo.existing_fold_runs(session, {r.run_id for r in reports})
    checkpoints: dict[int, int] = {}
    models: set[int] = set()
    placements: dict[int, list[dict[str, Any]]] = {}
    epochs: list[tuple[int, EpochReport]] = []
    trials_changed: set[int] = set()
    for report in reports:
        if report.warning is not None:  # of the study: it outlives the run
            warning = report.warning
            if warning_repo.record_warning(
                session, report.study_id, str(warning.kind), warning.message, report.trial
            ):
                trials_changed.add(report.study_id)
        if report.run_id not in alive:
            continue
        if report.epoch is not None:
            epochs.append((report.run_id, report.epoch))
        if report.artifact is not None:
            kind, epoch = report.artifact
            if kind is ArtifactKind.MODEL:
                models.add(report.run_id)
            else:
                checkpoints[report.run_id] = max(epoch, checkpoints.get(report.run_id, 0))
        if report.placement is not None:
            placements.setdefault(report.run_id, report.placement)
    fold_repo.record_run_files(session, checkpoints, models)
    fold_repo.record_placements(session, placements)
    fold_repo.record_epochs(session, epochs)
    return trials_changed


class ReportBatcher:
    """Collects fold runs' reports (``add``, which never waits) and writes them every
    ``tick_seconds`` on ``db`` (its own connection), fenced by ``fence``."""

    def __init__(
        self,
        db: SessionRunner,
        *,
        fence: Callable[[Session], None],
        tick_seconds: float = 0.2,
    ) -> None:
        self.db = db
        self.fence = fence
        self.tick_seconds = tick_seconds
        self._pending: list[FoldReport] = []
        self._in_flight: dict[int, asyncio.Future[None]] = {}
        """The batch being written, by each fold run it holds reports of."""
        self._arrived = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self.lease_lost = False
        """A batch was refused because this instance no longer holds the lease."""

    def add(self, report: FoldReport) -> None:
        """Queue a report for the next batch."""
        self._pending.append(report)
        loop = asyncio.get_running_loop()
        if self._task is None or self._task.done() or self._task.get_loop() is not loop:
            self._arrived = asyncio.Event()  # a new event loop (a test's asyncio.run) binds anew
            self._task = loop.create_task(self._run(), name="reports")
        self._arrived.set()

    async def take(self, run_id: int) -> list[FoldReport]:
        """The reports of fold run ``run_id`` not yet written, taken out of the queue (its end
        writes them in its own transaction), once a batch being written with some of its
        reports has committed."""
        in_flight = self._in_flight.get(run_id)
        if in_flight is not None:
            with contextlib.suppress(Exception):
                await asyncio.shield(in_flight)
        taken = [r for r in self._pending if r.run_id == run_id]
        if taken:
            self._pending = [r for r in self._pending if r.run_id != run_id]
        return taken

    async def flush(self) -> None:
        """Write everything queued now (a clean stop); a lost lease drops it."""
        while self._in_flight:
            with contextlib.suppress(Exception):
                await asyncio.shield(next(iter(self._in_flight.values())))
        if self._pending:
            batch, self._pending = self._pending, []
            with contextlib.suppress(LeaseLost):
                await self._write(batch)

    async def close(self) -> None:
        """Write what is queued (a clean stop), then stop the batch task."""
        self._closing = True
        self._arrived.set()
        if self._task is not None:
            with contextlib.suppress(Exception):
                await self._task
            self._task = None
        await self.flush()
        self._closing = False

    @property
    def pending(self) -> int:
        return len(self._pending)

    async def _run(self) -> None:
        failures = 0
        while not (self._closing and not self._pending):
            await self._arrived.wait()
            if not self._closing:
                await asyncio.sleep(self.tick_seconds)
            self._arrived.clear()
            batch, self._pending = self._pending, []
            if not batch:
                continue
            try:
                await self._write(batch)
                failures = 0
            except LeaseLost:
                self.lease_lost = True
                log.warning("dropped %d fold reports: the scheduler lease is lost", len(batch))
                if self._closing:
                    return
            except OperationalError as exc:  # the database is away or refused: keep the batch
                if self._closing:
                    raise
                wait = RETRY_SECONDS[min(failures, len(RETRY_SECONDS) - 1)]
                failures += 1
                log.warning(
                    "could not write %d fold reports (%s): again in %g s", len(batch), exc, wait
                )
                self._pending[:0] = batch
                self._arrived.set()
                await asyncio.sleep(wait)
            except Exception:  # a batch the database will never take: say so, keep going
                log.exception("dropped %d fold reports the database refused", len(batch))

    async def _write(self, batch: list[FoldReport]) -> None:
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        for report in batch:
            self._in_flight[report.run_id] = done
        try:
            await self.db.write(lambda session: self._write_batch(session, batch))
            done.set_result(None)
        except asyncio.CancelledError:
            done.cancel()
            raise
        except Exception as exc:
            done.set_exception(exc)
            done.exception()  # retrieved: whoever waits on it only waits
            raise
        finally:
            for report in batch:
                if self._in_flight.get(report.run_id) is done:
                    del self._in_flight[report.run_id]
        now = time.monotonic()
        REPORT_BATCH_ROWS.observe(len(batch))
        for report in batch:
            REPORT_WRITE_SECONDS.observe(now - report.came_at)

    def _write_batch(self, session: Session, batch: list[FoldReport]) -> None:
        self.fence(session)
        trials_changed = write_reports(session, batch)
        study_repo.touch_studies(session, {r.study_id for r in batch}, trials=trials_changed)
