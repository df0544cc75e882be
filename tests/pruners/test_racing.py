"""Racing rules: a trial against the incumbent on the same folds, and only on those."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from foldwise.pruners.racing import (
    Incumbent,
    behind_a_peer,
    chance_to_beat,
    paired_p_value,
    race_verdict,
)
from foldwise.racing import Racing

INCUMBENT = Incumbent(number=3, values={0: 0.10, 1: 0.12, 2: 0.30, 3: 0.11, 4: 0.13})
FORGIVING = Racing(rule="forgiving", min_folds=2)
TTEST = Racing(rule="ttest", min_folds=2, alpha=0.1)


def verdict(racing: Racing, values: dict[int, float], **kwargs) -> str | None:
    incumbent = kwargs.pop("incumbent", INCUMBENT)
    return race_verdict(racing, values, incumbent, **{"folds": 5, "maximize": False, **kwargs})


def test_forgiving_prunes_a_trial_worse_on_the_same_folds_than_the_incumbents_spread() -> None:
    # the incumbent's worst fold (0.30) lies 0.148 above its mean (0.152): the tolerance
    reason = verdict(FORGIVING, {0: 0.31, 1: 0.29})
    assert reason == (
        "after 2 of 5 folds: 0.3 ± 0.01 vs incumbent (trial 3) 0.11 on the same folds, worse "
        "by 0.19, more than the incumbent's worst fold lies from its mean (0.15; forgiving rule)"
    )
    assert verdict(FORGIVING, {0: 0.26, 1: 0.24}) is None  # worse by 0.14 only


def test_forgiving_compares_fold_by_fold_not_with_the_incumbents_mean() -> None:
    # a mean of 0.35 is far above the incumbent's mean over all folds (0.152), but fold 2 is
    # hard for everyone: on folds 2 and 3 the incumbent has 0.205, so the trial is worse by
    # 0.145 only (under the 0.148 tolerance); with 0.45 it is worse by 0.245
    assert verdict(FORGIVING, {2: 0.40, 3: 0.30}) is None
    assert verdict(FORGIVING, {2: 0.50, 3: 0.40}) is not None


def test_no_verdict_before_min_folds_after_every_fold_or_without_an_incumbent() -> None:
    assert verdict(FORGIVING, {0: 9.0}) is None
    assert verdict(Racing(rule="forgiving", min_folds=1), {0: 9.0}) is not None
    assert verdict(FORGIVING, dict.fromkeys(range(5), 9.0)) is None
    assert verdict(FORGIVING, {0: 9.0, 1: 9.0}, incumbent=None) is None
    assert verdict(Racing(rule="off"), {0: 9.0, 1: 9.0}) is None


def test_an_incumbent_must_have_run_every_fold() -> None:
    partial = Incumbent(number=1, values={0: 0.1, 1: 0.1, 2: 0.1, 3: 0.1})
    assert verdict(FORGIVING, {0: 0.5, 1: 0.5}, incumbent=partial) is None


def test_maximized_objectives_prune_the_lower_trial() -> None:
    accuracy = Incumbent(number=0, values={0: 0.95, 1: 0.96, 2: 0.97})  # tolerance 0.01
    low = {0: 0.80, 1: 0.82}
    assert "0.81" in verdict(FORGIVING, low, incumbent=accuracy, folds=3, maximize=True)
    close = {0: 0.95, 1: 0.955}  # worse by 0.0025 only
    assert verdict(FORGIVING, close, incumbent=accuracy, folds=3, maximize=True) is None


def test_the_paired_p_value_is_scipys_one_sided_paired_t_test() -> None:
    mine, theirs = [0.3, 0.35, 0.28], [0.1, 0.2, 0.15]
    expected = stats.ttest_rel(mine, theirs, alternative="greater").pvalue
    assert paired_p_value(mine, theirs) == pytest.approx(expected)
    assert paired_p_value([0.5, 0.75], [0.25, 0.5]) == 0.0  # worse by as much on both
    assert paired_p_value([0.1, 0.2], [0.1, 0.2]) == 1.0


def test_ttest_prunes_only_a_consistent_difference() -> None:
    steady = verdict(TTEST, {0: 0.20, 1: 0.23, 3: 0.20})
    assert steady is not None and "paired t-test p = " in steady and "< 0.1" in steady
    noisy = {0: 0.60, 1: 0.05, 3: 0.25}  # worse on average, better on fold 1
    assert verdict(TTEST, noisy) is None
    assert verdict(FORGIVING, noisy) is not None


POSTERIOR = Racing(rule="posterior", min_folds=2, alpha=0.1)


def _monte_carlo_chance(differences: list[float], folds: int, draws: int = 200_000) -> float:
    """The same probability by sampling the model: (mean, variance) from the posterior under
    Jeffreys' prior, then the folds to come; how often the K-fold mean difference is below 0."""
    rng = np.random.default_rng(0)
    n, mean = len(differences), float(np.mean(differences))
    s2 = float(np.var(differences, ddof=1))
    variance = (n - 1) * s2 / rng.chisquare(n - 1, draws)
    mu = rng.normal(mean, np.sqrt(variance / n))
    future = rng.normal(mu, np.sqrt(variance / (folds - n)))  # mean of the K - n to come
    return float(np.mean((n * mean + (folds - n) * future) / folds < 0))


