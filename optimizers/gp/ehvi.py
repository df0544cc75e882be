"""Expected hypervolume improvement (EHVI) for several objectives, exact and in log space.

Each objective has its own GP, so at a candidate the objectives are independent Gaussians
``(μ_j, σ_j)`` (minimisation form). The region the current front does not dominate, bounded
by a reference point, is cut into disjoint boxes ``[l, u)``. The volume a point ``y`` adds
inside one box is ``Π_j (u_j − max(l_j, y_j))⁺``, a product of one factor per objective, so
its expectation is a product too: ``EHVI = Σ_boxes Π_j (ψ_j(u_j) − ψ_j(l_j))`` with
``ψ(c) = E[(c − Y)⁺] = σ h((c − μ)/σ)`` and ``ψ(−∞) = 0`` (Emmerich et al. 2006; Yang et al.
2019). It is summed in log space with :func:`~optimizers.gp.log_ei.log_h`, so a candidate far from
the front still gets an order and no underflow to a flat 0 (the log form of Daulton et al.,
"qLogEHVI", 2023).

The boxes come from the grid of the front's coordinates: along the last objective, the
non-dominated cells above one cell of the others form a single run from −∞ up to the lowest
last coordinate of the front points at or below that cell's lower corner in the other
objectives, so there are at
most ``(n + 1)^(m − 1)`` boxes for ``n`` front points and ``m`` objectives. :data:`MAX_BOXES`
bounds them (with 4 objectives a large front would need tens of thousands).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
from scipy.special import log_ndtr, logsumexp

from foldwise.optimizers.gp.log_ei import HALF_LOG_2PI, log1mexp, log_h
from foldwise.optimizers.pareto import non_dominated

MAX_BOXES = 4096
"""Most boxes of one decomposition; a front that needs more is not scored by EHVI."""
CHUNK = 1_000_000
"""Candidates × boxes evaluated at once (memory)."""
REFERENCE_MARGIN = 0.1
"""The reference point lies this share of the points' range beyond their worst values."""


@dataclass(frozen=True)
class Boxes:
    """The non-dominated region as boxes: ``edges[j]`` the finite grid coordinates of objective
    ``j`` (the front's values, then the reference), ``lower[b, j]`` the index in ``edges[j]`` of
    box ``b``'s lower corner (−1: −∞) and ``upper[b, j]`` of its upper corner. Along every
    objective but the last a box is one grid cell (``lower = upper − 1``); along the last its
    lower corner is always −∞."""

    edges: list[np.ndarray]
    lower: np.ndarray
    upper: np.ndarray

    def __len__(self) -> int:
        return len(self.lower)


def reference_point(points: np.ndarray, margin: float = REFERENCE_MARGIN) -> np.ndarray:
    """The worst value of each objective among ``points`` plus ``margin`` times their range
    (times one unit when the range is 0). Given the front alone and the default margin, this is
    BoTorch's ``infer_reference_point`` rule in minimisation form; given dominated points too,
    it lies farther out; with ``margin`` 0 it is the points' worst corner."""
    worst, best = points.max(axis=0), points.min(axis=0)
    span = np.where(worst > best, worst - best, 1.0)
    return worst + margin * span


def decompose(front: np.ndarray, reference: np.ndarray) -> Boxes | None:
    """Boxes covering what ``front`` (rows of objective values) leaves undominated below
    ``reference``; None when more than :data:`MAX_BOXES` would be needed."""
    m = len(reference)
    front = np.asarray(front, dtype=float).reshape(-1, m)
    front = front[np.all(front < reference, axis=1)]
    front = front[non_dominated(front)] if len(front) else front
    edges = [np.append(np.unique(front[:, j]), reference[j]) for j in range(m)]
    # cells of the first m − 1 objectives: cell i spans edges[i − 1] (−∞ for i = 0) to edges[i]
    counts = [len(e) for e in edges[:-1]]
    if int(np.prod(counts)) > MAX_BOXES:
        return None
    last = edges[-1]
    lower, upper = [], []
    for cell in itertools.product(*(range(c) for c in counts)):
        corner = np.array([edges[j][i - 1] if i else -np.inf for j, i in enumerate(cell)])
        below = np.all(front[:, :-1] <= corner, axis=1)
        top = front[below, -1].min() if below.any() else reference[-1]
        lower.append([i - 1 for i in cell] + [-1])
        upper.append([*cell, int(np.searchsorted(last, top))])
    return Boxes(edges, np.array(lower).reshape(-1, m), np.array(upper).reshape(-1, m))


