"""Regularized (aging) evolution for architecture search (Real et al., 2019), as ask/tell.

The population is the ``population`` most recently *finished* trials, so the oldest dies as
each new one arrives, however good it was: the search keeps moving and a lucky early result
cannot dominate it. A child copies the best of a random sample of ``sample_size`` members and
changes exactly one of its active parameters; parameters that the change switches on get a
random value, those it switches off are dropped, so every child respects the conditions.
Failed trials stay in the population (and age out) but never win a tournament. With several
objectives or constraints, a member's fitness is its Pareto front within the population under
constraint domination, then its crowding distance there (NSGA-II's order).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from foldwise.optimizers.base import (
    BaseOptimizer,
    OptionError,
    check_count,
    float_option,
    int_option,
)
from foldwise.optimizers.encoding import SpaceEncoding
from foldwise.optimizers.sampling import RETRIES, config_key, sample_unique
from foldwise.space import CategoricalParam

NUMERIC_STEP = 0.2
"""Standard deviation, in unit coordinates, of a numeric parameter's mutation."""


class NASEvolutionOptimizer(BaseOptimizer):
    """Aging evolution: tournament of ``sample_size``, one-choice mutation, the oldest dies.

    Options: ``population`` P, the members alive (default: a quarter of the study's budget,
    between 5 and 50, or 20 without a budget); ``sample_size`` S, the tournament size
    (default P / 4, at least 2); ``numeric_step`` (0.2) the mutation scale of numeric
    parameters in unit coordinates. The first P trials are random.
    """

    def configure(
        self,
        *,
        population: int | None = None,
        sample_size: int | None = None,
        numeric_step: float = NUMERIC_STEP,
        **unknown: Any,
    ) -> None:
        super().configure(**unknown)
        default = 20 if self.budget is None else min(50, max(5, self.budget // 4))
        population = default if population is None else population
        self.population = int_option("population", population, minimum=2, maximum=10_000)
        size = max(2, self.population // 4) if sample_size is None else sample_size
        self.sample_size = int_option("sample_size", size, minimum=1, maximum=10_000)
        if self.sample_size > self.population:
            raise OptionError("sample_size", "option sample_size must not exceed population")
        self.numeric_step = float_option("numeric_step", numeric_step, minimum=1e-3, maximum=1)
        self.encoding = SpaceEncoding(self.space)

    def suggest(self, count: int) -> list[dict[str, Any]]:
        count = check_count(count)
        rng, seen = self.rng(), self.seen_keys()
        alive = self.completed[-self.population :]
        fitness = self.ranking_fitness(slice(-self.population, None))
        started = len(self.completed) + len(self.pending)
        n_random = min(count, max(0, self.population - started))
        if not np.isfinite(fitness).any():  # nothing has worked yet: keep exploring
            n_random = count
        batch = sample_unique(self.encoding, n_random, rng, seen)
        for _ in range(count - n_random):
            batch.append(self._child([o.params for o in alive], fitness, rng, seen))
        return batch

    def _child(
        self,
        members: list[dict[str, Any]],
        fitness: np.ndarray,
        rng: np.random.Generator,
        seen: set[tuple],
    ) -> dict[str, Any]:
        """A mutant of a tournament winner that nobody has run; random if none is found."""
        fitness = np.where(np.isnan(fitness), -np.inf, fitness)
        for attempt in range(RETRIES):
            size = min(self.sample_size, len(members))
            sample = rng.choice(len(members), size=size, replace=False)
            parent = members[sample[np.argmax(fitness[sample])]]
            child = parent
            for _ in range(1 + attempt // 5):  # a crowded neighbourhood: take bigger steps
                child = self.mutate(child, rng)
            if config_key(child) not in seen:
                seen.add(config_key(child))
                return child
        return sample_unique(self.encoding, 1, rng, seen)[0]

    def mutate(self, config: dict[str, Any], rng: np.random.Generator) -> dict[str, Any]:
        """``config`` with one active parameter changed and the conditions resolved again."""
        names = [name for name in self.encoding.names if name in config]
        name = names[int(rng.integers(len(names)))]
        child = dict(config)
        child[name] = self._new_value(name, config[name], rng)
        return self.resolve(child, rng)

    def resolve(self, config: dict[str, Any], rng: np.random.Generator) -> dict[str, Any]:
        """Keep active parameters, draw newly active ones at random, drop inactive ones."""
        out: dict[str, Any] = {}
        for name in self.encoding.names:  # condition order: parents before their children
            if not self.space[name].is_active(out):
                continue
            out[name] = config[name] if name in config else self._random_value(name, rng)
        return out

    def _new_value(self, name: str, value: Any, rng: np.random.Generator) -> Any:
        """A different value: another choice, or a Gaussian step in unit coordinates."""
        param = self.space[name]
        if isinstance(param, CategoricalParam):
            current = self.encoding.choice_index(name, value)
            others = [c for i, c in enumerate(param.choices) if i != current]
            return others[int(rng.integers(len(others)))] if others else value
        scale = self.encoding.scales[name]
        unit = float(scale.to_unit(value))
        for _ in range(RETRIES):  # integers may round back to the same value
            step = rng.normal(0.0, self.numeric_step)
            new = scale.from_unit([_reflect(unit + step)])[0]
            if new != value:
                return new
        return value

    def _random_value(self, name: str, rng: np.random.Generator) -> Any:
        param = self.space[name]
        if isinstance(param, CategoricalParam):
            return param.choices[int(rng.integers(len(param.choices)))]
        return self.encoding.scales[name].from_unit([rng.random()])[0]


def _reflect(unit: float) -> float:
    """Fold a coordinate that stepped outside ``[0, 1]`` back inside, so bounds are not sticky."""
    unit = abs(unit) % 2.0
    return 2.0 - unit if unit > 1.0 else unit
