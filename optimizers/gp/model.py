"""A small exact Gaussian process with per-point noise, fitted fast enough to run every suggestion.

The model is skopt's default for Bayesian optimisation (amplitude × Matérn 5/2 with one
length-scale per parameter, plus a learned white-noise floor) with each point's own extra noise
variance added on the diagonal, the role of the regressor's per-sample ``alpha``. sklearn's
regressor refits through generic kernel objects and was the whole cost of a suggestion (0.4 s at
100 points); here the log marginal likelihood and its gradient are a Cholesky factor and a few
array products. Weak priors on the hyperparameters (as Optuna's GPSampler uses) keep the fit
away from the degenerate "everything is noise" and "needle" optima on few points.

A categorical parameter is k one-hot columns that share one length-scale, stretched by √2 so two
different categories are one length-scale apart: the Hamming-distance kernel Optuna's GPSampler
uses, with one hyperparameter per categorical instead of k.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.linalg import cho_solve, cholesky, lapack, solve_triangular
from scipy.optimize import minimize

JITTER = 1e-8
SQRT5 = math.sqrt(5.0)
LOG_BOUNDS = (math.log(1e-3), math.log(1e3))
"""Bounds of every log hyperparameter but the noise floor."""
NOISE_BOUNDS = (math.log(1e-6), math.log(1.0))


@dataclass(frozen=True)
class Columns:
    """How encoded columns map to length-scales: ``group[c]`` is column c's length-scale and
    ``stretch[c]`` a fixed factor on it (√2 for one-hot columns, 1 for numeric ones)."""

    group: np.ndarray
    stretch: np.ndarray

    @classmethod
    def of_blocks(cls, widths: list[int]) -> Columns:
        """One length-scale per block of columns; a block wider than one is one-hot."""
        group = np.repeat(np.arange(len(widths)), widths)
        stretch = np.concatenate([np.full(w, math.sqrt(2.0) if w > 1 else 1.0) for w in widths])
        return cls(group, stretch)

    @property
    def scales(self) -> int:
        return int(self.group.max()) + 1 if len(self.group) else 0


@dataclass(frozen=True)
class Hyper:
    """Log amplitude, log length-scales and log noise floor, packed as L-BFGS sees them."""

    theta: np.ndarray
    columns: Columns | None = None
    """None: one length-scale per column."""

    @classmethod
    def default(cls, dims: int, columns: Columns | None = None) -> Hyper:
        scales = dims if columns is None else columns.scales
        return cls(np.array([0.0, *np.full(scales, math.log(0.5)), math.log(1e-2)]), columns)

    @property
    def amplitude(self) -> float:
        return float(np.exp(self.theta[0]))

    @property
    def lengths(self) -> np.ndarray:
        """The fitted length-scales, one per parameter (per column without ``columns``)."""
        return np.exp(self.theta[1:-1])

    @property
    def scales(self) -> np.ndarray:
        """Each encoded column's effective length-scale."""
        if self.columns is None:
            return self.lengths
        return self.lengths[self.columns.group] * self.columns.stretch

    @property
    def floor(self) -> float:
        return float(np.exp(self.theta[-1]))


def matern52(r: np.ndarray) -> np.ndarray:
    """Matérn 5/2 correlation at scaled distance ``r``."""
    return (1.0 + SQRT5 * r + 5.0 / 3.0 * r**2) * np.exp(-SQRT5 * r)


