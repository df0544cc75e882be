"""A trial's value and standard error from its folds."""

from __future__ import annotations

import pytest

from foldwise.pruners.dominance import FrontMember
from foldwise.pruners.fold_statistics import aggregate, front_spread, partial_std_error


def test_a_trials_value_is_its_fold_mean_and_its_error_the_standard_error() -> None:
    assert aggregate([0.3]) == (0.3, 0.0)
    mean, error = aggregate([0.1, 0.2, 0.6])
    assert mean == pytest.approx(0.3) and error == pytest.approx(0.152752523, rel=1e-6)


def test_a_pruned_trials_standard_error_comes_from_its_folds_or_the_incumbents_spread() -> None:
    mean, error = aggregate([0.2, 0.4])
    assert (mean, round(error, 9)) == (0.30000000000000004, 0.1)
    assert partial_std_error([0.2, 0.4], 5.0) == error
    assert partial_std_error([0.2], 0.07) == 0.07
    assert partial_std_error([0.2], None) is None


def test_the_fronts_spread_is_its_members_largest_fold_deviation_of_the_metric() -> None:
    wide = FrontMember(1, {0: {"loss": 0.1}, 1: {"loss": 0.5}})
    narrow = FrontMember(2, {0: {"loss": 0.2}, 1: {"loss": 0.3}, 2: {"loss": 0.25}})
    one_fold = FrontMember(3, {0: {"loss": 9.0}})  # no spread to measure on one fold
    assert front_spread([narrow, one_fold, wide], "loss") == pytest.approx(0.2828427)
    assert front_spread([one_fold], "loss") is None and front_spread([], "loss") is None
