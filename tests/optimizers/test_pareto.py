"""Pareto dominance: fronts under constraint domination, crowding, the NSGA-II fitness order and
the hypervolume, on points whose answers are worked out by hand."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from foldwise.optimizers.pareto import (
    crowding_distances,
    fitness,
    hypervolume,
    non_dominated,
    pareto_ranks,
)

POINTS = np.array([[1.0, 3.0], [2.0, 2.0], [3.0, 1.0], [2.0, 3.0], [3.0, 3.0]])


def test_fronts_peel_off_in_order() -> None:
    assert pareto_ranks(POINTS).tolist() == [0, 0, 0, 1, 2]
    assert non_dominated(POINTS).tolist() == [True, True, True, False, False]


def test_a_feasible_point_beats_every_infeasible_one_and_smaller_violations_win() -> None:
    violations = np.array([0.0, 0.5, 0.0, 0.0, 2.0])
    ranks = pareto_ranks(POINTS, violations)
    # feasible: (1,3), (3,1) front 0; (2,3) front 1 (dominated by (1,3)); then by violation
    assert ranks.tolist() == [0, 2, 0, 1, 3]
    assert non_dominated(POINTS, violations).tolist() == [True, False, True, False, False]


def test_failed_points_come_last_and_never_join_the_front() -> None:
    points = np.vstack([POINTS, [[np.nan, 0.0]]])
    ranks = pareto_ranks(points, np.array([0, 0, 0, 0, 9.0, 0]))
    assert ranks[-1] == ranks[:-1].max() + 1
    assert not non_dominated(points)[-1]
    assert fitness(points)[-1] == -np.inf


def test_nothing_feasible_ranks_by_violation_alone() -> None:
    ranks = pareto_ranks(POINTS[:3], np.array([3.0, 1.0, 1.0]))
    assert ranks.tolist() == [1, 0, 0]
    assert not non_dominated(POINTS[:3], np.array([3.0, 1.0, 1.0])).any()


def test_crowding_keeps_the_extremes_and_measures_the_gaps() -> None:
    front = np.array([[0.0, 4.0], [1.0, 2.0], [3.0, 1.0], [4.0, 0.0]])
    distance = crowding_distances(front)
    assert np.isinf(distance[[0, 3]]).all()
    # (1,2): neighbours (0,4) and (3,1): 3/4 + 3/4; (3,1): neighbours (1,2) and (4,0): 3/4 + 2/4
    assert distance[1] == pytest.approx(1.5) and distance[2] == pytest.approx(1.25)


def test_fitness_orders_by_front_then_by_crowding() -> None:
    points = np.array([[0.0, 4.0], [1.0, 2.0], [3.0, 1.0], [4.0, 0.0], [4.0, 4.0], [3.0, 3.0]])
    score = fitness(points)
    order = np.argsort(-score, kind="stable").tolist()
    assert order[:2] == [0, 3]  # the front's extremes
    assert order[2:4] == [1, 2]  # then its interior, the less crowded first
    assert score[5] < min(score[:4]) and score[4] < score[5]  # front 1, then front 2
    assert all(0 <= s < 1 for s in score[:4])  # front 0: -0 plus a share of crowding


def test_hypervolume_of_a_staircase_by_hand() -> None:
    # the area under (1,3), (2,2), (3,1) up to (4,4): 3 + 2 + 1
    assert hypervolume(POINTS, np.array([4.0, 4.0])) == pytest.approx(6.0)
    # points beyond the reference point add nothing
    assert hypervolume(np.array([[5.0, 0.0]]), np.array([4.0, 4.0])) == 0.0
    assert hypervolume(np.zeros((0, 2)), np.array([4.0, 4.0])) == 0.0


def test_hypervolume_in_three_dimensions_matches_a_box_count() -> None:
    rng = np.random.default_rng(3)
    points = rng.integers(0, 4, size=(6, 3)).astype(float)
    reference = np.array([4.0, 4.0, 4.0])
    cells = sum(
        any(np.all(p <= np.array(c)) for p in points)
        for c in itertools.product(range(4), repeat=3)
    )
    assert hypervolume(points, reference) == pytest.approx(float(cells))


def test_violations_must_match_the_points() -> None:
    with pytest.raises(ValueError, match="one value per point"):
        pareto_ranks(POINTS, np.zeros(3))
