"""ParEGO's random scalarisation (Knowles 2006): several objectives, and constraints, told to a
single-objective model as one loss.

Each suggestion, and each further member of a batch (qParEGO), draws weights ``w`` uniformly
from the simplex; every objective's losses are scaled to [0, 1] over the usable trials, and a
trial's loss becomes the augmented Chebyshev ``max_i w_i f_i + rho * sum_i w_i f_i``. Over
many suggestions the weights sweep the whole front, and the max term reaches its concave
parts, which a weighted sum cannot.

A trial that breaks a constraint is data: its loss is the worst feasible loss plus a margin
that grows with its violation (relative to the largest one), so the model learns that the
region is bad, and worse the further it lies from feasibility.
"""

from __future__ import annotations

import numpy as np

RHO = 0.05
"""Weight of the augmenting sum: it breaks ties among points the max term cannot tell apart."""


def simplex_weights(objectives: int, rng: np.random.Generator) -> np.ndarray:
    """Weights drawn uniformly from the simplex (Dirichlet(1, ..., 1))."""
    return rng.dirichlet(np.ones(objectives))


def scalarize(
    losses: np.ndarray, errors: np.ndarray, violations: np.ndarray, weights: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """One loss and one standard error per trial from ``losses`` (minimisation form, a row per
    trial, NaN rows for failed trials, which stay NaN), their standard ``errors`` (0 where not
    known) and each trial's total constraint ``violations``."""
    losses, errors = np.atleast_2d(losses).astype(float), np.atleast_2d(errors).astype(float)
    usable = ~np.isnan(losses).any(axis=1)
    out, out_errors = np.full(len(losses), np.nan), np.zeros(len(losses))
    if not usable.any():
        return out, out_errors
    low, high = losses[usable].min(axis=0), losses[usable].max(axis=0)
    span = np.where(high > low, high - low, 1.0)
    scaled = (losses[usable] - low) / span
    terms = weights * scaled
    active = np.argmax(terms, axis=1)
    out[usable] = terms.max(axis=1) + RHO * terms.sum(axis=1)
    # the error of the active term and of the augmenting sum, objectives taken as independent
    gain = RHO * np.tile(weights, (len(scaled), 1))
    gain[np.arange(len(scaled)), active] += weights[active]
    scaled_errors = np.nan_to_num(errors[usable] / span, nan=0.0, posinf=0.0)
    out_errors[usable] = np.sqrt(((gain * scaled_errors) ** 2).sum(axis=1))
    broken = usable & (violations > 0)
    if broken.any():
        feasible = usable & ~broken
        values = out[feasible] if feasible.any() else out[usable]
        worst, spread = values.max(), values.max() - values.min()
        margin = 0.1 * (spread or 1.0)
        out[broken] = worst + margin * (1.0 + violations[broken] / violations[broken].max())
        out_errors[broken] = 0.0
    return out, out_errors
