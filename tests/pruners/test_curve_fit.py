"""The learning-curve forecast of the curve pruning rule: exact on the curves its families
describe, never above what a run already reached, and a bound that noisy runs rarely beat
(so the rule prunes few runs that would have ended well)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from foldwise.pruners.curve_fit import MIN_POINTS, optimistic_final

T = np.arange(1, 21, dtype=float)


@pytest.mark.parametrize(
    "curve",
    [0.1 + 0.5 * T**-0.7, 0.1 + 0.5 * np.exp(-0.3 * T), 0.2 + 0.3 / np.log(T + math.e - 1)],
    ids=["pow", "exp", "log"],
)
def test_the_bound_lies_below_the_end_of_a_curve_of_any_family(curve: np.ndarray) -> None:
    """The most optimistic family decides: a curve that one family describes exactly is not
    forecast exactly (another family extrapolates lower), but never above where it ends."""
    for n in (MIN_POINTS, 6, 12):
        bound = optimistic_final(curve[:n], 20)
        assert curve[-1] - 0.15 < bound <= curve[-1] + 1e-9


def test_a_flat_run_is_forecast_to_stay_where_it_is_and_a_few_epochs_give_nothing() -> None:
    assert optimistic_final([0.5] * 6, 20) == pytest.approx(0.5, abs=1e-5)
    assert optimistic_final([0.9, 0.7, 0.6], 20) is None and MIN_POINTS == 4
    assert optimistic_final([0.9, float("nan"), 0.6, 0.5], 20) is None


def test_the_bound_is_never_above_what_the_run_already_reached() -> None:
    rising = [0.3, 0.3, 0.3, 0.3, 0.3]  # a best-so-far curve cannot rise; flat is its worst
    assert optimistic_final(rising, 20) <= 0.3
    noisy = np.minimum.accumulate(
        0.2 + 0.3 * T**-0.5 + np.random.default_rng(0).normal(0, 0.02, 20)
    )
    for n in range(MIN_POINTS, 20):
        assert optimistic_final(noisy[:n], 20) <= noisy[n - 1]


def test_noisy_runs_seldom_end_better_than_their_bound_after_a_third_of_their_epochs() -> None:
    """400 noisy runs of random power and exponential curves: how often a run's end beats the
    bound drawn from its first 6 or 10 of 20 epochs (what would make the rule prune a run that
    would have ended as well)."""
    rng = np.random.default_rng(1)
    above = {6: 0, 10: 0}
    runs = 400
    for i in range(runs):
        level, scale, rate = rng.uniform(0.05, 0.3), rng.uniform(0.2, 0.8), rng.uniform(0.2, 1.0)
        clean = level + scale * (T**-rate if i % 2 else np.exp(-0.5 * rate * T))
        run = np.minimum.accumulate(clean + rng.normal(0, rng.uniform(0.005, 0.03), 20))
        for n in above:
            above[n] += optimistic_final(run[:n], 20) > run[-1]
    assert above[6] / runs < 0.15 and above[10] / runs < 0.07
