"""Pareto dominance for studies with several objectives: fronts, crowding, hypervolume and the
one scalar fitness every ranking optimizer (evolution, nas_evolution) sorts by.

Points are in minimisation form: one row per trial, one column per objective. A trial that
breaks a constraint carries its total violation (> 0); feasible trials carry 0. Constraint
domination (Deb 2000, as NSGA-II uses it): a feasible trial beats every infeasible one, and of
two infeasible trials the smaller violation wins. The fronts and the hypervolume come from
moocore (non-dominated sorting and exact hypervolume in C).
"""

from __future__ import annotations

import moocore
import numpy as np


def pareto_ranks(points: np.ndarray, violations: np.ndarray | None = None) -> np.ndarray:
    """Each point's front under constraint domination: 0 for the feasible non-dominated ones,
    then 1, 2, ... for the next feasible fronts; infeasible points come after every feasible
    front, ordered by their violation (equal violations share a rank). Rows holding a NaN
    (failed trials) come last of all."""
    points = np.asarray(points, dtype=float)
    n = len(points)
    ranks = np.zeros(n, dtype=int)
    if n == 0:
        return ranks
    violations = _violations(violations, n)
    usable = ~np.isnan(points).any(axis=1)
    feasible = usable & (violations <= 0)
    following = 0
    if feasible.any():
        ranks[feasible] = moocore.pareto_rank(points[feasible])
        following = int(ranks[feasible].max()) + 1
    infeasible = usable & ~feasible
    if infeasible.any():
        _, order = np.unique(violations[infeasible], return_inverse=True)
        ranks[infeasible] = following + order
        following += int(order.max()) + 1
    ranks[~usable] = following
    return ranks


def crowding_distances(points: np.ndarray) -> np.ndarray:
    """NSGA-II's crowding distance of each point within one front: the sum over objectives of
    the gap between its two neighbours, over the objective's range; the ends of each objective
    get infinity, so the front keeps its extremes."""
    points = np.asarray(points, dtype=float)
    n, m = points.shape if points.ndim == 2 else (len(points), 1)
    distance = np.zeros(n)
    if n <= 2:
        distance[:] = np.inf
        return distance
    for column in points.reshape(n, m).T:
        order = np.argsort(column, kind="stable")
        span = column[order[-1]] - column[order[0]]
        distance[order[0]] = distance[order[-1]] = np.inf
        if span > 0:
            distance[order[1:-1]] += (column[order[2:]] - column[order[:-2]]) / span
    return distance


def fitness(points: np.ndarray, violations: np.ndarray | None = None) -> np.ndarray:
    """A scalar per point, higher is better, that orders points as NSGA-II's crowded comparison
    does: a better front first, then (within a front) a larger crowding distance. The front
    gives the integer part (``-rank``), the crowding distance ``d`` a fraction ``d / (1 + d)``
    in [0, 1]; an infinite distance (an extreme of its front) gives 1 - 1e-9, so no front ever
    catches up with the one before it. Failed trials (a NaN) get ``-inf``."""
    points = np.asarray(points, dtype=float)
    n = len(points)
    out = np.full(n, -np.inf)
    if n == 0:
        return out
    ranks = pareto_ranks(points, violations)
    usable = ~np.isnan(points).any(axis=1)
    for rank in np.unique(ranks[usable]):
        members = np.flatnonzero(usable & (ranks == rank))
        crowding = crowding_distances(points[members])
        share = np.full(len(members), 1 - 1e-9)
        finite = np.isfinite(crowding)
        share[finite] = crowding[finite] / (1 + crowding[finite])
        out[members] = -float(rank) + share
    return out


def non_dominated(points: np.ndarray, violations: np.ndarray | None = None) -> np.ndarray:
    """Which points form the Pareto front: feasible and dominated by no other feasible point
    (duplicates all count)."""
    points = np.asarray(points, dtype=float)
    if len(points) == 0:
        return np.zeros(0, dtype=bool)
    ranks = pareto_ranks(points, violations)
    usable = ~np.isnan(points).any(axis=1)
    return usable & (_violations(violations, len(points)) <= 0) & (ranks == 0)


def hypervolume(points: np.ndarray, reference: np.ndarray) -> float:
    """The volume dominated by ``points`` (minimisation form) and bounded by ``reference``;
    points that do not dominate the reference point add nothing."""
    points = np.asarray(points, dtype=float).reshape(-1, len(reference))
    reference = np.asarray(reference, dtype=float)
    inside = points[np.all(points < reference, axis=1)]
    if len(inside) == 0:
        return 0.0
    return float(moocore.hypervolume(inside, ref=reference))


def _violations(violations: np.ndarray | None, n: int) -> np.ndarray:
    if violations is None:
        return np.zeros(n)
    out = np.asarray(violations, dtype=float)
    if out.shape != (n,):
        raise ValueError(f"violations must hold one value per point ({n}), got {out.shape}")
    return np.where(np.isnan(out), np.inf, out)
