"""The scheduler's batches of fold reports on each backend: written together, fenced by the
lease (a deposed scheduler's batch in flight writes nothing), taken into a fold's end, and
never in the control path's way."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator

import psycopg
import pytest
from sqlalchemy import func, select

from foldwise.schemas import FoldStatus
from foldwise.service.db import fold_runs as fold_repo
from foldwise.service.db import studies as study_repo
from foldwise.service.db import trials as trial_repo
from foldwise.service.db.engine import SessionRunner
from foldwise.service.db.models import EpochMetricRow, FoldRunRow, StudyRow
from foldwise.service.scheduler.lease import LeaseLost, SchedulerLease
from foldwise.service.scheduler.store import SchedulerStore
from foldwise.spec import StudySpec
from foldwise.trainers.report import ArtifactKind, EpochReport, FoldWarning, WarningKind
from tests.databases import bring_to_head
from tests.live_service import postgres_database
from tests.service.study_specs import study_spec


def _fold_runs(db: SessionRunner, count: int) -> tuple[int, list[int]]:
    """A study with one trial and ``count`` fold runs: (study id, run ids)."""

    def work(session) -> tuple[int, list[int]]:
        study = study_repo.create_study(session, StudySpec.model_validate(study_spec()))
        session.flush()
        trial = trial_repo.create_trial(session, study.id, {"lr": 0.1}, number=0)
        session.flush()
        runs = [fold_repo.start_fold_run(session, trial.id, fold).id for fold in range(count)]
        return study.id, runs

    return db._write(work)


def _stored(db: SessionRunner) -> tuple[int, int]:
    """(epoch rows, revision of the first study)."""

    def work(session) -> tuple[int, int]:
        epochs = session.scalar(select(func.count()).select_from(EpochMetricRow))
        return epochs, session.scalar(select(StudyRow.revision).order_by(StudyRow.id).limit(1))

    return db._read(work)


def _report(epoch: int) -> EpochReport:
    return EpochReport(epoch, {"val_loss": 1.0 / epoch, "epoch_seconds": 0.1})


def test_a_batch_writes_every_report_in_one_transaction_with_one_new_revision(lanes) -> None:
    control, reports = lanes
    study_id, runs = _fold_runs(control, 3)
    _, revision = _stored(control)
    store = SchedulerStore(control, reports_db=reports, report_tick_seconds=0.3)

    async def scenario() -> None:
        for run in runs:
            store.record_placement(study_id, run, [{"rank": 0, "node_id": "n"}])
            for epoch in (1, 2):
                store.record_epoch(study_id, run, _report(epoch))
                store.record_artifact(study_id, run, ArtifactKind.CHECKPOINT, epoch)
            store.record_epoch(study_id, run, _report(2))  # the same epoch again: kept once
        store.record_artifact(study_id, runs[0], ArtifactKind.MODEL, 2)
        store.record_warning(study_id, 0, FoldWarning(WarningKind.TASK, "odd"), fold_run_id=1)
        await asyncio.sleep(0.8)

    asyncio.run(scenario())
    epochs, revision_after = _stored(control)
    assert epochs == 6 and revision_after == revision + 1
    stored = control._read(lambda s: s.scalars(select(FoldRunRow).order_by(FoldRunRow.id)).all())
    assert [r.checkpoint_epoch for r in stored] == [2, 2, 2]
    assert [r.model_saved for r in stored] == [True, False, False]
    assert all(r.placement == [{"rank": 0, "node_id": "n"}] for r in stored)
    study = control._read(lambda s: s.get(StudyRow, study_id))
    assert [w["message"] for w in study.warnings] == ["odd"]


def test_a_fold_end_takes_its_runs_reports_into_its_own_transaction(lanes) -> None:
    control, reports = lanes
    study_id, [run, other] = _fold_runs(control, 2)
    store = SchedulerStore(control, reports_db=reports, report_tick_seconds=30)

    async def scenario() -> None:
        for epoch in (1, 2, 3):
            store.record_epoch(study_id, run, _report(epoch))
            store.record_epoch(study_id, other, _report(epoch))
        await store.finish_fold_run(study_id, run, FoldStatus.COMPLETED, value=0.3)
        assert store.reports.pending == 3  # the other run's wait for their batch

    asyncio.run(scenario())

    def read(session):
        query = select(EpochMetricRow.fold_run_id, func.count()).group_by(
            EpochMetricRow.fold_run_id
        )
        return dict(session.execute(query).all()), session.get(FoldRunRow, run).status

    counts, status = control._read(read)
    assert counts == {run: 3} and status is FoldStatus.COMPLETED


def test_a_deposed_scheduler_writes_nothing_of_its_batches_in_flight(lanes) -> None:
    control, reports = lanes
    study_id, [run] = _fold_runs(control, 1)

    async def scenario() -> None:
        first = SchedulerLease(control, ttl_seconds=0.4, holder="first")
        second = SchedulerLease(reports, ttl_seconds=30, holder="second")
        assert await first.hold()
        store = SchedulerStore(
            control, fence=first.fence, reports_db=reports, report_tick_seconds=0.1
        )
        store.record_epoch(study_id, run, _report(1))
        await asyncio.sleep(0.3)  # written while first holds the lease
        assert _stored(control)[0] == 1
        store.reports.tick_seconds = 1.0
        store.record_epoch(study_id, run, _report(2))  # in the batch that waits its tick
        await asyncio.sleep(0.2)
        await asyncio.sleep(0.4)  # first pauses past its lease: second takes it over
        assert await second.hold()
        await asyncio.sleep(1.0)  # first's batch is refused by the fence
        assert store.reports.lease_lost
        store.record_epoch(study_id, run, _report(3))
        with pytest.raises(LeaseLost):  # and so is its fold's end, with what it held back
            await store.finish_fold_run(study_id, run, FoldStatus.COMPLETED, value=0.1)
        await store.reports.close()

    _, revision = _stored(control)
    asyncio.run(scenario())
    epochs, revision_after = _stored(control)
    assert epochs == 1 and revision_after == revision + 1
    assert control._read(lambda s: s.get(FoldRunRow, run).status) is FoldStatus.RUNNING


@pytest.fixture
def postgres_lanes() -> Iterator[tuple[SessionRunner, SessionRunner, str]]:
    """The two lanes on PostgreSQL alone (SQLite's writers take turns on its one lock, so
    there is nothing to keep apart there), with the database's URL."""
    with postgres_database() as url:
        bring_to_head(url)
        control = SessionRunner(url, 2, lane="scheduler")
        reports = SessionRunner(url, 1, lane="reports")
        yield control, reports, url
        for runner in (control, reports):
            runner.engine.dispose()