@pytest.mark.parametrize(
    ("mine", "theirs", "folds"),
    [
        ([0.3, 0.2], [0.25, 0.22], 5),
        ([0.3, 0.2, 0.31], [0.25, 0.18, 0.2], 5),
        ([1, 3, 2, 5], [2, 2, 1, 3], 10),
    ],
)
def test_the_chance_to_beat_is_the_models_posterior_predictive(mine, theirs, folds) -> None:
    differences = [a - b for a, b in zip(mine, theirs, strict=True)]
    expected = _monte_carlo_chance(differences, folds)
    assert chance_to_beat(mine, theirs, folds=folds) == pytest.approx(expected, abs=0.005)


def test_the_chance_to_beat_says_no_doubt_where_the_folds_leave_none() -> None:
    assert chance_to_beat([0.5, 0.75], [0.25, 0.5], folds=5) == 0.0  # behind by 0.25 on each
    assert chance_to_beat([0.25, 0.5], [0.25, 0.5], folds=5) == 1.0  # a tie is not behind
    assert chance_to_beat([0.25, 0.5], [0.5, 0.75], folds=5) == 1.0
    assert chance_to_beat([0.3, 0.2, 0.4], [0.2, 0.3, 0.1], folds=3) == 0.0  # all folds ran


def test_the_posterior_rule_prunes_sooner_the_fewer_folds_are_left_to_run() -> None:
    # the same two differences (behind by 0.02 and 0.06): a one-sided p of 0.15 against the
    # incumbent on those folds, too weak for the t-test at 0.1; with 3 of 5 folds still to
    # run the mean can still turn, with 1 of 3 it cannot
    mine, theirs = [0.12, 0.18], [0.10, 0.12]
    assert paired_p_value(mine, theirs) > TTEST.alpha
    assert chance_to_beat(mine, theirs, folds=5) > POSTERIOR.alpha
    assert chance_to_beat(mine, theirs, folds=3) < POSTERIOR.alpha
    for n in (2, 3, 4):  # behind: at every point of the race at most the t-test's p
        values = [0.2, 0.16, 0.31, 0.14][:n]
        shared = [INCUMBENT.values[k] for k in range(n)]
        assert chance_to_beat(values, shared, folds=5) <= paired_p_value(values, shared)


def test_the_posterior_rule_says_why_it_pruned() -> None:
    reason = verdict(POSTERIOR, {0: 0.13, 1: 0.16, 2: 0.34, 3: 0.15})
    assert reason is not None and reason.startswith(
        "after 4 of 5 folds: 0.195 ± 0.049 vs incumbent (trial 3) 0.1575 on the same folds, "
        "probability "
    )
    assert reason.endswith(" < 0.1 that its mean over all 5 folds beats the incumbent's")
    assert verdict(POSTERIOR, {0: 0.16, 1: 0.11}) is None  # behind on one, ahead on the other
    assert verdict(POSTERIOR, {0: 0.09, 1: 0.11, 2: 0.29, 3: 0.10}) is None  # ahead


def test_before_an_incumbent_a_trial_is_behind_a_peer_that_did_better_on_the_same_folds() -> None:
    mine = {0: 0.30, 1: 0.40}
    assert behind_a_peer(mine, [{0: 0.25}], maximize=False)  # better on fold 0
    assert not behind_a_peer(mine, [{0: 0.35}, {2: 0.1}], maximize=False)  # no fold shared
    assert behind_a_peer(mine, [{0: 0.35}], maximize=True)
    assert not behind_a_peer(mine, [], maximize=False)
