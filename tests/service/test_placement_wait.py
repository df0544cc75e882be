"""A fold run Ray cannot place: the study says why it waits, a placement Ray drops is tried again,
and the study runs once Ray has room."""

from __future__ import annotations

import asyncio
import time

import pytest
from ray.util.placement_group import placement_group, remove_placement_group
from sqlalchemy import select

from foldwise.schemas import FoldStatus, StudyStatus
from foldwise.service.db import studies as study_repo
from foldwise.service.db.engine import SessionRunner
from foldwise.service.db.models import FoldRunRow, StudyRow
from foldwise.service.db.schema import upgrade_database
from foldwise.service.executor import RayExecutor
from foldwise.service.scheduler import fold_slots
from foldwise.service.scheduler.store import SchedulerStore
from foldwise.service.scheduler.study_runner import StudyRunner
from foldwise.spec import StudySpec
from tests.service.study_specs import tiny_task_spec

pytestmark = pytest.mark.slow


def _study(db: SessionRunner, study_id: int) -> StudyRow:
    def work(session) -> StudyRow:
        study = study_repo.get_study(session, study_id)
        session.expunge(study)
        return study

    return db._read(work)


def _runs(db: SessionRunner) -> list[FoldRunRow]:
    def work(session) -> list[FoldRunRow]:
        runs = list(session.scalars(select(FoldRunRow)))
        session.expunge_all()
        return runs

    return db._read(work)


def test_folds_ray_cannot_place_make_the_study_say_why_and_a_removed_placement_is_retried(
    tmp_path, monkeypatch
) -> None:
    # Ray's own CPUs are held outside the service's fold runs (another job on a shared cluster;
    # the same holds when its nodes died): the fold runs had a slot, so the study said nothing
    # and sat "running" with no placement for as long as it lasted
    monkeypatch.setattr(fold_slots, "PLACEMENT_PATIENCE_S", 0.5)
    url = f"sqlite:///{tmp_path / 'placement.db'}"
    upgrade_database(url)
    db = SessionRunner(url, 2)
    document = tiny_task_spec(
        ["ok"],
        budget={"trials": 3},
        parallel={"trial_groups": 1, "folds": 2, "workers_per_fold": 1},
        resources={"cpus_per_worker": 1},
    )
    document["trainer"]["epochs"] = 1
    spec = StudySpec.model_validate(document)

    def create(session) -> int:
        study = study_repo.create_study(session, spec)
        session.flush()
        return study.id

    study_id = db._write(create)

    async def scenario() -> list:
        executor = RayExecutor(num_cpus=2)
        await executor.start()
        try:
            held = placement_group([{"CPU": 2}])
            await held.ready()
            runner = StudyRunner(study_id, SchedulerStore(db), executor, poll_seconds=0.1)
            task = asyncio.create_task(runner.run())
            said, deadline = [], time.monotonic() + 60
            while not said and time.monotonic() < deadline and not task.done():
                await asyncio.sleep(0.2)
                said = [reason] if (reason := _study(db, study_id).waiting) else []
            for group in executor.pool.busy_groups:  # as Ray did when their node died
                remove_placement_group(group.pg)
            await asyncio.sleep(1.0)
            remove_placement_group(held)  # room again: the study runs to its end
            while _study(db, study_id).waiting is not None and not task.done():
                await asyncio.sleep(0.1)
            said.append(_study(db, study_id).status)  # the words go once the folds are placed
            await asyncio.wait_for(task, timeout=180)
            return said
        finally:
            await executor.shutdown()

    said = asyncio.run(scenario())
    assert said == [
        "waiting for Ray to place the workers of 2 fold runs (1 CPU each) for over 0.5 s: "
        "Ray has 0 of 2 CPUs free on 1 alive node",
        StudyStatus.RUNNING,
    ]
    study = _study(db, study_id)
    assert study.status is StudyStatus.COMPLETED, study.error
    assert study.waiting is None
    # a placement group Ray removed fails the attempt as lost workers do (it was an error that
    # failed the whole study): the fold runs again
    runs = _runs(db)
    first = min(run.trial_id for run in runs)  # the trial whose folds waited
    tried = sorted(
        (r.fold, r.attempt, r.status, r.error or "") for r in runs if r.trial_id == first
    )
    assert [(fold, attempt, status) for fold, attempt, status, _ in tried] == [
        (0, 0, FoldStatus.FAILED),
        (0, 1, FoldStatus.COMPLETED),
        (1, 0, FoldStatus.FAILED),
        (1, 1, FoldStatus.COMPLETED),
    ]
    for _fold, attempt, _status, error in tried:
        if attempt == 0:
            assert error.startswith(
                "Ray could not start the fold's workers: TaskPlacementGroupRemoved"
            )
    assert all(r.status is FoldStatus.COMPLETED for r in runs if r.trial_id != first)