def scaled_distance(A: np.ndarray, B: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """Euclidean distances between rows of A and B after dividing columns by ``scales``."""
    A, B = A / scales, B / scales
    sq = (A**2).sum(1)[:, None] + (B**2).sum(1)[None, :] - 2.0 * A @ B.T
    return np.sqrt(np.maximum(sq, 0.0))


def neg_log_posterior(
    theta: np.ndarray,
    X: np.ndarray,
    y: np.ndarray,
    noise: np.ndarray,
    columns: Columns | None = None,
    prior: str = "optuna",
) -> tuple[float, np.ndarray]:
    """Negative log marginal likelihood minus log prior, and its gradient in ``theta``."""
    hyper, n = Hyper(theta, columns), len(y)
    r = scaled_distance(X, X, hyper.scales)
    decay = hyper.amplitude * np.exp(-SQRT5 * r)
    K = decay * (1.0 + SQRT5 * r + 5.0 / 3.0 * r**2)
    grad = np.empty_like(theta)
    K_amp = K.copy()
    K[np.diag_indices(n)] += noise + hyper.floor + JITTER
    try:
        L = cholesky(K, lower=True, check_finite=False)
    except np.linalg.LinAlgError:
        return 1e10, np.zeros_like(theta)
    alpha = cho_solve((L, True), y, check_finite=False)
    K_inv, _ = lapack.dpotri(L, lower=True)
    K_inv = np.tril(K_inv) + np.tril(K_inv, -1).T
    W = np.outer(alpha, alpha) - K_inv
    nll = 0.5 * y @ alpha + np.log(np.diag(L)).sum() + 0.5 * n * math.log(2 * math.pi)
    grad[0] = -0.5 * (W * K_amp).sum()
    # dK/dlog ℓ_k = G ∘ (x_ik − x_jk)² / ℓ_k²; the sum over pairs expands into products with X
    G = W * decay * (5.0 / 3.0) * (1.0 + SQRT5 * r)
    pair_sums = 2.0 * (G.sum(1) @ X**2 - (X * (G @ X)).sum(0))
    per_column = -0.5 * pair_sums / hyper.scales**2
    if columns is None:
        grad[1:-1] = per_column
    else:  # a shared length-scale moves all its columns
        grad[1:-1] = np.bincount(columns.group, per_column, minlength=columns.scales)
    grad[-1] = -0.5 * np.trace(W) * hyper.floor
    value, prior_grad = PRIORS[prior](hyper)
    return float(nll - value), grad - prior_grad


def log_prior(hyper: Hyper) -> tuple[float, np.ndarray]:
    """Optuna GPSampler's priors: Gamma(2, 1) amplitude, Gamma(1.1, 30) noise, and a penalty
    ``0.1(ℓ² + ℓ⁻²)`` on each length-scale; with their gradients in log space."""
    a, s, ell2 = hyper.amplitude, hyper.floor, hyper.lengths**2
    value = math.log(a) - a + 0.1 * math.log(s) - 30.0 * s - 0.1 * (ell2 + 1.0 / ell2).sum()
    grad = np.concatenate([[1.0 - a], -0.2 * (ell2 - 1.0 / ell2), [0.1 - 30.0 * s]])
    return float(value), grad


def dimension_scaled_prior(hyper: Hyper) -> tuple[float, np.ndarray]:
    """Hvarfner et al. (ICML 2024), BoTorch's default: each length-scale LogNormal(√2 + ln(d)/2,
    √3) for d parameters, so the expected complexity of the function does not grow with d;
    amplitude and noise floor as in :func:`log_prior`."""
    t = hyper.theta[1:-1]
    mu, var = math.sqrt(2.0) + 0.5 * math.log(max(len(t), 1)), 3.0
    a, s = hyper.amplitude, hyper.floor
    value = math.log(a) - a + 0.1 * math.log(s) - 30.0 * s
    value += float((-((t - mu) ** 2) / (2.0 * var) - t).sum())
    grad = np.concatenate([[1.0 - a], -(t - mu) / var - 1.0, [0.1 - 30.0 * s]])
    return float(value), grad


PRIORS = {"optuna": log_prior, "dimension-scaled": dimension_scaled_prior}


def fit_hyper(
    X: np.ndarray,
    y: np.ndarray,
    noise: np.ndarray,
    starts: list[np.ndarray],
    max_iter: int,
    columns: Columns | None = None,
    prior: str = "optuna",
) -> Hyper:
    """MAP hyperparameters by L-BFGS-B from each start; the best end point wins."""
    bounds = [LOG_BOUNDS] * (len(starts[0]) - 1) + [NOISE_BOUNDS]
    best = None
    for start in starts:
        result = minimize(
            neg_log_posterior,
            np.clip(start, [b[0] for b in bounds], [b[1] for b in bounds]),
            args=(X, y, noise, columns, prior),
            jac=True,
            method="L-BFGS-B",
            bounds=bounds,
            options={"maxiter": max_iter},
        )
        if best is None or result.fun < best.fun:
            best = result
    return Hyper(best.x, columns)


class ExactGP:
    """A GP conditioned on ``(X, y)`` under fixed hyperparameters; ``predict`` follows sklearn,
    so skopt's acquisition functions take it as their model."""

    def __init__(self, hyper: Hyper, X: np.ndarray, y: np.ndarray, noise: np.ndarray) -> None:
        self.hyper, self.X = hyper, X
        K = self._kernel(X, X)
        K[np.diag_indices(len(X))] += noise + hyper.floor + JITTER
        self.L = cholesky(K, lower=True)
        self.alpha = cho_solve((self.L, True), y)

    def _kernel(self, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        return self.hyper.amplitude * matern52(scaled_distance(A, B, self.hyper.scales))

    def predict(
        self, X: np.ndarray, return_std: bool = False
    ) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
        """Posterior mean (and standard deviation of the noise-free function) at rows of X."""
        K_star = self._kernel(X, self.X)
        mean = K_star @ self.alpha
        if not return_std:
            return mean
        V = solve_triangular(self.L, K_star.T, lower=True, check_finite=False)
        var = self.hyper.amplitude - (V**2).sum(0)
        return mean, np.sqrt(np.maximum(var, 1e-12))

    def predict_gradient(
        self, X: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Posterior mean and standard deviation at rows of X, and their gradients in X
        (one row per point): what a gradient-based acquisition search needs."""
        scales2 = self.hyper.scales**2
        diff = X[:, None, :] - self.X[None, :, :]  # points × data × columns
        r = np.sqrt(np.maximum(((diff**2) / scales2).sum(-1), 0.0))
        decay = np.exp(-SQRT5 * r)
        K_star = self.hyper.amplitude * (1.0 + SQRT5 * r + 5.0 / 3.0 * r**2) * decay
        # dk/dx = −a·(5/3)(1 + √5 r)e^{−√5 r} · (x − x_i)/ℓ²: smooth through r = 0
        slope = -self.hyper.amplitude * (5.0 / 3.0) * (1.0 + SQRT5 * r) * decay
        dK = slope[:, :, None] * diff / scales2  # points × data × columns
        mean = K_star @ self.alpha
        d_mean = np.einsum("pdc,d->pc", dK, self.alpha)
        V = cho_solve((self.L, True), K_star.T, check_finite=False)  # data × points
        var = np.maximum(self.hyper.amplitude - (K_star * V.T).sum(1), 1e-12)
        std = np.sqrt(var)
        d_var = -2.0 * np.einsum("pdc,dp->pc", dK, V)
        return mean, std, d_mean, d_var / (2.0 * std[:, None])
