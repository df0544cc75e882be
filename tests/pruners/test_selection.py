"""The winner's-curse estimate: its arithmetic, its direction, and that it removes most of the
optimism of picking the best of many noisy trials."""

from __future__ import annotations

import numpy as np
import pytest

from foldwise.pruners.selection import selection_estimate


def test_the_bias_is_the_winners_mean_gap_to_each_folds_best() -> None:
    folds = np.array([[0.10, 0.30, 0.20], [0.20, 0.10, 0.25], [0.30, 0.25, 0.05]])
    winner = int(np.argmin(folds.mean(axis=1)))  # means 0.200, 0.183, 0.200: the second
    assert winner == 1
    estimate = selection_estimate(folds[winner], folds.min(axis=0), trials=3, maximize=False)
    # its gaps to the fold bests 0.10, 0.10, 0.05: 0.10, 0, 0.20
    assert estimate.value == pytest.approx(0.55 / 3)
    assert estimate.bias == pytest.approx(0.30 / 3)
    assert estimate.corrected == pytest.approx(0.85 / 3)
    assert estimate.trials == 3


def test_maximising_corrects_downwards() -> None:
    estimate = selection_estimate([0.9, 0.8], [0.95, 0.8], trials=5, maximize=True)
    assert estimate.bias == pytest.approx(0.025)
    assert estimate.corrected == pytest.approx(0.825)


def test_a_winner_best_on_every_fold_has_no_bias() -> None:
    estimate = selection_estimate([0.1, 0.2], [0.1, 0.2], trials=40, maximize=False)
    assert estimate.bias == 0.0 and estimate.corrected == estimate.value


def test_mismatched_folds_are_refused() -> None:
    with pytest.raises(ValueError, match="one value per fold"):
        selection_estimate([0.1, 0.2], [0.1], trials=2, maximize=False)
    with pytest.raises(ValueError, match="one value per fold"):
        selection_estimate([], [], trials=2, maximize=False)


def test_it_removes_most_of_the_optimism_of_the_best_of_many_noisy_trials() -> None:
    """60 trials whose true losses differ little against the fold noise: the winner's K-fold
    mean promises better than its true loss; the corrected estimate comes much closer."""
    rng = np.random.default_rng(0)
    naive, corrected = [], []
    for _ in range(200):
        truth = rng.normal(0.5, 0.01, size=60)
        fold_effect = rng.normal(0.0, 0.02, size=5)  # shared by every trial: the same folds
        folds = truth[:, None] + fold_effect + rng.normal(0.0, 0.03, size=(60, 5))
        winner = int(np.argmin(folds.mean(axis=1)))
        estimate = selection_estimate(folds[winner], folds.min(axis=0), trials=60, maximize=False)
        expected = truth[winner] + fold_effect.mean()  # its loss on folds like these, noise aside
        naive.append(estimate.value - expected)
        corrected.append(estimate.corrected - expected)
    assert np.mean(naive) < -0.02  # optimistic by about one fold-noise standard error or more
    assert abs(np.mean(corrected)) < 0.5 * abs(np.mean(naive))
