"""Log expected improvement, with its gradient, computed stably far from the incumbent.

Expected improvement underflows to exactly 0 a few standard deviations away from where the
model expects a record, so a search over it sees flat ground there. Its logarithm (Ament et
al., "Unexpected improvements to expected improvement", NeurIPS 2023) keeps an order among
such points and a useful gradient: ``log EI = log σ + log h(z)`` with ``h(z) = φ(z) + zΦ(z)``
and ``z = (best − μ − ξ)/σ`` for minimisation, ``log h`` from ``erfcx`` where ``h`` is tiny.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import erfcx, log_ndtr, ndtr

from foldwise.optimizers.gp.model import ExactGP

HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
LOG_SQRT_PI_OVER_2 = 0.5 * math.log(math.pi / 2.0)
ASYMPTOTIC = -1.0 / math.sqrt(np.finfo(float).eps)
"""Below this z, ``log h(z) = log φ(z) − 2 log|z|`` to double precision."""


def log_h(z: np.ndarray) -> np.ndarray:
    """``log(φ(z) + zΦ(z))`` without underflow or cancellation."""
    z = np.asarray(z, dtype=float)
    out = np.empty_like(z)
    log_phi = -0.5 * z**2 - HALF_LOG_2PI
    upper = z > -1.0
    zu = z[upper]
    out[upper] = np.log(np.exp(log_phi[upper]) + zu * ndtr(zu))
    middle = ~upper & (z > ASYMPTOTIC)
    zm = z[middle]
    # h = φ(z)(1 − |z|·√(π/2)·erfcx(|z|/√2)), and the bracket is log1mexp of its log
    u = np.log(np.abs(zm) * erfcx(-zm / math.sqrt(2.0))) + LOG_SQRT_PI_OVER_2
    out[middle] = log_phi[middle] + log1mexp(u)
    lower = z <= ASYMPTOTIC
    out[lower] = log_phi[lower] - 2.0 * np.log(np.abs(z[lower]))
    return out


def log1mexp(u: np.ndarray) -> np.ndarray:
    """``log(1 − e^u)`` for u < 0, accurate at both ends (Mächler 2012)."""
    return np.where(u > -math.log(2.0), np.log(-np.expm1(u)), np.log1p(-np.exp(u)))


def log_ei(model: ExactGP, X: np.ndarray, best: float, xi: float = 0.0) -> np.ndarray:
    """Log expected improvement below ``best − xi`` at rows of X."""
    mean, std = model.predict(X, return_std=True)
    return np.log(std) + log_h((best - xi - mean) / std)


def log_ei_gradient(
    model: ExactGP, X: np.ndarray, best: float, xi: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """Log expected improvement at rows of X and its gradient in X (one row per point)."""
    mean, std, d_mean, d_std = model.predict_gradient(X)
    z = (best - xi - mean) / std
    value = np.log(std) + log_h(z)
    ratio = np.exp(log_ndtr(z) - log_h(z))  # d log h / dz = Φ(z) / h(z)
    dz = -(d_mean + z[:, None] * d_std) / std[:, None]
    return value, d_std / std[:, None] + ratio[:, None] * dz
