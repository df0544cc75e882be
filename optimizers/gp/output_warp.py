"""Output warping: keep a few diverged trials from hiding the structure near the optimum.

Training losses are heavy-tailed: a learning rate a little too high diverges to a loss hundreds
of times the good ones. Standardised as they are, a few such trials set the scale, every good
trial sits at the same "−0.4", and the GP cannot tell the good trials apart.

``yeo-johnson`` (the default) is a Yeo-Johnson power transform with scipy's maximum-likelihood
λ of the losses divided by their standard deviation, then standardised: the tail is pulled in,
the order is kept (the best trial stays the best) and so is the scale invariance. ``none`` is
plain standardisation.

Two stronger warps were measured and dropped (``benchmarks/optimizers.py``, 5 seeds on the
synthetic problems, 10 on the digits MLP): HEBO's Box-Cox for positive losses (log-like) lost
the basin on Branin (mean best 0.63 against 0.40), and OSS Vizier's "half-rank" warp (the worse
half replaced by normal quantiles of their ranks) lost it on one seed in five on Branin and
Hartmann6; neither did better on the digits MLP.

Each trial's fold standard error follows its loss by the delta method,
``se_warped = ψ'(y) · se``, so fold noise keeps its meaning next to the warped mean.

For each objective of a front (EHVI; ParEGO's one scalarised loss keeps the free λ),
``unbounded=True`` holds λ within [0, 2], where the transform has no bound on either side.
Outside it, one end saturates (λ < 0 squeezes every large loss towards ``−1/λ``). For one
loss the squeezed end is the bad end, which is the point. A Pareto front, though, runs across
the whole range of each objective: its most accurate models are its largest. On the digits
CNN of ``benchmarks/multi_objective.py``, the maximum-likelihood λ of the parameter counts was
about −2, which put 14 and 34 thousand parameters at nearly the same warped value. EHVI then
saw nothing to gain between them. Holding λ ≥ 0 raised the mean hypervolume after 100
evaluations from 1291 to 1296 (docs/optimizers.md).
"""

from __future__ import annotations

import numpy as np
from scipy.stats import yeojohnson

WARPS = ("yeo-johnson", "none")


UNBOUNDED_LAMBDA = (0.0, 2.0)
"""The λ for which the Yeo-Johnson transform is unbounded both ways."""


def warp_losses(
    losses: np.ndarray,
    errors: np.ndarray,
    warp: str = "yeo-johnson",
    *,
    unbounded: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Standardised (and warped) losses, and each one's noise variance in those units.

    ``losses`` are finite (failed trials already penalised); ``errors`` their standard errors
    (0 where unknown). ``unbounded`` holds λ within :data:`UNBOUNDED_LAMBDA`, so neither end
    saturates (for the objectives of a front; see the module doc).
    """
    spread = float(losses.std())
    if spread == 0.0:
        return np.zeros_like(losses), np.zeros_like(losses)
    if warp == "yeo-johnson":
        x, lam = yeojohnson(losses / spread)
        if unbounded and not UNBOUNDED_LAMBDA[0] <= lam <= UNBOUNDED_LAMBDA[1]:
            lam = float(np.clip(lam, *UNBOUNDED_LAMBDA))
            x = yeojohnson(losses / spread, lmbda=lam)
        slope = yeo_johnson_slope(losses / spread, lam) / spread
    else:
        x, slope = losses, np.ones_like(losses)
    scale = float(x.std()) or 1.0
    return (x - x.mean()) / scale, (slope * errors / scale) ** 2


def yeo_johnson_slope(x: np.ndarray, lam: float) -> np.ndarray:
    """dψ/dx of the Yeo-Johnson transform with parameter ``lam``."""
    return np.where(x >= 0, (1.0 + np.abs(x)) ** (lam - 1.0), (1.0 + np.abs(x)) ** (1.0 - lam))
