"""Restart safety: SIGKILL the service mid-study, start it again, and the study ends intact
(with racing on too: every decision taken stands and follows from the stored results; and a
Pareto study, whose front is rebuilt from what was stored). One kill serves both: the service
runs a Pareto study (racing off) and one with racing on."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

import pytest
from sqlalchemy import select

from foldwise.pruners.racing import Incumbent, race_verdict
from foldwise.racing import Racing
from foldwise.schemas import FoldStatus, StudyStatus, TrialStatus
from foldwise.service.db.engine import make_engine, make_session_factory
from foldwise.service.db.models import FoldRunRow, TrialRow
from tests.live_service import LiveService
from tests.service.study_specs import study_spec

pytestmark = pytest.mark.slow

BUDGET, FOLDS = 6, 3
RACING = Racing(rule="forgiving", min_folds=1)
OBJECTIVES = [
    {"metric": "val_loss", "direction": "minimize"},
    {"metric": "n_params", "direction": "minimize"},
]
LIMIT = 20_000.0
"""At most this many parameters: some of the digits MLPs of the space fit, others do not."""
CONSTRAINT = {"metric": "n_params", "op": "<=", "value": LIMIT}


def _fold_runs(url: str, study_id: int) -> list[tuple[int, int, int, FoldStatus, float | None]]:
    """(trial number, fold, attempt, status, value) of every fold run of the study, read from
    the database."""
    engine = make_engine(url)
    try:
        with make_session_factory(engine)() as session:
            query = (
                select(
                    TrialRow.number,
                    FoldRunRow.fold,
                    FoldRunRow.attempt,
                    FoldRunRow.status,
                    FoldRunRow.value,
                )
                .join(FoldRunRow.trial)
                .where(TrialRow.study_id == study_id)
            )
            return [tuple(row) for row in session.execute(query)]
    finally:
        engine.dispose()


def _mid_study(runs: list) -> bool:
    """Some folds have completed while others are still running."""
    done = [r for r in runs if r[3] is FoldStatus.COMPLETED]
    return len(done) >= 2 and any(r[3] is FoldStatus.RUNNING for r in runs)


def _wait_for_mid_study(url: str, study_ids: list[int], timeout: float = 300) -> None:
    """Wait until every study is mid-study at once."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(_mid_study(_fold_runs(url, study_id)) for study_id in study_ids):
            return
        time.sleep(0.2)
    runs = {study_id: _fold_runs(url, study_id) for study_id in study_ids}
    raise TimeoutError(f"never saw completed and running folds together: {runs}")


@dataclass
class Restarted:
    """A study that went through the kill: how it ended, its trials before the kill, and
    every fold run after, as {(trial number, fold, attempt): (status, value)}; its front."""

    study: Any
    trials_before: list[TrialRow]
    after: dict[tuple[int, int, int], tuple[FoldStatus, float | None]]
    front: list[int]
    """The trial numbers of its Pareto front, as the restarted service gave them."""


@pytest.fixture(scope="module")
def restarted(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, Restarted]]:
    """Two studies in one service, one with racing off and one with racing on: SIGKILL the
    service once each has completed folds while others run, start it again and let both
    finish. The database's URL, and each study by name."""
    tmp_path = tmp_path_factory.mktemp("restart")
    url = f"sqlite:///{tmp_path / 'restart.db'}"
    specs = {
        "pareto": _spec(objectives=OBJECTIVES, constraints=[CONSTRAINT]),
        "racing": _spec(racing=RACING.model_dump()),
    }
    first = LiveService(url, tmp_path / "first.log").start()
    try:
        with first.sdk() as client:
            ids = {name: client.create_study(spec).id for name, spec in specs.items()}
        _wait_for_mid_study(url, list(ids.values()))
    finally:
        first.kill()
    # read once the service is dead: only it writes fold results, so this is the state the
    # kill left (read before it, a fold could finish in between and look lost afterwards)
    before = {name: (_fold_runs(url, i), _trials(url, i)) for name, i in ids.items()}
    second = LiveService(url, tmp_path / "second.log").start()
    try:
        with second.sdk() as client:
            studies = {
                name: client.get_study(i).wait(timeout=600, poll=1) for name, i in ids.items()
            }
            fronts = {
                name: [t.number for t in client.fetch_pareto(i).data] for name, i in ids.items()
            }
    finally:
        second.stop()
    out = {}
    for name, study_id in ids.items():
        runs_before, trials_before = before[name]
        after = {(n, k, a): (st, v) for n, k, a, st, v in _fold_runs(url, study_id)}
        for number, fold, attempt, status, value in runs_before:
            if status is FoldStatus.COMPLETED:  # kept as it was, and never run again
                assert after[(number, fold, attempt)] == (status, value)
                assert (number, fold, attempt + 1) not in after
            elif status is FoldStatus.RUNNING:  # marked lost (and re-run if its trial needs it)
                assert after[(number, fold, attempt)][0] is FoldStatus.LOST
        assert all(status is not FoldStatus.RUNNING for status, _v in after.values())
        out[name] = Restarted(studies[name], trials_before, after, fronts[name])
    return url, out


