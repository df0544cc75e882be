"""One fold task on a real local Ray: pruning stops it, and what it trains after the decision
counts for nothing, even an epoch that diverges."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from sqlalchemy import select

from foldwise.pruners.in_fold import FoldCurves
from foldwise.schemas import FoldStatus
from foldwise.service.db import studies as study_repo
from foldwise.service.db import trials as trial_repo
from foldwise.service.db.engine import SessionRunner
from foldwise.service.db.models import FoldRunRow
from foldwise.service.db.schema import upgrade_database
from foldwise.service.executor import RayExecutor
from foldwise.service.scheduler.fold_task import FoldTask
from foldwise.service.scheduler.run_task import StudyContext
from foldwise.service.scheduler.store import SchedulerStore, TrialHandle
from foldwise.spec import StudySpec
from tests.service.study_specs import tiny_task_spec

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def runner() -> Iterator[asyncio.Runner]:
    with asyncio.Runner() as loop:
        yield loop


@pytest.fixture(scope="module")
def executor(runner: asyncio.Runner) -> Iterator[RayExecutor]:
    ex = RayExecutor(num_cpus=2)
    runner.run(ex.start())
    yield ex
    runner.run(ex.shutdown())


def _context(tmp_path, executor: RayExecutor, mode: str) -> tuple[StudyContext, TrialHandle]:
    url = f"sqlite:///{tmp_path / 'fold.db'}"
    upgrade_database(url)
    db = SessionRunner(url, 2)
    document = tiny_task_spec(
        ["ok"], pruning={"rule": "median", "warmup_epochs": 1, "min_runs": 1}
    )
    document["parallel"]["workers_per_fold"] = 1
    document["trainer"]["epochs"] = 6
    spec = StudySpec.model_validate(document)

    def work(session) -> TrialHandle:
        study = study_repo.create_study(session, spec)
        session.flush()
        trial = trial_repo.create_trial(session, study.id, {"mode": mode, "lr": 0.05}, number=0)
        return TrialHandle(trial.id, trial.number, trial.params)

    handle = db._write(work)
    curves = FoldCurves(maximize=False)
    curves.add(0, [0.6, 0.4, 0.3, 0.25, 0.2, 0.2], finished=True)  # an ok run of fold 0
    return StudyContext(spec, 1, SchedulerStore(db), executor, curves), handle


def _fold_run(context: StudyContext) -> FoldRunRow:
    def work(session) -> FoldRunRow:
        [run] = session.scalars(select(FoldRunRow)).all()
        run.epochs  # noqa: B018  (loaded before the session goes)
        session.expunge(run)
        return run

    return context.store._db._read(work)


def test_a_pruned_run_that_diverges_after_the_decision_ends_pruned(
    runner, executor, tmp_path
) -> None:
    context, handle = _context(tmp_path, executor, "flat_nan")
    outcome = runner.run(asyncio.wait_for(FoldTask(context, handle, 0).run(), 120))
    assert outcome.status is FoldStatus.PRUNED
    assert outcome.value == pytest.approx(1.0986, abs=1e-3)  # log 3: what it had at epoch 1
    assert outcome.reason.startswith("fold 0 at epoch 1: 1.099, worse than the median 0.6")
    assert outcome.curve[0] == pytest.approx(1.0986, abs=1e-3)  # pruning's reference to be
    runner.run(context.store.flush_reports())  # what the run reported, written in its batch
    run = _fold_run(context)  # the study runner alone writes how a fold ended
    assert (run.status, run.attempt, run.id) == (FoldStatus.RUNNING, 0, outcome.run_id)
    assert run.epochs[0].epoch == 1  # epoch 2 diverged after the decision: no report


def test_a_run_as_good_as_the_references_completes(runner, executor, tmp_path) -> None:
    context, handle = _context(tmp_path, executor, "ok")
    context.curves.add(0, [5.0] * 6, finished=True)  # median of 0.6 and 5 at epoch 1: 2.8
    outcome = runner.run(asyncio.wait_for(FoldTask(context, handle, 0).run(), 120))
    assert outcome.status is FoldStatus.COMPLETED and outcome.reason is None
    assert len(outcome.curve) == 6 and outcome.train_seconds > 0
    runner.run(context.store.flush_reports())
    assert _fold_run(context).status is FoldStatus.RUNNING  # the study runner writes its end
