"""Racing by dominance: the verdicts on a trial of a study scored on several metrics, from its
fold metrics and the front's."""

from __future__ import annotations

import statistics
from typing import Any

import pytest

from foldwise.pruners.dominance import FrontMember, dominance_verdict
from foldwise.pruners.fold_statistics import scored_fields
from foldwise.spec import StudySpec

OBJECTIVES = [
    {"metric": "val_loss", "direction": "minimize"},
    {"metric": "val_accuracy", "direction": "maximize"},
]
SMALL = {"metric": "n_params", "op": "<=", "value": 1000}


def _spec(**changes: Any) -> StudySpec:
    spec = {
        "name": "race",
        "space": {"width": {"type": "int", "low": 4, "high": 64}},
        "budget": {"trials": 8},
        "parallel": {"folds": 4},
        "trainer": {"task": "digits_mlp", "epochs": 2},
        "objectives": OBJECTIVES,
        "constraints": [SMALL],
        **changes,
    }
    return StudySpec.model_validate(spec)


def _folds(*rows: tuple[float, float, float]) -> dict[int, dict[str, float]]:
    """Fold k's (val_loss, val_accuracy, n_params) → its metrics."""
    names = ("val_loss", "val_accuracy", "n_params")
    return {k: dict(zip(names, row, strict=True)) for k, row in enumerate(rows)}


MEMBER = FrontMember(
    3,
    _folds((0.20, 0.90, 500), (0.24, 0.88, 500), (0.22, 0.89, 500), (0.22, 0.89, 500)),
)
"""Worst fold 0.02 from its mean on val_loss, 0.01 on val_accuracy."""


def test_a_trial_clearly_worse_on_every_objective_is_dominated() -> None:
    reason = dominance_verdict(_spec(), _folds((0.40, 0.80, 600), (0.42, 0.79, 600)), [MEMBER])
    assert reason is not None and reason.startswith("after 2 of 4 folds: dominated by trial 3")
    assert "val_loss 0.41 vs 0.22" in reason and "val_accuracy 0.795 vs 0.89" in reason


def test_a_trial_better_on_one_objective_goes_on() -> None:
    better_accuracy = _folds((0.40, 0.95, 600), (0.42, 0.96, 600))
    assert dominance_verdict(_spec(), better_accuracy, [MEMBER]) is None
    within_spread = _folds((0.40, 0.885, 600), (0.42, 0.875, 600))  # 0.01 worse: forgiven
    assert dominance_verdict(_spec(), within_spread, [MEMBER]) is None


def test_a_trial_breaking_a_constraint_on_every_fold_is_infeasible_even_without_a_front() -> None:
    reason = dominance_verdict(_spec(), _folds((0.1, 0.99, 1500)), [])
    assert reason == (
        "after 1 of 4 folds: infeasible: n_params 1500 breaks <= 1000 on every finished fold, "
        "by 500, with no front yet to forgive by"
    )
    with_front = dominance_verdict(_spec(), _folds((0.1, 0.99, 1500)), [MEMBER])
    assert with_front is not None and with_front.endswith("more than the front's fold spread 0")
    assert dominance_verdict(_spec(), _folds((0.1, 0.99, 900)), []) is None


def test_a_noisy_constraint_is_forgiven_by_the_fronts_spread() -> None:
    accuracy_floor = {"metric": "val_accuracy", "op": ">=", "value": 0.885}
    spec = _spec(constraints=[accuracy_floor])
    # 0.88 breaks the floor by 0.005, within the member's 0.01 spread; 0.80 does not
    assert dominance_verdict(spec, _folds((0.10, 0.88, 1)), [MEMBER]) is None
    assert "infeasible: val_accuracy" in dominance_verdict(spec, _folds((0.10, 0.80, 1)), [MEMBER])
    # one fold that holds is enough to go on
    mixed = _folds((0.10, 0.80, 1), (0.10, 0.90, 1))
    assert dominance_verdict(spec, mixed, [MEMBER]) is None


