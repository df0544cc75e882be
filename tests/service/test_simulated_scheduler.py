"""The scheduler's loop on the simulated cluster (``service.executor.simulated``), on each
backend: what it stores of a study it runs, in how many transactions, how busy it says its
slots were, and what it does with runs that fail."""

from __future__ import annotations

import asyncio
import time

from sqlalchemy import event, func, select

from foldwise.schemas import FoldStatus, StudyStatus, TrialStatus
from foldwise.service.db import studies as study_repo
from foldwise.service.db.engine import SessionRunner
from foldwise.service.db.models import EpochMetricRow, FoldRunRow, StudyRow, TrialRow
from foldwise.service.executor.simulated import SimulatedCluster, SimulatedExecutor
from foldwise.service.metrics import FOLD_SLOT_SECONDS
from foldwise.service.scheduler.lease import SchedulerLease
from foldwise.service.scheduler.scheduler import Scheduler
from foldwise.service.scheduler.store import SchedulerStore
from foldwise.spec import StudySpec
from tests.service.study_specs import study_spec


def _spec(trials: int = 6, epochs: int = 3, folds: int = 2, **overrides) -> StudySpec:
    document = study_spec(
        space={"x": {"type": "float", "low": 0.0, "high": 1.0}},
        budget={"trials": trials},
        parallel={"trial_groups": 2, "folds": folds, "workers_per_fold": 1},
        trainer={"task": "digits_mlp", "epochs": epochs, "batch_size": 64},
        **overrides,
    )
    return StudySpec.model_validate(document)


def _create_study(db: SessionRunner, spec: StudySpec) -> int:
    def work(session) -> int:
        study = study_repo.create_study(session, spec)
        session.flush()
        return study.id

    return db._write(work)


def _commits(runner: SessionRunner) -> list[int]:
    """A counter of the transactions ``runner``'s engine commits."""
    count = [0]
    event.listen(runner.engine, "commit", lambda _conn: count.__setitem__(0, count[0] + 1))
    return count


async def _run_to_end(
    lanes, cluster: SimulatedCluster, study_id: int, *, tmp_path, timeout: float = 60
) -> Scheduler:
    control, reports = lanes
    lease = SchedulerLease(control, ttl_seconds=10)
    store = SchedulerStore(
        control,
        fence=lease.fence,
        artifact_dir=tmp_path / "artifacts",
        reports_db=reports,
        report_tick_seconds=0.2,
    )
    executor = SimulatedExecutor(cluster)
    await executor.start()
    scheduler = Scheduler(store, executor, lease, poll_seconds=0.1)
    scheduler.start()
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status = await store.read(lambda s: s.get(StudyRow, study_id).status)
            if status in (StudyStatus.COMPLETED, StudyStatus.FAILED):
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError(f"the study did not end within {timeout} s")
    finally:
        await scheduler.close()
        await executor.shutdown()
    return scheduler


def test_a_study_runs_to_its_end_with_every_epoch_and_file_stored_in_batches(
    lanes, tmp_path
) -> None:
    control, reports = lanes
    study_id = _create_study(control, _spec(trials=6, epochs=3))
    report_commits = _commits(reports)
    cluster = SimulatedCluster(nodes=2, cpus_per_node=2, epoch_seconds=(0.1, 0.1))
    asyncio.run(_run_to_end(lanes, cluster, study_id, tmp_path=tmp_path))

    def read(session):
        trials = session.scalars(select(TrialRow).where(TrialRow.study_id == study_id)).all()
        runs = session.scalars(select(FoldRunRow)).all()
        epochs = session.scalar(select(func.count()).select_from(EpochMetricRow))
        return trials, runs, epochs, session.get(StudyRow, study_id)

    trials, runs, epochs, study = control._read(read)
    assert study.status is StudyStatus.COMPLETED
    assert [t.status for t in trials] == [TrialStatus.COMPLETED] * 6
    assert len(runs) == 12 and all(r.status is FoldStatus.COMPLETED for r in runs)
    assert epochs == 36  # every epoch of every fold run
    assert all(r.checkpoint_epoch == 3 and r.model_saved and r.placement for r in runs)
    # 36 epochs, 36 checkpoints, 12 models and 12 placements came in: written in far fewer
    # transactions than reports (those of a fold's end go with it, on the control lane)
    assert 0 < report_commits[0] < 96 / 3
    assert study.revision < 96


