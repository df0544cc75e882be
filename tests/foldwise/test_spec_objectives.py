"""Several objectives and constraints in the study spec: what a Pareto study may ask, what it
resolves to, and every refusal naming its field."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from foldwise.spec import STORED, Constraint, StudySpec

LIMIT = {"metric": "n_params", "op": "<=", "value": 500}
OP = {"op": "<=", "value": 0.5}
PARETO = [
    {"metric": "val_loss", "direction": "minimize"},
    {"metric": "n_params", "direction": "minimize"},
]


def _spec(**changes: Any) -> dict[str, Any]:
    spec = {
        "name": "pareto",
        "space": {"width": {"type": "int", "low": 4, "high": 64}},
        "budget": {"trials": 8},
        "trainer": {"task": "digits_mlp", "epochs": 2},
        "objectives": PARETO,
    }
    spec.update(changes)
    return {k: v for k, v in spec.items() if v is not None}


def _error(spec: dict[str, Any]) -> tuple[tuple, str]:
    with pytest.raises(ValidationError) as info:
        StudySpec.model_validate(spec)
    error = info.value.errors()[0]
    return error["loc"], error["msg"]


def test_several_objectives_resolve_with_the_first_as_the_objective_and_race() -> None:
    spec = StudySpec.model_validate(
        _spec(constraints=[{"metric": "n_params", "op": "<=", "value": 500}])
    )
    assert [o.metric for o in spec.all_objectives] == ["val_loss", "n_params"]
    assert spec.objective.metric == "val_loss" and spec.racing.rule == "forgiving"
    assert spec.scored_metrics == ["val_loss", "n_params"]
    stored = StudySpec.model_validate(spec.resolved(), context={STORED: True})
    assert stored.resolved() == spec.resolved()


def test_a_single_objective_study_scores_nothing_more_and_keeps_racing() -> None:
    spec = StudySpec.model_validate(_spec(objectives=None))
    assert spec.scored_metrics == [] and spec.racing.rule == "forgiving"
    assert spec.all_objectives == [spec.objective]
    constrained = StudySpec.model_validate(
        _spec(objectives=None, constraints=[{"metric": "n_params", "op": "<=", "value": 9}])
    )
    assert constrained.scored_metrics == ["val_loss", "n_params"]
    assert constrained.racing.rule == "forgiving"  # by dominance and feasibility


@pytest.mark.parametrize(
    ("changes", "loc", "words"),
    [
        ({"objectives": PARETO[:1]}, ("objectives",), "at least 2"),
        ({"objectives": PARETO * 3}, ("objectives",), "at most 4"),
        ({"objectives": [PARETO[0], PARETO[0]]}, ("objectives",), "more than once"),
        (
            {"objective": {"metric": "val_accuracy", "direction": "maximize"}},
            ("objective",),
            "not both",
        ),
        (
            {"objectives": [PARETO[0], {**PARETO[1], "use": "last"}]},
            ("objectives", 1, "use"),
            "objectives[0] picks",
        ),
        ({"pruning": {"rule": "median"}}, ("pruning", "rule"), "cannot prune"),
        ({"holdout": {"score": "ensemble"}}, ("holdout",), "one best trial"),
        ({"warm_start": {"studies": [1]}}, ("warm_start",), "warm start"),
        (
            {"constraints": [{"metric": "n_params", "op": "<", "value": 1}]},
            ("constraints", 0, "op"),
            "'<=' or '>='",
        ),
        (
            {"constraints": [{"metric": "n_params", "op": "<=", "value": float("inf")}]},
            ("constraints", 0, "value"),
            "",
        ),
        (
            {"constraints": [{"metric": "bad name", "op": "<=", "value": 1}]},
            ("constraints", 0, "metric"),
            "",
        ),
        (
            {"constraints": [LIMIT, {**LIMIT, "value": 5.0}, {**LIMIT, "op": ">=", "value": 9}]},
            ("constraints", 2, "value"),
            "n_params <= 5 and >= 9 cannot both hold",
        ),
        (
            {"constraints": [LIMIT, {"metric": "val_loss", **OP}, LIMIT]},
            ("constraints", 2),
            "twice",
        ),
    ],
)
def test_a_pareto_spec_that_cannot_run_is_refused_naming_its_field(
    changes: dict[str, Any], loc: tuple, words: str
) -> None:
    where, message = _error(_spec(**changes))
    assert where[: len(loc)] == loc, (where, message)
    assert words in message


def test_a_constraint_measures_its_violation_relative_to_its_limit() -> None:
    at_most = Constraint(metric="n_params", op="<=", value=1000)
    assert at_most.holds(1000) and at_most.violation(900) == 0
    assert not at_most.holds(1500) and at_most.violation(1500) == pytest.approx(0.5)
    at_least = Constraint(metric="val_accuracy", op=">=", value=0.5)
    assert at_least.violation(0.25) == pytest.approx(0.25)  # limits below 1 count absolutely


def test_a_metric_may_be_held_within_a_range_and_a_stored_spec_is_not_checked_again() -> None:
    between = [{**LIMIT, "op": ">=", "value": 100}, LIMIT, {**LIMIT, "value": 500.5}]
    assert len(StudySpec.model_validate(_spec(constraints=between)).constraints) == 3
    impossible = _spec(constraints=[LIMIT, {**LIMIT, "op": ">=", "value": 600}])
    stored = StudySpec.model_validate(impossible, context={STORED: True})  # as it was accepted
    assert [c.value for c in stored.constraints] == [500, 600]
