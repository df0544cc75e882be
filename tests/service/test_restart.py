"""Restart safety: SIGKILL the service mid-study, start it again, and the study ends intact
(with racing on too: every decision taken stands and follows from the stored results)."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from sqlalchemy import select

from foldwise.racing import Racing
from foldwise.schemas import FoldStatus, StudyStatus, TrialStatus
from foldwise.service.db.engine import make_engine, make_session_factory
from foldwise.service.db.models import FoldRunRow, TrialRow
from foldwise.service.scheduler.racing import Incumbent, race_verdict
from tests.live_service import LiveService
from tests.service.study_specs import study_spec

pytestmark = pytest.mark.slow

BUDGET, FOLDS = 6, 3


def _fold_runs(url: str) -> list[tuple[int, int, int, FoldStatus, float | None]]:
    """(trial number, fold, attempt, status, value) of every fold run, read from the database."""
    engine = make_engine(url)
    try:
        with make_session_factory(engine)() as session:
            query = select(
                TrialRow.number,
                FoldRunRow.fold,
                FoldRunRow.attempt,
                FoldRunRow.status,
                FoldRunRow.value,
            ).join(FoldRunRow.trial)
            return [tuple(row) for row in session.execute(query)]
    finally:
        engine.dispose()


def _wait_for_mid_study(url: str, timeout: float = 300) -> list:
    """Wait until some folds have completed while others are still running."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        runs = _fold_runs(url)
        done = [r for r in runs if r[3] is FoldStatus.COMPLETED]
        running = [r for r in runs if r[3] is FoldStatus.RUNNING]
        if len(done) >= 2 and running:
            return runs
        time.sleep(0.2)
    raise TimeoutError(f"never saw completed and running folds together: {_fold_runs(url)}")


def _kill_mid_study_and_restart(tmp_path: Path, **overrides) -> tuple:
    """Run a study, SIGKILL the service once some folds completed while others ran, start it
    again and let it finish. Returns the study, the fold runs and the trials before the kill,
    and every fold run after, as {(trial number, fold, attempt): (status, value)}."""
    url = f"sqlite:///{tmp_path / 'restart.db'}"
    spec = study_spec(
        budget={"trials": BUDGET},
        parallel={"trial_groups": 2, "folds": FOLDS, "workers_per_fold": 1},
        resources={"cpus_per_worker": 0.5},
        trainer={"task": "digits_mlp", "epochs": 12, "batch_size": 32},
        **overrides,
    )
    first = LiveService(url, tmp_path / "first.log").start()
    try:
        with first.sdk() as client:
            study_id = client.create_study(spec).id
        _wait_for_mid_study(url)
    finally:
        first.kill()
    # read once the service is dead: only it writes fold results, so this is the state the
    # kill left (read before it, a fold could finish in between and look lost afterwards)
    runs_before, trials_before = _fold_runs(url), _trials(url)
    second = LiveService(url, tmp_path / "second.log").start()
    try:
        with second.sdk() as client:
            study = client.get_study(study_id).wait(timeout=600, poll=1)
    finally:
        second.stop()
    after = {(n, k, a): (status, v) for n, k, a, status, v in _fold_runs(url)}
    for number, fold, attempt, status, value in runs_before:
        if status is FoldStatus.COMPLETED:  # kept as it was, and never run again
            assert after[(number, fold, attempt)] == (status, value)
            assert (number, fold, attempt + 1) not in after
        elif status is FoldStatus.RUNNING:  # marked lost (and re-run if its trial needs it)
            assert after[(number, fold, attempt)][0] is FoldStatus.LOST
    assert all(status is not FoldStatus.RUNNING for status, _v in after.values())
    return study, url, trials_before, after


def _completed_folds(after: dict, number: int) -> dict[int, float]:
    return {
        k: v for (n, k, _a), (s, v) in after.items() if n == number and s is FoldStatus.COMPLETED
    }


def test_sigkill_mid_study_then_restart_finishes_it(tmp_path: Path) -> None:
    study, url, _trials_before, after = _kill_mid_study_and_restart(tmp_path)
    assert study.status is StudyStatus.COMPLETED
    trials = _trials(url)
    assert [t.number for t in trials] == list(range(BUDGET))
    assert all(t.status is TrialStatus.COMPLETED for t in trials), [t.error for t in trials]
    for trial in trials:
        assert sorted(_completed_folds(after, trial.number)) == list(range(FOLDS))


def test_sigkill_with_racing_on_keeps_every_decision_and_finishes_the_study(
    tmp_path: Path,
) -> None:
    racing = Racing(rule="forgiving", min_folds=1)
    study, url, trials_before, after = _kill_mid_study_and_restart(
        tmp_path, racing=racing.model_dump()
    )
    assert study.status is StudyStatus.COMPLETED
    trials = {t.number: t for t in _trials(url)}
    assert sorted(trials) == list(range(BUDGET))
    assert {t.status for t in trials.values()} <= {TrialStatus.COMPLETED, TrialStatus.PRUNED}
    assert any(t.status is TrialStatus.PRUNED for t in trials.values()), "nothing was raced"
    for trial in trials_before:  # a decision taken is never taken back
        if trial.status is TrialStatus.PRUNED:
            kept = trials[trial.number]
            assert (kept.status, kept.value, kept.pruned_reason) == (
                trial.status,
                trial.value,
                trial.pruned_reason,
            )
    for trial in trials.values():
        if trial.status is TrialStatus.COMPLETED:
            assert sorted(_completed_folds(after, trial.number)) == list(range(FOLDS))
            assert trial.value_folds == FOLDS
            continue
        # a pruned trial: the verdict follows from the stored values, its and the incumbent's
        assert 1 <= trial.value_folds < FOLDS, trial.pruned_reason
        incumbent = int(re.search(r"incumbent \(trial (\d+)\)", trial.pruned_reason)[1])
        used = _values_at_decision(url, trial.number)
        assert len(used) == trial.value_folds
        assert trial.value == pytest.approx(sum(used.values()) / len(used))
        reference = Incumbent(incumbent, _completed_folds(after, incumbent))
        verdict = race_verdict(racing, used, reference, folds=FOLDS, maximize=False)
        assert verdict == trial.pruned_reason


def _trials(url: str) -> list[TrialRow]:
    engine = make_engine(url)
    try:
        with make_session_factory(engine)() as session:
            rows = session.scalars(select(TrialRow).order_by(TrialRow.number)).all()
            session.expunge_all()
            return list(rows)
    finally:
        engine.dispose()


def _values_at_decision(url: str, number: int) -> dict[int, float]:
    """The fold values a pruned trial had when it was pruned: its folds completed by then."""
    engine = make_engine(url)
    try:
        with make_session_factory(engine)() as session:
            trial = session.scalars(select(TrialRow).where(TrialRow.number == number)).one()
            return {
                run.fold: run.value
                for run in trial.fold_runs
                if run.status is FoldStatus.COMPLETED and run.finished_at <= trial.finished_at
            }
    finally:
        engine.dispose()
