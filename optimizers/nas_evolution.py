"""Regularized (aging) evolution for architecture search (Real et al., 2019), as ask/tell.

The population is the ``population`` most recently *finished* trials, so the oldest dies as
each new one arrives, however good it was: the search keeps moving and a lucky early result
cannot dominate it. A child copies the best of a random sample of ``sample_size`` members and
changes exactly one of its active parameters; parameters that the change switches on get a
random value, those it switches off are dropped, so every child respects the conditions.
Failed trials stay in the population (and age out) but never win a tournament. With several
objectives or constraints, a member's fitness is its Pareto front within the population under
constraint domination, then its crowding distance there (NSGA-II's order).

Which mutant a parent gets is guided by default (``guide: gp``): every one-step neighbour of
the population's best member and of a few tournament winners is scored by the GP optimizer's
acquisition over the whole history (:meth:`~optimizers.gp.optimizer.GPOptimizer.score_candidates`:
log EI weighed by the probability of feasibility, or with several objectives the GP's
acquisition for them, EHVI or a random scalarisation), and the best unseen one is the child;
BANANAS (White et al., 2021) optimises its acquisition by mutation the same way. A random
mutation alone (``guide: none``, Real et al.'s rule) wastes most of a budget of a few hundred
trials on children a model can already tell are worse (docs/optimizers.md, "Tabular
NAS-Bench-201").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from foldwise.optimizers.base import (
    BaseOptimizer,
    OptionError,
    check_count,
    choice_option,
    float_option,
    int_option,
)
from foldwise.optimizers.encoding import SpaceEncoding
from foldwise.optimizers.sampling import RETRIES, config_key, sample_unique
from foldwise.space import CategoricalParam

if TYPE_CHECKING:
    from foldwise.optimizers.gp import GPOptimizer

NUMERIC_STEP = 0.2
"""Standard deviation, in unit coordinates, of a numeric parameter's mutation."""
GUIDES = ("gp", "none")
TOURNAMENTS = 4
"""Tournaments per guided child: the neighbourhoods of their winners are the candidates."""
NUMERIC_MUTANTS = 3
"""Gaussian steps of each numeric parameter among a winner's neighbours."""
MAX_MUTANTS = 256
"""Most candidates the guide scores per child (a random subset beyond)."""


