"""Operators of the NNLO genetic algorithm, as pure functions on fitness and gene arrays.

Fitness is a float, higher is better (failed trials: ``-inf``). Numeric genes live in ``[0, 1]``
(see :class:`~optimizers.encoding.UnitScale`), so "the bounds" are 0 and 1 and log-scale
parameters evolve in log space. NaN marks a gene whose parameter is inactive.
"""

from __future__ import annotations

import numpy as np

NONUNIFORMITY = 3.0
"""Michalewicz's b: how sharply mutation anneals over the generations."""


def elite_count(population: int, fraction: float) -> int:
    """How many of the fittest survive unchanged: ``fraction`` of the population, at least one."""
    return max(1, int(fraction * population)) if fraction > 0 else 0


def select_elites(fitness: np.ndarray, count: int) -> np.ndarray:
    """Indices of the ``count`` fittest, best first; ties go to the earlier individual."""
    return np.argsort(-np.asarray(fitness, dtype=float), kind="stable")[:count]


def breeding_pool(fitness: np.ndarray, population: int, elites: int) -> np.ndarray:
    """Indices (in arrival order) of the parents for the next generation.

    Individuals come in generations of ``population`` completed trials. The pool after
    generation 0 is that generation; after generation g it is generation g plus the ``elites``
    fittest of the previous pool, which are carried over without being evaluated again.
    """
    generations = len(fitness) // population
    pool = np.arange(min(population, len(fitness)))
    for g in range(1, generations):
        kept = pool[select_elites(fitness[pool], elites)]
        pool = np.concatenate([np.sort(kept), np.arange(g * population, (g + 1) * population)])
    return pool


def tournament(fitness: np.ndarray, rng: np.random.Generator) -> int:
    """Binary tournament: the fitter of two distinct random individuals (the first on a tie)."""
    if len(fitness) == 1:
        return 0
    a, b = rng.choice(len(fitness), size=2, replace=False)
    return int(b) if fitness[b] > fitness[a] else int(a)


def crossover(better: np.ndarray, worse: np.ndarray, r: float) -> np.ndarray:
    """Wright's heuristic crossover ``r·(better − worse) + better``, clipped to ``[0, 1]``.

    A gene active in only one parent is inherited from it; inactive in both stays NaN.
    """
    child = np.clip(r * (better - worse) + better, 0.0, 1.0)
    child = np.where(np.isnan(worse), better, child)
    return np.where(np.isnan(better), worse, child)


def mutation_delta(
    r: np.ndarray | float, generation: int, generations: int, b: float = NONUNIFORMITY
) -> np.ndarray:
    """Michalewicz's step fraction ``δ = 1 − r^((1 − g/G)^b)``: δ is 0 from the last generation on.

    Generations are numbered from 0 (the random initial one) to ``G − 1``, so ``g/G`` here is
    ``generation / (generations − 1)``, clamped to 1.
    """
    progress = min(1.0, generation / max(generations - 1, 1))
    return 1.0 - np.power(r, (1.0 - progress) ** b)


def mutate(genes: np.ndarray, delta: np.ndarray, upward: np.ndarray) -> np.ndarray:
    """Move each gene the fraction ``delta`` of the way to its upper (or lower) bound."""
    moved = np.where(upward, genes + delta * (1.0 - genes), genes - delta * genes)
    return np.clip(moved, 0.0, 1.0)
