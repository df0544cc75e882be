"""Probability of feasibility (Gardner et al. 2014): where a constraint is likely to hold.

Each constraint gets its own GP on the trials' signed gaps to the limit (positive: broken by
that much, relative to the limit's size; negative: held with that much room), so the model
learns where the feasible region lies and how far from its edge a trial stands, which a penalty
on the objective cannot tell. The gaps are put through ``sign(g) · log1p(|g|)`` before they are
standardised: a parameter count broken a hundredfold is not a hundred times as informative as
one broken by half, and the transform keeps both the order and the limit at 0.

The acquisition adds ``log P(feasible)``, the sum over constraints of ``log Φ((t − μ) / σ)``
(``t`` the limit in model units), to the objective's log expected improvement, as Optuna's
GPSampler and BoTorch's constrained acquisitions do. Failed trials reported no metric and are
left out of these models.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import log_ndtr

from foldwise.optimizers.gp.model import Columns, ExactGP, Hyper, fit_hyper

FIT_ITERATIONS = 50
FIT_POINTS = 100
"""A constraint's hyperparameters are fitted on its most recent rows at most; its model then
conditions on all of them."""


def squash(gaps: np.ndarray) -> np.ndarray:
    """``sign(g) · log1p(|g|)``: heavy tails pulled in, order and the limit at 0 kept."""
    return np.sign(gaps) * np.log1p(np.abs(gaps))


@dataclass(frozen=True)
class ConstraintModel:
    """One constraint's GP on standardised squashed gaps, and where its limit lies."""

    model: ExactGP
    limit: float

    def log_probability(self, X: np.ndarray) -> np.ndarray:
        mean, std = self.model.predict(X, return_std=True)
        return log_ndtr((self.limit - mean) / std)

    def log_probability_gradient(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        mean, std, d_mean, d_std = self.model.predict_gradient(X)
        z = (self.limit - mean) / std
        value = log_ndtr(z)
        # d log Φ(z)/dz = φ(z)/Φ(z), taken in logs so it stays finite far outside the region
        ratio = np.exp(-0.5 * z**2 - 0.5 * np.log(2.0 * np.pi) - value)
        dz = -(d_mean + z[:, None] * d_std) / std[:, None]
        return value, ratio[:, None] * dz


@dataclass(frozen=True)
class Feasibility:
    """Every constraint's model: the log probability that all of them hold, and its gradient."""

    constraints: tuple[ConstraintModel, ...]

    @classmethod
    def fit(
        cls, X: np.ndarray, gaps: np.ndarray, columns: Columns | None, prior: str
    ) -> Feasibility:
        """Models of ``gaps`` (a row per row of ``X``, a column per constraint, NaN where a
        trial reported nothing); a constraint whose gaps are all equal or unknown is left
        out (the model has nothing to learn from it)."""
        models = []
        for column in np.atleast_2d(gaps.T):
            known = np.isfinite(column)
            values = squash(column[known])
            if len(values) < 2 or values.std() == 0.0:
                continue
            centre, scale = values.mean(), values.std()
            y = (values - centre) / scale
            noise = np.zeros(len(y))
            start = [Hyper.default(X.shape[1], columns).theta]
            recent = slice(-FIT_POINTS, None)  # the fit's cost grows with the cube of its rows
            X_known = X[known]
            hyper = fit_hyper(
                X_known[recent], y[recent], noise[recent], start, FIT_ITERATIONS, columns, prior
            )
            models.append(ConstraintModel(ExactGP(hyper, X_known, y, noise), -centre / scale))
        return cls(tuple(models))

    def log_probability(self, X: np.ndarray) -> np.ndarray:
        total = np.zeros(len(X))
        for constraint in self.constraints:
            total += constraint.log_probability(X)
        return total

    def log_probability_gradient(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        value, gradient = np.zeros(len(X)), np.zeros_like(X, dtype=float)
        for constraint in self.constraints:
            v, g = constraint.log_probability_gradient(X)
            value, gradient = value + v, gradient + g
        return value, gradient

    def probability(self, X: np.ndarray) -> np.ndarray:
        return np.exp(self.log_probability(X))
