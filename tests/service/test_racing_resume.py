"""A restarted scheduler takes the racing decision the stored results call for, before it
runs anything: a trial left unfinished whose finished folds are clearly worse is pruned."""

from __future__ import annotations

import asyncio

import pytest

from foldwise.pruners.fold_model import fit_fold_model
from foldwise.pruners.racing import Incumbent, race_verdict
from foldwise.schemas import FoldStatus, StudyStatus, TrialStatus
from foldwise.service.db import fold_runs as fold_repo
from foldwise.service.db import studies as study_repo
from foldwise.service.db import trials as trial_repo
from foldwise.service.db.engine import SessionRunner
from foldwise.service.db.models import FoldRunRow, TrialRow
from foldwise.service.executor import RayExecutor
from foldwise.service.scheduler.fold_task import FoldOutcome
from foldwise.service.scheduler.store import SchedulerStore
from foldwise.service.scheduler.study_runner import StudyRunner
from foldwise.service.scheduler.trial_progress import TrialProgress
from foldwise.service.scheduler.trial_verdicts import TrialVerdicts
from foldwise.spec import StudySpec
from foldwise.trainers.report import EpochReport
from tests.service.study_specs import study_spec

INCUMBENT = [0.30, 0.32, 0.40]  # fold values of the completed trial 0


def _stored_study(db: SessionRunner, second_trial_folds: list[float]) -> int:
    """A study of two trials as a killed service left it: trial 0 completed; trial 1 with
    ``second_trial_folds`` finished and, if it has folds left, the next still marked running."""
    spec = StudySpec.model_validate(
        study_spec(
            budget={"trials": 2},
            parallel={"trial_groups": 2, "folds": 3, "workers_per_fold": 1},
            racing={"rule": "forgiving", "min_folds": 1},
        )
    )

    def work(session) -> int:
        study = study_repo.create_study(session, spec)
        session.flush()
        for number, values in ((0, INCUMBENT), (1, second_trial_folds)):
            trial = trial_repo.create_trial(session, study.id, {"lr": 0.01}, number=number)
            for fold, value in enumerate(values):
                run = fold_repo.start_fold_run(session, trial.id, fold)
                fold_repo.finish_fold_run(session, run.id, FoldStatus.COMPLETED, value=value)
            if number == 0:
                mean = sum(values) / len(values)
                trial_repo.finish_trial(session, trial, TrialStatus.COMPLETED, value=mean)
            elif len(values) < 3:
                fold_repo.start_fold_run(session, trial.id, len(values))
        return study.id

    return db._write(work)


def _resume(db: SessionRunner, study_id: int) -> TrialRow:
    store = SchedulerStore(db)
    runner = StudyRunner(study_id, store, RayExecutor(), poll_seconds=0.05)
    asyncio.run(asyncio.wait_for(runner.run(), timeout=60))

    def work(session) -> TrialRow:
        study = study_repo.get_study(session, study_id)
        assert study.status is StudyStatus.COMPLETED, study.error
        trial = trial_repo.get_trial(session, study_id, 1)
        session.expunge_all()
        return trial

    return db._read(work)


def test_a_resumed_trial_clearly_worse_on_its_finished_folds_is_pruned_at_once(db) -> None:
    trial = _resume(db, _stored_study(db, [0.90]))
    assert trial.status is TrialStatus.PRUNED
    assert trial.value == 0.90 and trial.value_folds == 1
    assert trial.std_error == pytest.approx(0.0529, abs=1e-4)  # the incumbent's fold spread
    assert trial.pruned_reason == (
        "after 1 of 3 folds: 0.9 vs incumbent (trial 0) 0.3 on the same folds, worse by 0.6, "
        "more than the incumbent's worst fold lies from its mean (0.06; forgiving rule)"
    )
    # the fold the killed service was running is lost, and never run again
    runs = [(f.fold, f.attempt, f.status) for f in trial.fold_runs]
    assert runs == [(0, 0, FoldStatus.COMPLETED), (1, 0, FoldStatus.LOST)]