def test_slots_are_busy_while_their_runs_train_not_while_they_wait_for_workers(
    lanes, tmp_path
) -> None:
    control, _reports = lanes
    study_id = _create_study(control, _spec(trials=2, epochs=2))
    cluster = SimulatedCluster(
        nodes=1, cpus_per_node=4, epoch_seconds=(0.3, 0.3), placement_seconds=1.2
    )
    before = [FOLD_SLOT_SECONDS.labels(state)._value.get() for state in ("busy", "idle")]
    asyncio.run(_run_to_end(lanes, cluster, study_id, tmp_path=tmp_path))
    after = [FOLD_SLOT_SECONDS.labels(state)._value.get() for state in ("busy", "idle")]
    busy, idle = (a - b for a, b in zip(after, before, strict=True))
    assert busy > 0 and idle > 0
    # each of the 4 slots held a run for 1.2 s of placing and 0.6 s of training: a third busy,
    # where counting a slot busy from the run's start said nine tenths
    assert 0.15 < busy / (busy + idle) < 0.5


def test_runs_whose_workers_die_are_retried_and_runs_that_raise_fail_their_trial(
    lanes, tmp_path
) -> None:
    control, _reports = lanes
    study_id = _create_study(control, _spec(trials=8, epochs=2))
    cluster = SimulatedCluster(
        nodes=2, cpus_per_node=2, epoch_seconds=(0.05, 0.05), worker_death_rate=0.2, seed=4
    )
    asyncio.run(_run_to_end(lanes, cluster, study_id, tmp_path=tmp_path))

    def read(session):
        runs = session.scalars(select(FoldRunRow)).all()
        trials = session.scalars(select(TrialRow)).all()
        return runs, trials

    runs, trials = control._read(read)
    retried = [r for r in runs if r.attempt > 0]
    assert retried, "no worker died: pick another seed"
    assert all(r.checkpoint_epoch is not None for r in retried if r.status is FoldStatus.COMPLETED)
    failed_attempts = [r for r in runs if r.status is FoldStatus.FAILED]
    assert all("simulated worker died" in (r.error or "") for r in failed_attempts)
    assert {t.status for t in trials} <= {TrialStatus.COMPLETED, TrialStatus.FAILED}


def test_with_racing_new_trials_take_the_slots_their_first_folds_leave_free(
    lanes, tmp_path
) -> None:
    control, _reports = lanes
    spec = _spec(trials=8, epochs=2, folds=4, racing={"rule": "forgiving", "min_folds": 1})
    study_id = _create_study(control, spec)  # 2 x 4 slots, of which the cluster holds 4
    cluster = SimulatedCluster(nodes=1, cpus_per_node=4, epoch_seconds=(0.05, 0.05))
    asyncio.run(_run_to_end(lanes, cluster, study_id, tmp_path=tmp_path))

    def read(session):
        runs = session.scalars(select(FoldRunRow).order_by(FoldRunRow.id)).all()
        trials = session.scalars(select(TrialRow).where(TrialRow.study_id == study_id)).all()
        return runs, trials

    runs, trials = control._read(read)
    numbers = {t.id: t.number for t in trials}
    # the first four slots went to the first fold of four trials, not to one trial's first fold
    # with three slots waiting for its verdict
    assert [(numbers[r.trial_id], r.fold) for r in runs[:4]] == [(n, 0) for n in range(4)]
    assert len(trials) == 8
    assert {t.status for t in trials} <= {TrialStatus.COMPLETED, TrialStatus.PRUNED}


def test_the_model_rule_prunes_a_trial_after_one_fold_once_the_study_has_a_pool(
    lanes, tmp_path
) -> None:
    control, _reports = lanes
    spec = _spec(trials=16, epochs=2, folds=4, racing={"rule": "model", "alpha": 0.2})
    assert spec.racing.min_folds == 1
    study_id = _create_study(control, spec)
    cluster = SimulatedCluster(nodes=1, cpus_per_node=4, epoch_seconds=(0.03, 0.03))
    asyncio.run(_run_to_end(lanes, cluster, study_id, tmp_path=tmp_path))

    def read(session):
        trials = session.scalars(select(TrialRow).where(TrialRow.study_id == study_id)).all()
        runs = session.scalars(select(FoldRunRow)).all()
        return trials, runs

    trials, runs = control._read(read)
    completed_folds = {
        t.id: sum(r.trial_id == t.id and r.status is FoldStatus.COMPLETED for r in runs)
        for t in trials
    }
    pruned = [t for t in trials if t.status is TrialStatus.PRUNED]
    assert pruned, "nothing was pruned: pick another seed"
    assert all("fold model of" in t.pruned_reason for t in pruned)
    assert any(completed_folds[t.id] == 1 for t in pruned)  # judged on one fold
    completed = [t for t in trials if t.status is TrialStatus.COMPLETED]
    assert completed and all(completed_folds[t.id] == 4 for t in completed)