@pytest.mark.parametrize(
    ("changes", "metrics"),
    [
        ({}, {}),  # before min_folds
        ({}, _folds(*[(0.9, 0.1, 600)] * 4)),  # every fold ran: it completes instead
        ({"racing": {"rule": "off"}}, _folds((0.9, 0.1, 5000))),
        ({"racing": {"min_folds": 2}}, _folds((0.9, 0.1, 5000))),
    ],
)
def test_no_verdict_outside_the_race(changes: dict[str, Any], metrics: dict) -> None:
    assert dominance_verdict(_spec(**changes), metrics, [MEMBER]) is None


def test_a_member_that_did_not_run_every_fold_is_no_reference() -> None:
    partial = FrontMember(5, dict(list(MEMBER.metrics.items())[:2]))
    assert dominance_verdict(_spec(), _folds((0.40, 0.80, 600)), [partial]) is None


def test_the_ttest_rule_needs_every_objective_significantly_worse() -> None:
    spec = _spec(racing={"rule": "ttest", "alpha": 0.1})
    worse = _folds((0.40, 0.80, 600), (0.45, 0.78, 600), (0.43, 0.81, 600))
    reason = dominance_verdict(spec, worse, [MEMBER])
    assert reason is not None and "paired t-tests < 0.1" in reason
    mixed = _folds((0.40, 0.80, 600), (0.45, 0.95, 600), (0.43, 0.81, 600))
    assert dominance_verdict(spec, mixed, [MEMBER]) is None
    assert dominance_verdict(spec, _folds((0.40, 0.80, 600)), [MEMBER]) is None  # min 2 folds


def test_the_posterior_rule_prunes_what_cannot_beat_a_member_over_all_folds() -> None:
    spec = _spec(racing={"rule": "posterior", "alpha": 0.1})
    worse = _folds((0.40, 0.80, 600), (0.45, 0.78, 600), (0.43, 0.81, 600))
    reason = dominance_verdict(spec, worse, [MEMBER])
    assert reason is not None and "each below 0.1, over all 4 folds" in reason
    mixed = _folds((0.40, 0.80, 600), (0.45, 0.95, 600), (0.43, 0.81, 600))
    assert dominance_verdict(spec, mixed, [MEMBER]) is None  # ahead on accuracy on one fold


def test_the_posterior_rule_judges_a_constraint_by_its_mean_over_all_folds() -> None:
    spec = _spec(racing={"rule": "posterior", "alpha": 0.1})
    over = _folds((0.1, 0.99, 1500), (0.1, 0.99, 1700), (0.1, 0.99, 1600))
    reason = dominance_verdict(spec, over, [])
    assert reason is not None and "that its mean over all folds meets it" in reason
    # over on two folds, but so unevenly that the two to come may still bring the mean under
    # (probability 0.2); one fold more just over leaves them too little room (0.09)
    near = _folds((0.1, 0.99, 1001), (0.1, 0.99, 1400))
    assert dominance_verdict(spec, near, []) is None
    assert dominance_verdict(spec, {**near, 2: {**near[0], "n_params": 1002}}, []) is not None
    assert dominance_verdict(spec, _folds((0.1, 0.99, 1500), (0.1, 0.99, 900)), []) is None


def test_a_trial_pruned_after_one_fold_takes_the_fronts_spread_as_its_error() -> None:
    spec = _spec()
    one_fold = _folds((0.40, 0.80, 600))
    with_front = scored_fields(spec, one_fold, [MEMBER])
    loss_spread = statistics.stdev(f["val_loss"] for f in MEMBER.metrics.values())
    assert with_front["objective_values"][0] == [0.40, pytest.approx(loss_spread)]
    assert scored_fields(spec, one_fold)["objective_values"][0] == [0.40, None]  # no front
    assert with_front["constraint_values"] == [600] and with_front["feasible"] is True
    two_folds = scored_fields(spec, _folds((0.40, 0.80, 600), (0.42, 0.79, 600)), [MEMBER])
    assert two_folds["objective_values"][0] == [pytest.approx(0.41), pytest.approx(0.01)]