def log_ehvi(means: np.ndarray, stds: np.ndarray, boxes: Boxes) -> np.ndarray:
    """Log EHVI of candidates with objective means and standard deviations ``means``,
    ``stds`` (a row per candidate, a column per objective) over the region ``boxes``."""
    m = means.shape[1]
    sides = [_sides(means[:, j], stds[:, j], boxes.edges[j], j == m - 1)[0] for j in range(m)]
    out = np.empty(len(means))
    step = max(1, CHUNK // max(len(boxes), 1))
    for start in range(0, len(means), step):
        rows = slice(start, start + step)
        total = sum(side[rows][:, boxes.upper[:, j]] for j, side in enumerate(sides))
        out[rows] = logsumexp(total, axis=1)
    return out


def log_ehvi_gradient(
    means: np.ndarray,
    stds: np.ndarray,
    d_means: list[np.ndarray],
    d_stds: list[np.ndarray],
    boxes: Boxes,
) -> tuple[np.ndarray, np.ndarray]:
    """Log EHVI at a few candidates and its gradient in their encoded coordinates, from each
    objective's mean and standard deviation and their gradients ``d_means[j]``, ``d_stds[j]``
    (a row per candidate): each box side's slopes weighed by its box's share of the sum."""
    m = means.shape[1]
    total = np.zeros((len(means), len(boxes)))
    slopes = []
    for j in range(m):
        side, d_mu, d_sigma = _sides(means[:, j], stds[:, j], boxes.edges[j], j == m - 1, True)
        cells = boxes.upper[:, j]
        total += side[:, cells]
        slopes.append((d_mu[:, cells], d_sigma[:, cells]))
    value = logsumexp(total, axis=1)
    weights = np.exp(total - value[:, None])
    gradient = np.zeros_like(d_means[0])
    for j, (d_mu, d_sigma) in enumerate(slopes):
        gradient += (weights * d_mu).sum(1)[:, None] * d_means[j]
        gradient += (weights * d_sigma).sum(1)[:, None] * d_stds[j]
    return value, gradient


def _sides(
    mu: np.ndarray, sigma: np.ndarray, edges: np.ndarray, last: bool, slopes: bool = False
) -> tuple[np.ndarray, ...]:
    """The log factor ``log(ψ(u) − ψ(l))`` of one objective's box sides, a column per upper
    edge ``u``: ``l`` is the edge before (−∞ for the first) along every objective but the
    last, −∞ along the last (:class:`Boxes`). With ``slopes``, also its derivatives in μ and
    σ: ``−(Φ(z_u) − Φ(z_l)) / D`` and ``(φ(z_u) − φ(z_l)) / D``."""
    z = (edges[None, :] - mu[:, None]) / sigma[:, None]
    log_psi = np.log(sigma)[:, None] + log_h(z)
    minus_inf = np.full((len(mu), 1), -np.inf)
    if last:
        side, z_low = log_psi, np.full_like(z, -np.inf)
    else:
        side = _log_difference(log_psi, np.concatenate([minus_inf, log_psi[:, :-1]], axis=1))
        z_low = np.concatenate([minus_inf, z[:, :-1]], axis=1)
    if not slopes:
        return (side,)
    log_cdf = _log_difference(log_ndtr(z), log_ndtr(z_low))
    with np.errstate(over="ignore", invalid="ignore"):
        d_mu = -np.exp(log_cdf - side)
        d_sigma = np.exp(_log_pdf(z) - side) - np.exp(_log_pdf(z_low) - side)
    return side, np.nan_to_num(d_mu), np.nan_to_num(d_sigma)


def _log_pdf(z: np.ndarray) -> np.ndarray:
    return -0.5 * z**2 - HALF_LOG_2PI


def _log_difference(log_a: np.ndarray, log_b: np.ndarray) -> np.ndarray:
    """``log(a − b)`` from ``log a ≥ log b``: −∞ where they are equal to double precision."""
    gap = log_b - log_a
    with np.errstate(divide="ignore", invalid="ignore"):
        tail = np.where(gap < 0, log1mexp(np.where(gap < 0, gap, -1.0)), -np.inf)
    return log_a + tail
