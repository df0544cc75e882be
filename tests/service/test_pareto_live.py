"""Pareto studies in a real service: two objectives (validation loss against the model's size,
which foldwise counts) and a constraint on the size, run by the GP (random scalarisations once
its initial design is in). Every trial carries each objective's fold mean and standard error
and its constraint's value; the front the API, the SDK and the CLI give is exactly the feasible
completed trials that nothing feasible dominates. A single-objective study with the same
constraint, racing on, prunes each infeasible trial after its first fold and names a feasible
best trial."""

from __future__ import annotations

import statistics
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from foldwise.client import Client, Study
from foldwise.schemas import StudyStatus, TrialStatus
from tests.live_service import FOLDWISE_BIN, ROOT, LiveService
from tests.service.study_specs import tiny_task_spec

pytestmark = pytest.mark.slow

LIMIT = 250.0
"""At most this many parameters: the tiny task's net has 12 x width + 3 (width 20 fits)."""
CONSTRAINT = {"metric": "n_params", "op": "<=", "value": LIMIT}


def _spec(**overrides: Any) -> dict[str, Any]:
    sections: dict[str, Any] = {
        "budget": {"trials": 6},
        "parallel": {"trial_groups": 2, "folds": 2, "workers_per_fold": 1},
        "optimizer": {"name": "gp", "seed": 2, "options": {"n_initial": 3}},
        "constraints": [CONSTRAINT],
    }
    spec = tiny_task_spec(["ok"], **{**sections, **overrides})
    spec["space"]["width"] = {"type": "int", "low": 2, "high": 40}
    spec["trainer"]["epochs"] = 3
    return spec


@pytest.fixture(scope="module")
def client(shared_service: LiveService) -> Iterator[Client]:
    with shared_service.sdk() as sdk:
        yield sdk


@pytest.fixture(scope="module")
def pareto(client: Client) -> Study:
    objectives = [
        {"metric": "val_loss", "direction": "minimize"},
        {"metric": "n_params", "direction": "minimize"},
    ]
    study = client.create_study(_spec(objectives=objectives)).wait(timeout=600, poll=1)
    assert study.status is StudyStatus.COMPLETED, study.data
    return study


def _dominates(a: list[float], b: list[float]) -> bool:
    return all(x <= y for x, y in zip(a, b, strict=True)) and a != b


def test_every_trial_carries_each_objective_and_its_constraint(pareto: Study) -> None:
    assert pareto.data.best_trial is None
    for summary in pareto.trials():
        trial = pareto.trial(summary.number)
        assert trial.status is TrialStatus.COMPLETED, trial.error
        size = 12 * trial.params["width"] + 3
        folds = [f for f in trial.folds if f.status == "completed"]
        assert [sorted(f.metric_values) for f in folds] == [["n_params", "val_loss"]] * 2
        assert all(f.metric_values["val_loss"] == f.value for f in folds)
        (loss, loss_se), (params, params_se) = trial.objective_values
        assert loss == pytest.approx(trial.value) and loss_se == pytest.approx(trial.std_error)
        assert loss == pytest.approx(statistics.fmean(f.value for f in folds))
        assert (params, params_se) == (size, 0.0)
        assert trial.constraint_values == [size] and trial.feasible is (size <= LIMIT)


def test_the_front_is_the_feasible_trials_nothing_feasible_dominates(
    pareto: Study, shared_service: LiveService
) -> None:
    trials = pareto.trials()
    feasible = {t.number: [v[0] for v in t.objective_values] for t in trials if t.feasible}
    assert feasible and len(feasible) < len(trials), "the constraint should cut some trials"
    expected = [
        n for n, p in feasible.items() if not any(_dominates(q, p) for q in feasible.values())
    ]
    front = pareto.pareto_front
    assert [t.number for t in front] == sorted(expected)
    with shared_service.http() as http:
        body = http.get(f"/studies/{pareto.id}/pareto").json()
    assert body["objectives"] == [
        {"metric": "val_loss", "direction": "minimize"},
        {"metric": "n_params", "direction": "minimize"},
    ]
    assert [t["number"] for t in body["data"]] == sorted(expected) and body["count"] == len(front)
    shown = subprocess.run(
        [str(FOLDWISE_BIN), "--url", shared_service.url, "best", str(pareto.id)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=shared_service.cli_env,
    )
    assert shown.returncode == 0, shown.stderr
    assert "Pareto front" in shown.stdout and "n_params (minimize)" in shown.stdout
    for trial in front:
        assert f"#{trial.number}" in shown.stdout


def test_a_constrained_study_races_out_infeasible_trials_and_names_a_feasible_best(
    client: Client,
) -> None:
    spec = _spec(budget={"trials": 4}, racing={"rule": "forgiving"})
    study = client.create_study(spec).wait(timeout=600, poll=1)
    assert study.status is StudyStatus.COMPLETED, study.data
    trials = study.trials()
    assert all(t.objective_values is None and t.feasible is not None for t in trials)
    infeasible = [study.trial(t.number) for t in trials if not t.feasible]
    assert infeasible, "the GP's initial design should break the constraint at least once"
    for trial in infeasible:  # its parameter count broke the limit with its first fold
        assert trial.status is TrialStatus.PRUNED and trial.value_folds == 1, trial.error
        assert "infeasible: n_params" in trial.pruned_reason
        assert trial.constraint_values == [12 * trial.params["width"] + 3]
    feasible = [t for t in trials if t.feasible and t.status is TrialStatus.COMPLETED]
    best = study.best_trial
    if not feasible:
        assert best is None
        return
    assert best is not None and best.feasible
    assert best.value == min(t.value for t in feasible)
    assert [t.number for t in study.pareto_front] == [best.number]


def test_the_csv_and_the_dataframe_carry_each_objective_and_the_constraint(
    pareto: Study,
) -> None:
    frame = pareto.to_dataframe()
    scored = [
        "objective_val_loss",
        "objective_val_loss_std_error",
        "objective_n_params",
        "objective_n_params_std_error",
        "constraint_n_params",
        "feasible",
    ]
    assert list(frame.columns[frame.columns.get_loc("fold_1") + 1 :][:6]) == scored
    trials = {t.number: t for t in pareto.trials()}
    for row in frame.itertuples():
        trial = trials[row.number]
        (loss, loss_se), (params, _) = trial.objective_values
        assert (row.objective_val_loss, row.objective_val_loss_std_error) == (loss, loss_se)
        assert row.objective_n_params == params == row.constraint_n_params
        assert row.feasible is trial.feasible