def test_a_resumed_trial_whose_folds_all_finished_completes_without_running_anything(
    db,
) -> None:
    trial = _resume(db, _stored_study(db, [0.31, 0.33, 0.41]))
    assert trial.status is TrialStatus.COMPLETED and trial.value_folds == 3
    assert trial.value == pytest.approx(0.35)
    assert all(f.status is not FoldStatus.RUNNING for f in trial.fold_runs)


def test_a_fold_that_ends_after_its_trial_was_decided_is_stored_cancelled(db) -> None:
    # Fold 1 of trial 1 started just before the racing verdict on fold 0 and completes after
    # it: the runner alone writes fold ends, after the verdict, so the fold ends cancelled and
    # the pruned trial rests on the one fold its verdict saw (its CSV row and value agree).
    study_id = _stored_study(db, [0.90])
    store = SchedulerStore(db)

    async def race() -> None:
        verdicts, trial = await _taking_in(store, study_id, {0: 0.90})
        handle = trial.handle
        run_id, _ = await store.start_fold_run(study_id, handle.id, 2)
        await verdicts.judge(trial)  # pruned on fold 0
        late = FoldOutcome(2, run_id, FoldStatus.COMPLETED, value=0.2, train_seconds=1.5)
        await verdicts.take(trial, late)
        await verdicts.write_fold_ends()  # as the runner does once it took in what ended

    asyncio.run(race())

    def work(session) -> TrialRow:
        row = trial_repo.get_trial(session, study_id, 1)
        session.expunge_all()
        return row

    stored = db._read(work)
    assert stored.status is TrialStatus.PRUNED and stored.value_folds == 1
    late = [f for f in stored.fold_runs if f.fold == 2]
    assert [(f.status, f.value, f.train_seconds) for f in late] == [
        (FoldStatus.CANCELLED, None, 1.5)
    ]


def test_pruning_references_are_read_from_the_stored_ended_runs(db) -> None:
    spec = StudySpec.model_validate(study_spec(budget={"trials": 3}))

    def work(session) -> int:
        study = study_repo.create_study(session, spec)
        session.flush()
        trial = trial_repo.create_trial(session, study.id, {"lr": 0.01}, number=0)
        for fold, status, losses in (
            (0, FoldStatus.COMPLETED, [0.9, 0.5, 0.4]),
            (1, FoldStatus.PRUNED, [2.0, 1.9]),
            (2, FoldStatus.RUNNING, [0.8]),  # still going: no reference yet
            (0, FoldStatus.FAILED, [0.7]),  # a failure is no reference either
        ):
            run = fold_repo.start_fold_run(session, trial.id, fold)
            for epoch, loss in enumerate(losses, start=1):
                fold_repo.record_epoch(
                    session, run.id, EpochReport(epoch, {"val_loss": loss, "lr": 0.1})
                )
            if status is not FoldStatus.RUNNING:
                fold_repo.finish_fold_run(session, run.id, status)
        return study.id

    study_id = db._write(work)
    curves = asyncio.run(SchedulerStore(db).fold_curves(study_id, "val_loss"))
    assert sorted(curves) == [(0, True, [0.9, 0.5, 0.4]), (1, False, [2.0, 1.9])]


def test_sibling_folds_that_end_together_are_written_with_their_verdict(db) -> None:
    # Folds 1 and 2 of trial 1 end in the same pass of the runner: the first leads to no
    # verdict and waits; the second completes the trial, and one transaction writes both fold
    # ends before the trial's (the verdict sees every fold end before it).
    study_id = _stored_study(db, [0.29])
    store = SchedulerStore(db)
    writes = []
    write = store.write

    async def counted(*args, **kwargs):
        writes.append(args[0])
        return await write(*args, **kwargs)

    store.write = counted

    async def race() -> tuple[int, int]:
        verdicts, trial = await _taking_in(store, study_id, {0: 0.29})
        handle = trial.handle
        run_1, _ = await store.start_fold_run(study_id, handle.id, 1)
        run_2, _ = await store.start_fold_run(study_id, handle.id, 2)
        writes.clear()
        await verdicts.take(trial, FoldOutcome(1, run_1, FoldStatus.COMPLETED, value=0.31))
        assert writes == [] and _run_status(db, run_1) is FoldStatus.RUNNING
        await verdicts.take(trial, FoldOutcome(2, run_2, FoldStatus.COMPLETED, value=0.30))
        assert len(writes) == 1
        await verdicts.write_fold_ends()  # nothing left to write
        assert len(writes) == 1
        return run_1, run_2

    runs = asyncio.run(race())
    assert [_run_status(db, run) for run in runs] == [FoldStatus.COMPLETED] * 2
    assert db._read(lambda s: trial_repo.get_trial(s, study_id, 1).status) is (
        TrialStatus.COMPLETED
    )


