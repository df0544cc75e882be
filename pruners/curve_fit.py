"""Where a fold run's learning curve is heading: an ensemble of parametric curves fitted to its
epochs so far, extrapolated to its last epoch.

The ``curve`` pruning rule (``in_fold.prune_verdict``) asks whether a run can still end as well
as the best finished run of the same fold. Each family below is fitted to the run's best loss
so far by least squares; each gives its value at the run's last epoch less twice its fit's
residual spread, and the most optimistic of those bounds is what the run could still reach.
Taking the most optimistic family (not a weighted forecast) keeps the rule forgiving where few
epochs cannot tell the families apart. That follows Domhan, Springenberg & Hutter (2015), who
stop a run when its extrapolated curve is unlikely to beat the best seen, with a small fixed
ensemble instead of their MCMC over eleven families, and nothing learnt beforehand (unlike
LC-PFN, no downloaded weights). Each family is linear in c and a once its rate b is fixed, so
it is fitted in closed form on a grid of rates: about 0.1 ms a decision, from the run's own
epochs.

The families are decreasing in the epoch ``t`` (the curve is a loss, lower is better) and level
off at ``c``: ``pow`` c + a·t^-b, ``exp`` c + a·e^(-b·t) and ``log`` c + a / log(t + e - 1), all
with a ≥ 0 and b > 0. A curve that does not fall (flat, or rising) fits with a = 0: its best
is what it has.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

Shape = Callable[[np.ndarray, np.ndarray], np.ndarray]

RATES = np.geomspace(1e-2, 3.0, 48)
"""The rates b tried for the families that have one."""

FAMILIES: dict[str, tuple[Shape, np.ndarray | None]] = {
    "pow": (lambda t, b: np.power(t, -b), RATES),
    "exp": (lambda t, b: np.exp(-b * t), RATES),
    "log": (lambda t, _b: 1.0 / np.log(t + math.e - 1.0), None),
}
"""Each family's shape g(t, b) in c + a·g(t, b), and its rates (None: it has no rate)."""

MIN_POINTS = 4
"""Epochs a run needs before its curve is extrapolated: one more than a family's parameters, so
every fit has a residual to judge its spread by."""

SPREAD_Z = 2.0
"""How many residual spreads a family's bound lies below its forecast."""


def optimistic_final(losses: Sequence[float], epochs: int) -> float | None:
    """The best loss the run whose best loss after each epoch so far is ``losses`` could still
    reach at epoch ``epochs``: the most optimistic family's forecast less ``SPREAD_Z`` of its
    residual spread; None when the run has too few epochs."""
    y = np.asarray(losses, dtype=float)
    if len(y) < MIN_POINTS or not np.all(np.isfinite(y)):
        return None
    t = np.arange(1, len(y) + 1, dtype=float)
    floor = (1e-6 * max(float(np.ptp(y)), abs(float(y[-1])), 1e-12)) ** 2
    bounds = [
        final - SPREAD_Z * spread
        for final, spread in (
            _fit(shape, rates, t, y, float(epochs), floor) for shape, rates in FAMILIES.values()
        )
    ]
    return min(*bounds, float(y[-1]))


def _fit(
    shape: Shape, rates: np.ndarray | None, t: np.ndarray, y: np.ndarray, end: float, floor: float
) -> tuple[float, float]:
    """One family fitted by least squares (c and a in closed form for each rate, a ≥ 0; the
    rate that fits best): its value at epoch ``end`` and its residual spread per degree of
    freedom."""
    b = np.zeros(1) if rates is None else rates
    g = shape(t[None, :], b[:, None])  # rates x epochs
    g_mean, y_mean = g.mean(axis=1, keepdims=True), y.mean()
    g_var = ((g - g_mean) ** 2).sum(axis=1)
    slope = ((g - g_mean) @ (y - y_mean)) / np.maximum(g_var, 1e-300)
    slope = np.maximum(slope, 0.0)  # a falling curve, or a flat one
    level = y_mean - slope * g_mean[:, 0]
    residual = y[None, :] - (level[:, None] + slope[:, None] * g)
    mean_square = np.maximum((residual**2).mean(axis=1), floor)
    best = int(np.argmin(mean_square))
    final = float(level[best] + slope[best] * shape(np.array([end]), b[best : best + 1])[0])
    n, count = len(y), 2 if rates is None else 3
    return final, math.sqrt(mean_square[best] * n / max(n - count, 1))
