"""The NNLO genetic algorithm, done right, as an ask/tell optimizer.

Individuals are completed trials in the order they finished; each block of ``population`` of
them is a generation. Children are always bred from the latest complete generation (plus its
elites), so trials still running never hold the search back and no finished individual is
ever evaluated again: elites survive into the next breeding pool with the fitness they have.
Generation 0 is random. Fitness is the float objective in maximisation form; failed trials
get ``-inf`` and lose every tournament. With several objectives or constraints this is NSGA-II:
fitness orders trials by Pareto front under constraint domination, then by crowding distance
(``BaseOptimizer.ranking_fitness``), so the elites and tournament winners are NSGA-II's.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from foldwise.optimizers.base import BaseOptimizer, check_count, float_option, int_option
from foldwise.optimizers.encoding import SpaceEncoding
from foldwise.optimizers.genetic import (
    breeding_pool,
    crossover,
    elite_count,
    mutate,
    mutation_delta,
    tournament,
)
from foldwise.optimizers.sampling import RETRIES, config_key, sample_unique

DEFAULT_GENERATIONS = 10
"""Horizon when neither ``generations`` nor ``budget`` is given; later it recedes as 2g + 1."""


class EvolutionOptimizer(BaseOptimizer):
    """Genetic algorithm: elitism, binary tournaments, Wright crossover, Michalewicz mutation.

    Options: ``population`` (10) trials per generation; ``elite_fraction`` (0.2) of the pool
    kept unchanged; ``generations`` (None) G, the horizon over which mutation anneals to zero;
    the study's ``budget`` (a constructor argument of every optimizer) gives
    G = ceil(budget / population) when ``generations`` is not set. Without either, G is 10
    until generation 5, then 2g + 1, so mutation settles at a steady mid-run strength instead
    of vanishing.
    """

    def configure(
        self,
        *,
        population: int = 10,
        elite_fraction: float = 0.2,
        generations: int | None = None,
        **unknown: Any,
    ) -> None:
        super().configure(**unknown)
        self.population = int_option("population", population, minimum=2, maximum=10_000)
        fraction = float_option("elite_fraction", elite_fraction, minimum=0.0, maximum=0.5)
        self.elites = elite_count(self.population, fraction)
        self.generations: int | None = None
        if generations is not None:
            self.generations = int_option("generations", generations, minimum=2, maximum=10**6)
        self.encoding = SpaceEncoding(self.space)
        names = self.encoding.names
        self._numeric = np.array([name in self.encoding.scales for name in names])
        self._choices = np.array(
            [  # number of choices of each categorical gene, 0 if numeric
                0
                if numeric
                else self.encoding.columns[name].stop - self.encoding.columns[name].start
                for name, numeric in zip(names, self._numeric, strict=True)
            ]
        )

    def suggest(self, count: int) -> list[dict[str, Any]]:
        count = check_count(count)
        rng, seen = self.rng(), self.seen_keys()
        generation = len(self.completed) // self.population
        fitness = self.ranking_fitness()
        pool = breeding_pool(fitness, self.population, self.elites) if generation else []
        if not np.isfinite(fitness[pool]).any():  # generation 0, or nothing survived yet
            return sample_unique(self.encoding, count, rng, seen)
        genes = np.array([self.genes(self.completed[i].params) for i in pool])
        horizon = self.horizon(generation)
        return [
            self._offspring(genes, fitness[pool], generation, horizon, rng, seen)
            for _ in range(count)
        ]

    def horizon(self, generation: int) -> int:
        """G, the number of generations over which mutation anneals."""
        if self.generations is not None:
            return self.generations
        if self.budget is not None:
            return max(2, math.ceil(self.budget / self.population))
        return max(DEFAULT_GENERATIONS, 2 * generation + 1)

    def genes(self, config: dict[str, Any]) -> np.ndarray:
        """Unit coordinates (numeric) or choice indices (categorical); NaN where inactive."""
        out = np.full(len(self.encoding.names), np.nan)
        for i, name in enumerate(self.encoding.names):
            if name not in config:
                continue
            if name in self.encoding.scales:
                out[i] = self.encoding.scales[name].to_unit(config[name])
            else:
                index = self.encoding.choice_index(name, config[name])
                out[i] = np.nan if index is None else index
        return out

    def config(self, genes: np.ndarray) -> dict[str, Any]:
        """The configuration genes stand for (integers rounded, inactive parameters dropped)."""
        row = np.empty(self.encoding.width)
        for gene, name in zip(genes, self.encoding.names, strict=True):
            columns = self.encoding.columns[name]
            if name in self.encoding.scales:
                row[columns] = gene
            else:
                row[columns] = np.eye(columns.stop - columns.start)[int(gene)]
        return self.encoding.decode(row)[0]

    def breed(
        self,
        genes: np.ndarray,
        fitness: np.ndarray,
        generation: int,
        horizon: int,
        rng: np.random.Generator,
    ) -> np.ndarray:
        """One child: two tournaments, crossover, then mutation of every gene."""
        first, second = tournament(fitness, rng), tournament(fitness, rng)
        if second == first and len(fitness) > 1:
            second = tournament(fitness, rng)
        better, worse = sorted((first, second), key=lambda i: -fitness[i])
        n, numeric = len(self._numeric), self._numeric
        # numeric genes: Wright crossover; categorical genes: either parent's value
        child = crossover(genes[better], genes[worse], rng.random())
        from_worse = (rng.random(n) < 0.5) & ~np.isnan(genes[worse])
        picked = np.where(from_worse | np.isnan(genes[better]), genes[worse], genes[better])
        child = np.where(numeric, child, picked)
        # genes neither parent had (inactive in both) start from a random value
        fresh = np.where(numeric, rng.random(n), np.floor(rng.random(n) * self._choices))
        child = np.where(np.isnan(child), fresh, child)
        # every gene mutates; a categorical one is redrawn with probability δ
        delta = mutation_delta(rng.random(n), generation, horizon)
        mutated = mutate(child, delta, rng.random(n) < 0.5)
        redrawn = np.where(rng.random(n) < delta, np.floor(rng.random(n) * self._choices), child)
        return np.where(numeric, mutated, redrawn)

    def _offspring(
        self,
        genes: np.ndarray,
        fitness: np.ndarray,
        generation: int,
        horizon: int,
        rng: np.random.Generator,
        seen: set[tuple],
    ) -> dict[str, Any]:
        for _ in range(RETRIES):
            config = self.config(self.breed(genes, fitness, generation, horizon, rng))
            if config_key(config) not in seen:
                seen.add(config_key(config))
                return config
        return sample_unique(self.encoding, 1, rng, seen)[0]  # the pool has converged
