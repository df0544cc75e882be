"""How much the best trial's cross-validation value flatters it: the winner's curse.

The best of many trials scored on the same folds is picked for doing well on those folds, so
its K-fold mean is an optimistic estimate of how it does on new data (docs/cv.md measures
this on digits: the best of 30 trials promised a loss 15 % lower than its fold models gave on
the test data). Tibshirani & Tibshirani (2009, "A bias correction for the minimum error rate
in cross-validation", Annals of Applied Statistics 3(2)) estimate that optimism from the fold
values alone, with no new training: on each fold k, compare the winner's value with the best
value any candidate reached on that fold,

    bias = mean over k of [ e_k(winner) - min over trials of e_k(trial) ]     (minimising),

and report the winner's mean plus that bias (minus it when maximising). The bias is never
negative, grows with the number of candidates and with how much the folds disagree on which
trial is best, and is zero when the winner is also the best on every fold. The candidates are
the trials the winner was chosen among: the completed ones (that meet the study's constraints)
with a value on every fold.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class SelectionEstimate:
    """The winner's K-fold mean beside its selection-corrected estimate."""

    value: float
    """The winner's mean over its folds."""
    corrected: float
    """``value`` made worse by ``bias``: what to expect of the winner on new data."""
    bias: float
    """How much better than it deserves ``value`` looks (never negative), in the metric's
    units."""
    trials: int
    """The candidates the winner was picked among."""


def selection_estimate(
    winner: Sequence[float], fold_best: Sequence[float], *, trials: int, maximize: bool
) -> SelectionEstimate:
    """The Tibshirani-Tibshirani estimate for a winner of fold values ``winner``, picked among
    ``trials`` candidates whose best value on each fold is ``fold_best`` (the winner's own
    among them; every value finite)."""
    mine, best = np.asarray(winner, dtype=float), np.asarray(fold_best, dtype=float)
    if mine.shape != best.shape or not mine.size or trials < 1:
        raise ValueError("one value per fold for the winner and for the best of the trials")
    sign = -1.0 if maximize else 1.0  # minimise sign * value
    bias = max(0.0, float(np.mean(sign * (mine - best))))
    value = float(np.mean(mine))
    return SelectionEstimate(value=value, corrected=value + sign * bias, bias=bias, trials=trials)