@pytest.mark.postgres
def test_the_control_path_does_not_wait_behind_a_batch_that_cannot_commit(
    postgres_lanes,
) -> None:
    control, reports, database_url = postgres_lanes
    study_id, [stuck, _free] = _fold_runs(control, 2)
    store = SchedulerStore(control, reports_db=reports, report_tick_seconds=0.05)
    dsn = database_url.replace("postgresql+psycopg", "postgresql")
    locked, release = threading.Event(), threading.Event()

    def hold_the_table() -> None:  # another client holds epoch_metrics: inserts wait for it
        with psycopg.connect(dsn) as connection, connection.transaction():
            connection.execute("LOCK TABLE epoch_metrics IN EXCLUSIVE MODE")
            locked.set()
            release.wait(30)

    holder = threading.Thread(target=hold_the_table)
    holder.start()
    locked.wait(10)
    try:

        async def scenario() -> float:
            store.record_epoch(study_id, stuck, _report(1))
            await asyncio.sleep(0.3)  # its batch is in flight, waiting for the lock
            assert store.reports.pending == 0
            started = time.perf_counter()
            trial_id = control._read(lambda s: s.get(FoldRunRow, stuck).trial_id)
            run_id, _ = await store.start_fold_run(study_id, trial_id, 0)
            await store.finish_fold_run(study_id, run_id, FoldStatus.COMPLETED, value=0.2)
            took = time.perf_counter() - started
            release.set()
            await store.reports.close()
            return took

        took = asyncio.run(scenario())
    finally:
        release.set()
        holder.join()
    assert took < 2.0  # a fold started and ended while the batch waited
    assert _stored(control)[0] == 1  # and the batch went in once the lock went
