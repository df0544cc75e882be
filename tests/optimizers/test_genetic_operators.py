"""The NNLO genetic-algorithm operators, one property at a time."""

from __future__ import annotations

import numpy as np
import pytest

from foldwise.optimizers.genetic import (
    breeding_pool,
    crossover,
    elite_count,
    mutate,
    mutation_delta,
    select_elites,
    tournament,
)


@pytest.mark.parametrize(
    ("population", "fraction", "expected"),
    [
        (10, 0.2, 2),
        (25, 0.2, 5),
        (5, 0.2, 1),
        (3, 0.2, 1),
        (10, 0.0, 0),
    ],
)
def test_elitism_keeps_the_top_fifth(population: int, fraction: float, expected: int) -> None:
    assert elite_count(population, fraction) == expected


def test_elites_are_the_fittest_and_ties_go_to_the_earlier() -> None:
    fitness = np.array([0.5, 2.0, -np.inf, 2.0, 1.0])
    assert select_elites(fitness, 2).tolist() == [1, 3]
    assert select_elites(fitness, 3).tolist() == [1, 3, 4]


def test_the_pool_is_the_latest_generation_plus_the_elites_before_it() -> None:
    fitness = np.arange(27, dtype=float)[::-1]  # earlier individuals are fitter
    assert breeding_pool(fitness[:13], 10, 2).tolist() == list(range(10))
    # two complete generations: elites of generation 0 (individuals 0 and 1) + generation 1
    assert breeding_pool(fitness[:20], 10, 2).tolist() == [0, 1, *range(10, 20)]
    # incomplete generation 2 (20..26) is not bred from yet
    assert breeding_pool(fitness, 10, 2).tolist() == [0, 1, *range(10, 20)]
    # three complete generations: the two old elites are still the fittest, so they stay
    assert breeding_pool(np.arange(30.0)[::-1], 10, 2).tolist() == [0, 1, *range(20, 30)]


def test_elites_give_way_to_fitter_newcomers() -> None:
    fitness = np.zeros(30)
    fitness[[3, 15, 17]] = [5.0, 9.0, 7.0]
    assert breeding_pool(fitness, 10, 2).tolist() == [15, 17, *range(20, 30)]


def test_the_tournament_winner_is_the_fitter_of_two() -> None:
    fitness = np.array([1.0, -np.inf, 3.0, 2.0])
    rng = np.random.default_rng(0)
    wins = np.bincount([tournament(fitness, rng) for _ in range(3000)], minlength=4)
    assert wins[1] == 0  # the worst (a failed trial) never wins
    assert wins[2] == pytest.approx(1500, rel=0.1)  # the best wins every pair it is in: 1/2
    assert wins[3] > wins[0] > 0
    assert tournament(np.array([4.0]), rng) == 0


def test_crossover_extrapolates_past_the_better_parent() -> None:
    better, worse = np.array([0.6, 0.3]), np.array([0.4, 0.5])
    assert crossover(better, worse, 0.5) == pytest.approx([0.7, 0.2])
    assert crossover(better, worse, 0.0) == pytest.approx(better)


def test_crossover_is_clipped_to_the_bounds() -> None:
    assert crossover(np.array([0.9, 0.1]), np.array([0.1, 0.9]), 0.9) == pytest.approx([1, 0])


def test_crossover_inherits_genes_only_one_parent_has() -> None:
    child = crossover(np.array([0.2, np.nan, np.nan]), np.array([np.nan, 0.7, np.nan]), 0.5)
    assert child[:2] == pytest.approx([0.2, 0.7]) and np.isnan(child[2])


def test_mutation_anneals_to_nothing_at_the_last_generation() -> None:
    r = np.linspace(0.01, 0.99, 50)
    assert mutation_delta(r, 0, 10) == pytest.approx(1 - r)
    assert mutation_delta(r, 9, 10) == pytest.approx(np.zeros(50))
    assert mutation_delta(r, 12, 10) == pytest.approx(np.zeros(50))
    steps = [mutation_delta(r, g, 10).mean() for g in range(10)]
    assert all(a > b for a, b in zip(steps, steps[1:], strict=False))
    assert mutation_delta(0.5, 3, 10) == pytest.approx(1 - 0.5 ** ((1 - 3 / 9) ** 3))


def test_mutation_moves_towards_a_bound() -> None:
    genes = np.array([0.5, 0.5, 0.2, 0.2])
    delta = np.array([1.0, 1.0, 0.5, 0.0])
    upward = np.array([True, False, True, False])
    assert mutate(genes, delta, upward) == pytest.approx([1.0, 0.0, 0.6, 0.2])