def test_a_fold_end_no_verdict_takes_is_written_once_the_runner_took_in_what_ended(db) -> None:
    study_id = _stored_study(db, [0.29])
    store = SchedulerStore(db)

    async def race() -> int:
        verdicts, trial = await _taking_in(store, study_id, {0: 0.29})
        handle = trial.handle
        run_1, _ = await store.start_fold_run(study_id, handle.id, 1)
        await verdicts.take(trial, FoldOutcome(1, run_1, FoldStatus.COMPLETED, value=0.31))
        await verdicts.write_fold_ends()
        return run_1

    run_1 = asyncio.run(race())
    assert _run_status(db, run_1) is FoldStatus.COMPLETED
    assert db._read(lambda s: trial_repo.get_trial(s, study_id, 1).status) is not (
        TrialStatus.COMPLETED
    )


async def _taking_in(
    store: SchedulerStore, study_id: int, values: dict[int, float]
) -> tuple[TrialVerdicts, TrialProgress]:
    """The study begun again, its verdicts knowing the incumbent, and its unfinished trial
    in flight with the fold ``values`` it has."""
    start = await store.begin_study(study_id)
    verdicts = TrialVerdicts(study_id, store, start.spec)
    await verdicts.read_incumbent()
    (handle,) = start.unfinished
    trial = verdicts.trials[handle.id] = TrialProgress(handle, values)
    return verdicts, trial


def _run_status(db: SessionRunner, run_id: int) -> FoldStatus:
    return db._read(lambda s: s.get(FoldRunRow, run_id).status)


def test_a_restarted_scheduler_fits_the_fold_model_to_the_stored_folds_and_prunes_alike(
    db,
) -> None:
    # four completed trials on three folds (fold 2 hard for all), a fifth left with one fold:
    # the restarted runner fits the fold model to the stored folds of the finished trials and
    # reaches the verdict the same model gives on them
    finished = {n: [0.30 + 0.02 * n, 0.31 + 0.02 * n, 0.45 + 0.02 * n] for n in range(4)}
    finished[1][0] += 0.01
    spec = StudySpec.model_validate(
        study_spec(
            budget={"trials": 5},
            parallel={"trial_groups": 2, "folds": 3, "workers_per_fold": 1},
            racing={"rule": "model"},
        )
    )

    def work(session) -> int:
        study = study_repo.create_study(session, spec)
        session.flush()
        for number, values in [*finished.items(), (4, [0.70])]:
            trial = trial_repo.create_trial(session, study.id, {"lr": 0.01}, number=number)
            for fold, value in enumerate(values):
                run = fold_repo.start_fold_run(session, trial.id, fold)
                fold_repo.finish_fold_run(session, run.id, FoldStatus.COMPLETED, value=value)
            if len(values) == 3:
                mean = sum(values) / 3
                trial_repo.finish_trial(session, trial, TrialStatus.COMPLETED, value=mean)
        return study.id

    study_id = db._write(work)
    store = SchedulerStore(db)
    runner = StudyRunner(study_id, store, RayExecutor(), poll_seconds=0.05)
    asyncio.run(asyncio.wait_for(runner.run(), timeout=60))
    trial = db._read(lambda s: trial_repo.get_trial(s, study_id, 4))
    model = fit_fold_model({n: dict(enumerate(v)) for n, v in finished.items()})
    incumbent = Incumbent(0, dict(enumerate(finished[0])))
    expected = race_verdict(
        spec.racing, {0: 0.70}, incumbent, folds=3, maximize=False, model=model
    )
    assert expected is not None and "fold model of 4 trials" in expected
    assert trial.status is TrialStatus.PRUNED and trial.pruned_reason == expected