class NASEvolutionOptimizer(BaseOptimizer):
    """Aging evolution: tournament of ``sample_size``, one-choice mutation, the oldest dies.

    Options: ``population`` P, the members alive (default: a tenth of the study's budget,
    between 10 and 50 and at most half the budget, a quarter between 5 and 50 with ``guide:
    none``, or 20 without a budget); ``sample_size`` S, the tournament size
    (default P / 4, at least 2); ``numeric_step`` (0.2) the mutation scale of numeric
    parameters in unit coordinates; ``guide`` ("gp") how a parent's mutant is chosen, or
    "none" for a random one. The first P trials are random.
    """

    def configure(
        self,
        *,
        population: int | None = None,
        sample_size: int | None = None,
        numeric_step: float = NUMERIC_STEP,
        guide: str = "gp",
        **unknown: Any,
    ) -> None:
        super().configure(**unknown)
        self.guide = choice_option("guide", guide, GUIDES)
        population = self._default_population() if population is None else population
        self.population = int_option("population", population, minimum=2, maximum=10_000)
        size = max(2, self.population // 4) if sample_size is None else sample_size
        self.sample_size = int_option("sample_size", size, minimum=1, maximum=10_000)
        if self.sample_size > self.population:
            raise OptionError("sample_size", "option sample_size must not exceed population")
        self.numeric_step = float_option("numeric_step", numeric_step, minimum=1e-3, maximum=1)
        self.encoding = SpaceEncoding(self.space)

    def _default_population(self) -> int:
        """Guided: a tenth of the budget in [10, 50], at most half of it (the model needs few
        random trials to start from); unguided, Real et al.'s a quarter in [5, 50]; 20
        without a budget."""
        if self.budget is None:
            return 20
        if self.guide == "gp":  # at most half a small budget, so some children are guided
            return min(50, max(10, self.budget // 10), max(2, self.budget // 2))
        return min(50, max(5, self.budget // 4))

    def suggest(self, count: int) -> list[dict[str, Any]]:
        count = check_count(count)
        rng, seen = self.rng(), self.seen_keys()
        alive = self.completed[-self.population :]
        fitness = self.ranking_fitness(slice(-self.population, None))
        n_random = min(count, max(0, self.population - self.started))
        if not np.isfinite(fitness).any():  # nothing has worked yet: keep exploring
            n_random = count
        batch = sample_unique(self.encoding, n_random, rng, seen)
        members = [o.params for o in alive]
        guide = self._guide() if count > n_random else None
        for _ in range(count - n_random):
            child = None
            if guide is not None:
                child = self._guided_child(members, fitness, rng, seen, guide, batch)
            batch.append(child or self._child(members, fitness, rng, seen))
        return batch

    def _guide(self) -> GPOptimizer | None:
        """The GP of the whole history (not only the population) that picks among mutants;
        None with ``guide: none``."""
        if self.guide == "none":
            return None
        from foldwise.optimizers.gp import GPOptimizer  # loads scikit-optimize

        guide = GPOptimizer(
            self.space, directions=self.directions, seed=self.seed, budget=self.budget
        )
        guide.update(self.completed, self.pending)
        return guide

    def _guided_child(
        self,
        members: list[dict[str, Any]],
        fitness: np.ndarray,
        rng: np.random.Generator,
        seen: set[tuple],
        guide: GPOptimizer,
        chosen: list[dict[str, Any]],
    ) -> dict[str, Any] | None:
        """The unseen one-step mutant of the population's best member and of ``TOURNAMENTS``
        tournament winners that the guide's acquisition scores highest (pending trials and
        ``chosen`` told to it as running); None when there is no unseen mutant or the guide
        cannot score yet."""
        if len(guide.completed) < 2:  # too little for the model: a random mutant
            return None
        fitness = np.where(np.isnan(fitness), -np.inf, fitness)
        size = min(self.sample_size, len(members))
        winners = {int(np.argmax(fitness))} | {
            int(sample[np.argmax(fitness[sample])])
            for sample in (
                rng.choice(len(members), size=size, replace=False) for _ in range(TOURNAMENTS)
            )
        }
        mutants: dict[tuple, dict[str, Any]] = {}
        for index in sorted(winners):
            for mutant in self.neighbours(members[index], rng):
                key = config_key(mutant)
                if key not in seen:
                    mutants.setdefault(key, mutant)
        if not mutants:
            return None
        candidates = list(mutants.values())
        if len(candidates) > MAX_MUTANTS:
            picks = rng.choice(len(candidates), size=MAX_MUTANTS, replace=False)
            candidates = [candidates[i] for i in sorted(picks)]
        scores = guide.score_candidates(candidates, [*self.pending, *chosen])
        if scores is None or not np.isfinite(scores).any():
            return None
        child = candidates[int(np.nanargmax(np.where(np.isfinite(scores), scores, np.nan)))]
        seen.add(config_key(child))
        return child

    def neighbours(self, config: dict[str, Any], rng: np.random.Generator) -> list[dict]:
        """Every configuration one change away from ``config``: each other choice of each active
        categorical, ``NUMERIC_MUTANTS`` Gaussian steps of each active numeric parameter;
        conditions resolved again (newly active parameters drawn at random)."""
        out = []
        for name in self.encoding.names:
            if name not in config:
                continue
            param = self.space[name]
            if isinstance(param, CategoricalParam):
                current = self.encoding.choice_index(name, config[name])
                values = [c for i, c in enumerate(param.choices) if i != current]
            else:
                values = [self._new_value(name, config[name], rng) for _ in range(NUMERIC_MUTANTS)]
            out += [self.resolve({**config, name: value}, rng) for value in values]
        return out

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
