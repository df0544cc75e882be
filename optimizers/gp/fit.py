"""Fitting the GP of a suggestion: which results it sees, failures as a penalty, the MAP
hyperparameters and the conditioned model."""

from __future__ import annotations

import numpy as np

from foldwise.optimizers.gp.model import Columns, ExactGP, Hyper, fit_hyper

FIT_POINTS = 100
"""Hyperparameters are fitted on at most this many points, then polished on more."""
POLISH_POINTS = 250
"""The most points the polish of the hyperparameters sees (each step costs their cube)."""
MAX_ITERATIONS = 100
POLISH_ITERATIONS = 5


def keep_rows(y: np.ndarray, limit: int) -> np.ndarray:
    """Indices, in order, of at most ``limit`` rows: the best half and the most recent rest."""
    if len(y) <= limit:
        return np.arange(len(y))
    best = np.argsort(y, kind="stable")[: limit // 2]
    rest = np.setdiff1d(np.arange(len(y)), best)[len(best) - limit :]
    return np.sort(np.concatenate([best, rest]))


def penalize_failures(losses: np.ndarray) -> np.ndarray:
    """Losses with NaN (failed) entries replaced by worst + 0.1 × spread (see module doc)."""
    ok = np.isfinite(losses)
    if not ok.any():
        return np.zeros_like(losses)
    worst, best = losses[ok].max(), losses[ok].min()
    margin = 0.1 * ((worst - best) or max(abs(worst), 1.0))
    return np.where(ok, losses, worst + margin)


def fit_model(
    X: np.ndarray,
    y: np.ndarray,
    noise: np.ndarray,
    restarts: int,
    rng: np.random.Generator,
    columns: Columns | None = None,
    prior: str = "optuna",
) -> Hyper:
    """MAP hyperparameters: L-BFGS from the default and ``restarts`` random starts on at most
    ``FIT_POINTS`` rows (the best half and the most recent rest), then a few steps on at most
    ``POLISH_POINTS`` rows chosen the same way.

    The default starts at length-scale 0.5; random starts stay in [0.05, 2] (longer ones mostly
    end in the flat "all noise" optimum) with a noise floor between 1e-4 and 1e-1.
    """
    starts = [Hyper.default(X.shape[1], columns).theta]
    for _ in range(restarts):
        start = starts[0].copy()
        start[1:-1] = np.log(rng.uniform(0.05, 2.0, size=len(start) - 2))
        start[-1] = np.log(10.0 ** rng.uniform(-4.0, -1.0))
        starts.append(start)
    rows = keep_rows(y, FIT_POINTS)
    hyper = fit_hyper(X[rows], y[rows], noise[rows], starts, MAX_ITERATIONS, columns, prior)
    if len(rows) == len(y):
        return hyper
    rows = keep_rows(y, POLISH_POINTS)  # each step costs the cube of the rows it sees
    return fit_hyper(
        X[rows], y[rows], noise[rows], [hyper.theta], POLISH_ITERATIONS, columns, prior
    )


def condition(hyper: Hyper, X: np.ndarray, y: np.ndarray, noise: np.ndarray) -> ExactGP:
    """The GP with fixed hyperparameters conditioned on ``(X, y)`` with per-point noise."""
    return ExactGP(hyper, X, y, noise)