def _spec(**overrides: Any) -> dict[str, Any]:
    return study_spec(
        budget={"trials": BUDGET},
        parallel={"trial_groups": 2, "folds": FOLDS, "workers_per_fold": 1},
        resources={"cpus_per_worker": 0.5},
        trainer={"task": "digits_mlp", "epochs": 5, "batch_size": 32},
        **overrides,
    )


def _completed_folds(after: dict, number: int) -> dict[int, float]:
    return {
        k: v for (n, k, _a), (s, v) in after.items() if n == number and s is FoldStatus.COMPLETED
    }


def test_sigkill_mid_study_then_restart_finishes_a_pareto_study(restarted) -> None:
    url, studies = restarted
    pareto = studies["pareto"]
    assert pareto.study.status is StudyStatus.COMPLETED
    trials = _trials(url, pareto.study.id)
    assert [t.number for t in trials] == list(range(BUDGET))
    assert all(t.status is TrialStatus.COMPLETED for t in trials), [t.error for t in trials]
    for trial in trials:
        assert sorted(_completed_folds(pareto.after, trial.number)) == list(range(FOLDS))
        (loss, _), (size, size_se) = trial.objective_values
        assert loss == pytest.approx(trial.value) and size_se == 0.0
        assert trial.constraint_values == [size] and trial.feasible is (size <= LIMIT)
    for trial in pareto.trials_before:  # what was decided before the kill stands
        if trial.status is TrialStatus.COMPLETED:
            kept = next(t for t in trials if t.number == trial.number)
            assert (kept.objective_values, kept.feasible) == (
                trial.objective_values,
                trial.feasible,
            )
    points = {t.number: [v[0] for v in t.objective_values] for t in trials if t.feasible}
    expected = [n for n, p in points.items() if not any(_dominates(q, p) for q in points.values())]
    assert pareto.front == sorted(expected)


def _dominates(a: list[float], b: list[float]) -> bool:
    return all(x <= y for x, y in zip(a, b, strict=True)) and a != b


def test_sigkill_with_racing_on_keeps_every_decision_and_finishes_the_study(restarted) -> None:
    url, studies = restarted
    raced = studies["racing"]
    assert raced.study.status is StudyStatus.COMPLETED
    trials = {t.number: t for t in _trials(url, raced.study.id)}
    assert sorted(trials) == list(range(BUDGET))
    assert {t.status for t in trials.values()} <= {TrialStatus.COMPLETED, TrialStatus.PRUNED}
    assert any(t.status is TrialStatus.PRUNED for t in trials.values()), "nothing was raced"
    for trial in raced.trials_before:  # a decision taken is never taken back
        if trial.status is TrialStatus.PRUNED:
            kept = trials[trial.number]
            assert (kept.status, kept.value, kept.pruned_reason) == (
                trial.status,
                trial.value,
                trial.pruned_reason,
            )
    for trial in trials.values():
        if trial.status is TrialStatus.COMPLETED:
            assert sorted(_completed_folds(raced.after, trial.number)) == list(range(FOLDS))
            assert trial.value_folds == FOLDS
            continue
        # a pruned trial: the verdict follows from the stored values, its and the incumbent's
        assert 1 <= trial.value_folds < FOLDS, trial.pruned_reason
        incumbent = int(re.search(r"incumbent \(trial (\d+)\)", trial.pruned_reason)[1])
        used = _values_at_decision(url, raced.study.id, trial.number)
        assert len(used) == trial.value_folds
        assert trial.value == pytest.approx(sum(used.values()) / len(used))
        reference = Incumbent(incumbent, _completed_folds(raced.after, incumbent))
        verdict = race_verdict(RACING, used, reference, folds=FOLDS, maximize=False)
        assert verdict == trial.pruned_reason


def _trials(url: str, study_id: int) -> list[TrialRow]:
    engine = make_engine(url)
    try:
        with make_session_factory(engine)() as session:
            query = select(TrialRow).where(TrialRow.study_id == study_id)
            rows = session.scalars(query.order_by(TrialRow.number)).all()
            session.expunge_all()
            return list(rows)
    finally:
        engine.dispose()


def _values_at_decision(url: str, study_id: int, number: int) -> dict[int, float]:
    """The fold values a pruned trial had when it was pruned: its folds completed by then."""
    engine = make_engine(url)
    try:
        with make_session_factory(engine)() as session:
            query = select(TrialRow).where(
                TrialRow.study_id == study_id, TrialRow.number == number
            )
            trial = session.scalars(query).one()
            return {
                run.fold: run.value
                for run in trial.fold_runs
                if run.status is FoldStatus.COMPLETED and run.finished_at <= trial.finished_at
            }
    finally:
        engine.dispose()
