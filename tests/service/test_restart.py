"""Restart safety: SIGKILL the service mid-study, start it again, and the study ends intact."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from sqlalchemy import select

from foldwise.schemas import FoldStatus, StudyStatus, TrialStatus
from service.db.engine import make_engine, make_session_factory
from service.db.models import FoldRunRow, TrialRow
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


def test_sigkill_mid_study_then_restart_finishes_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'restart.db'}"
    spec = study_spec(
        budget={"trials": BUDGET},
        parallel={"trial_groups": 2, "folds": FOLDS, "workers_per_fold": 1},
        resources={"cpus_per_worker": 0.5},
        trainer={"task": "digits_mlp", "epochs": 12, "batch_size": 32},
    )
    first = LiveService(url, tmp_path / "first.log").start()
    try:
        with first.sdk() as client:
            study_id = client.create_study(spec).id
        before = _wait_for_mid_study(url)
    finally:
        first.kill()
    second = LiveService(url, tmp_path / "second.log").start()
    try:
        with second.sdk() as client:
            study = client.get_study(study_id).wait(timeout=600, poll=1)
            trials = study.trials()
    finally:
        second.stop()

    assert study.status is StudyStatus.COMPLETED
    assert [t.number for t in trials] == list(range(BUDGET))
    assert all(t.status is TrialStatus.COMPLETED for t in trials), [t.error for t in trials]
    after = {
        (n, fold, attempt): (status, value) for n, fold, attempt, status, value in _fold_runs(url)
    }
    for number, fold, attempt, status, value in before:
        if status is FoldStatus.COMPLETED:  # kept as it was, and never run again
            assert after[(number, fold, attempt)] == (status, value)
            assert (number, fold, attempt + 1) not in after
        elif status is FoldStatus.RUNNING:  # marked lost, and re-run as the next attempt
            assert after[(number, fold, attempt)][0] is FoldStatus.LOST
            assert after[(number, fold, attempt + 1)][0] is FoldStatus.COMPLETED
    for trial in trials:
        completed = [
            k
            for (n, k, _a), (s, _v) in after.items()
            if n == trial.number and s is FoldStatus.COMPLETED
        ]
        assert sorted(completed) == list(range(FOLDS))
