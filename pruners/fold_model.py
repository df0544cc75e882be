"""The study's fold model: every trial runs the same folds, so how hard each fold is and how
far a trial's folds scatter around its own level are learnt from all the study's trials at
once, not from one pair of trials.

    y_tj = mu_t + delta_j + e_tj,    sum_j delta_j = 0,    e_tj ~ N(0, sigma_t^2)

``mu_t`` is trial t's level, ``delta_j`` fold j's offset (shared by every trial: a hard fold
is hard for all of them; the fold-deviation term of Yerramilli & Apley's fractional CV, here
with one offset per fold), ``e`` the trial-by-fold noise. The offsets and a pooled noise
``sigma0^2`` are fitted by least squares (alternating means, which handle trials that ran
different folds) to the trials with two folds or more; while those are too few to tell the
offsets from the noise (the first completed trial alone), the model has no offsets and takes
all of a trial's fold spread for noise, which can only make it less sure. A trial's own noise
is shrunk towards the pool's by a scaled-inverse-chi-square prior worth ``PRIOR_DOF`` degrees
of freedom, so a trial whose folds scatter more than the study's is judged by its own spread,
and a trial with one fold by the pool's.

With that, a trial that ran n of K folds has a predictive for its mean over all K: its level
is the mean of its fold values less their offsets, each fold still to run adds its offset and
noise, and the mean over K is Student's t with ``PRIOR_DOF + n - 1`` degrees of freedom around

    (sum over run folds of y  +  sum over folds to run of (mu_hat + delta_j)) / K

with scale ``sigma_t * sqrt((K - n) / (n K))``. :func:`chance_below` is the probability that
it comes out below a value (losses: lower is better), which the ``model`` racing rule compares
with ``alpha`` (:mod:`pruners.racing`). The fit reads stored fold values only, so a restarted
scheduler builds the same model.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from scipy import stats

PRIOR_DOF = 8
"""How many degrees of freedom the pooled noise counts for against a trial's own spread."""

MIN_POOL_DOF = 3
"""Residual degrees of freedom the pool needs before the model judges anything."""

_ITERATIONS = 50
_TOLERANCE = 1e-12


@dataclass(frozen=True)
class FoldModel:
    """Fold offsets (by fold index, mean zero over the folds seen) and the pooled noise."""

    offsets: Mapping[int, float]
    noise: float
    """The pooled trial-by-fold standard deviation, sigma0."""
    dof: int
    """The pool's residual degrees of freedom."""
    trials: int
    """How many trials (with two folds or more) the pool rests on."""

    def predict_mean(self, values: Mapping[int, float], folds: int) -> tuple[float, float, int]:
        """The predictive of the mean over all ``folds`` folds of a trial whose finished folds
        have ``values`` (losses): its centre, its scale and its degrees of freedom (Student's
        t). The scale is 0 once every fold has run."""
        run = sorted(values)
        n = len(run)
        level = sum(values[k] - self.offsets.get(k, 0.0) for k in run) / n
        to_run = [k for k in range(folds) if k not in values]
        centre = (
            sum(values[k] for k in run) + sum(level + self.offsets.get(k, 0.0) for k in to_run)
        ) / folds
        dof = PRIOR_DOF + n - 1
        spread = self.noise**2 * PRIOR_DOF
        if n >= 2:
            spread += sum((values[k] - self.offsets.get(k, 0.0) - level) ** 2 for k in run)
        sigma = math.sqrt(spread / dof)
        left = len(to_run)
        return centre, sigma * math.sqrt(left / (n * folds)) if left else 0.0, dof

    def chance_below(self, values: Mapping[int, float], target: float, folds: int) -> float:
        """The probability that the mean over all ``folds`` folds of the trial whose finished
        folds have ``values`` (losses) comes out below ``target``."""
        centre, scale, dof = self.predict_mean(values, folds)
        if scale == 0.0:
            return 1.0 if centre < target else 0.0
        return float(stats.t.cdf((target - centre) / scale, df=dof))


def fit_fold_model(table: Mapping[object, Mapping[int, float]]) -> FoldModel | None:
    """The fold model of the trials in ``table`` (any key: each trial's fold values, losses),
    from those with two finite fold values or more; None while their residuals have fewer than
    ``MIN_POOL_DOF`` degrees of freedom (too few trials have run several folds)."""
    rows = [
        {k: float(v) for k, v in values.items() if math.isfinite(v)} for values in table.values()
    ]
    rows = [row for row in rows if len(row) >= 2]
    if not rows:
        return None
    folds = sorted({k for row in rows for k in row})
    column = {k: i for i, k in enumerate(folds)}
    trial_of, fold_of, y = [], [], []
    for t, row in enumerate(rows):
        for k, v in row.items():
            trial_of.append(t)
            fold_of.append(column[k])
            y.append(v)
    trial_index, fold_index, observed = np.array(trial_of), np.array(fold_of), np.array(y)
    per_trial = np.bincount(trial_index, minlength=len(rows))
    dof = len(observed) - len(rows) - (len(folds) - 1)
    if dof < MIN_POOL_DOF:  # too few to tell the folds' offsets from the noise: no offsets
        dof = len(observed) - len(rows)
        if dof < MIN_POOL_DOF:
            return None
        levels = np.bincount(trial_index, observed) / per_trial
        residuals = observed - levels[trial_index]
        noise = math.sqrt(float(residuals @ residuals) / dof)
        return FoldModel(offsets={}, noise=noise, dof=dof, trials=len(rows))
    per_fold = np.bincount(fold_index, minlength=len(folds))
    offsets = np.zeros(len(folds))
    for _ in range(_ITERATIONS):
        levels = np.bincount(trial_index, observed - offsets[fold_index]) / per_trial
        new = np.bincount(fold_index, observed - levels[trial_index], minlength=len(folds))
        new = new / np.maximum(per_fold, 1)
        new -= new.mean()
        moved = float(np.max(np.abs(new - offsets)))
        offsets = new
        if moved < _TOLERANCE:
            break
    levels = np.bincount(trial_index, observed - offsets[fold_index]) / per_trial
    residuals = observed - levels[trial_index] - offsets[fold_index]
    noise = math.sqrt(float(residuals @ residuals) / dof)
    return FoldModel(
        offsets={k: float(offsets[i]) for k, i in column.items()},
        noise=noise,
        dof=dof,
        trials=len(rows),
    )
