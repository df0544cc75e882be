"""Several objectives and constraints behind the one optimizer interface: the observation's
shape, the ParEGO scalarisation, and every optimizer moving towards the Pareto front and
away from infeasible regions, deterministically (a rebuilt optimizer suggests the same)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from foldwise.optimizers import create_optimizer
from foldwise.optimizers.base import Observation
from foldwise.optimizers.gp.scalarize import scalarize
from foldwise.optimizers.pareto import hypervolume
from foldwise.optimizers.registry import optimizer_names
from foldwise.spec import Direction
from tests.optimizers.problems import PLANE, run_study

LEARNERS = [name for name in optimizer_names() if name != "random"]
BOTH = (Direction.MINIMIZE, Direction.MAXIMIZE)


def zdt1(config: dict[str, Any]) -> tuple[float, float]:
    """ZDT1 on the plane, its second objective negated to be maximised: the front is y = 0,
    (f1, f2) = (x, 1 - sqrt(x)); away from it, ``g = 1 + 9 y`` pushes f2 up."""
    g = 1 + 9 * config["y"]
    return config["x"], -(g * (1 - math.sqrt(config["x"] / g)))


def tell_zdt1(config: dict[str, Any], values: tuple[float, float]) -> Observation:
    return Observation(dict(config), values[0], std_error=0.0, values=values, std_errors=(0, 0))


def _front_hypervolume(history: list[Observation]) -> float:
    points = np.array([[o.objectives[0], -o.objectives[1]] for o in history])
    return hypervolume(points, np.array([1.1, 1.1]))


def test_an_observation_carries_every_objective_and_its_feasibility() -> None:
    one = Observation({"x": 1}, 0.5, std_error=0.1)
    assert one.objectives == (0.5,) and one.objective_errors == (0.1,) and one.feasible
    two = Observation({"x": 1}, 0.5, values=(0.5, 3.0), std_errors=(0.1, None))
    assert two.objectives == (0.5, 3.0) and two.ok
    broken = Observation({"x": 1}, 0.5, values=(0.5, 3.0), constraint_gaps=(0.0, 0.25))
    assert broken.ok and not broken.feasible and broken.violation == 0.25
    assert not Observation({"x": 1}, 0.5, values=(0.5, math.nan)).ok
    with pytest.raises(ValueError, match="first of values"):
        Observation({"x": 1}, 0.4, values=(0.5, 3.0))
    with pytest.raises(ValueError, match="one entry per objective"):
        Observation({"x": 1}, 0.5, values=(0.5, 3.0), std_errors=(0.1,))


def test_the_loss_matrix_is_in_minimisation_form_and_infeasible_trials_are_data() -> None:
    optimizer = create_optimizer("random", PLANE, directions=BOTH)
    optimizer.update(
        [
            Observation({"x": 0.1, "y": 0.1}, 1.0, values=(1.0, 2.0)),
            Observation({"x": 0.2, "y": 0.1}, None, failed=True),
            Observation({"x": 0.3, "y": 0.1}, 3.0, values=(3.0, 4.0), constraint_gaps=(0.5,)),
        ],
        [],
    )
    matrix = optimizer.loss_matrix()
    assert matrix[0].tolist() == [1.0, -2.0] and np.isnan(matrix[1]).all()
    assert matrix[2].tolist() == [3.0, -4.0] and optimizer.violations().tolist() == [0, 0, 0.5]
    assert optimizer.losses().tolist()[::2] == [1.0, 3.0]
    fitness = optimizer.ranking_fitness()
    assert fitness[0] > fitness[2] > fitness[1] == -np.inf


def test_the_second_objective_and_the_constraint_gaps_are_part_of_the_history() -> None:
    def digest(values: tuple[float, float], gaps: tuple[float, ...]) -> list[int]:
        optimizer = create_optimizer("random", PLANE, directions=BOTH)
        config = {"x": 0.5, "y": 0.5}
        optimizer.update([Observation(config, 1.0, values=values, constraint_gaps=gaps)], [])
        return optimizer._digest

    assert digest((1.0, 2.0), ()) != digest((1.0, 3.0), ())
    assert digest((1.0, 2.0), ()) != digest((1.0, 2.0), (0.5,))


def test_the_scalarisation_keeps_the_front_order_and_ranks_infeasible_trials_last() -> None:
    losses = np.array([[0.0, 1.0], [1.0, 0.0], [1.0, 1.0], [np.nan, np.nan], [0.5, 0.5]])
    errors = np.zeros_like(losses)
    violations = np.array([0.0, 0.0, 0.0, 0.0, 2.0])
    values, value_errors = scalarize(losses, errors, violations, np.array([0.5, 0.5]))
    assert values[0] == values[1] < values[2] < values[4]  # (0.5, 0.5) is infeasible
    assert np.isnan(values[3]) and (value_errors == 0).all()
    # a standard error follows the weights of the active term and the augmenting sum
    _, with_errors = scalarize(losses[:3], np.full((3, 2), 0.1), np.zeros(3), np.array([1, 0]))
    assert with_errors[0] == pytest.approx(0.1 * 1.05)


@pytest.mark.parametrize("name", optimizer_names())
def test_a_rebuilt_multi_objective_optimizer_suggests_what_the_live_one_would(name: str) -> None:
    def build() -> Any:
        return create_optimizer(name, PLANE, directions=BOTH, seed=4, budget=24)

    live = build()
    seen = []

    def compare(completed: list[Observation], pending: list[dict]) -> None:
        rebuilt = build()
        rebuilt.update(completed, pending)
        assert rebuilt.suggest(2) == live.suggest(2)
        seen.append(len(completed))

    run_study(live, zdt1, budget=24, parallel=3, finish=2, on_step=compare, tell=tell_zdt1)
    assert max(seen) >= 15


@pytest.mark.parametrize("learner", LEARNERS)
def test_each_learner_heads_for_the_pareto_front(learner: str) -> None:
    """ZDT1's front is y = 0: random search leaves late trials at y of 0.5 in the median and a
    hypervolume of 0.5 to 0.6 (from (1.1, 1.1); 0.88 for the whole front) after 60 trials; the
    learners reach 0.67 (nas_evolution) to 0.84."""
    optimizer = create_optimizer(learner, PLANE, directions=BOTH, seed=0, budget=60)
    history = run_study(optimizer, zdt1, budget=60, tell=tell_zdt1)
    late_y = np.median([o.params["y"] for o in history[30:]])
    random = run_study(
        create_optimizer("random", PLANE, directions=BOTH, seed=0),
        zdt1,
        budget=60,
        tell=tell_zdt1,
    )
    assert late_y < 0.25
    assert _front_hypervolume(history) > max(0.6, _front_hypervolume(random))
    xs = [o.params["x"] for o in history if o.params["y"] < 0.1]
    assert np.ptp(xs) > 0.5  # spread along the front, not one point of it


@pytest.mark.parametrize("learner", LEARNERS)
def test_infeasible_trials_steer_the_search_but_are_not_failures(learner: str) -> None:
    """Minimise the distance to (0.2, 0.5) subject to x >= 0.4: the constrained optimum is
    (0.4, 0.5), on the boundary. Over six seeds, random search puts 28% of its late trials
    deep in the infeasible region (x < 0.3) and its late feasible ones at x of 0.71 in the
    median. The learners that model the constraint keep out of it: nas_evolution (which the
    GP guides) 4% deep and a median of 0.41, and the GP 4%, which finds the constrained
    optimum itself: within 0.001 of it on each of 12 seeds tried (random search's best
    feasible point: 0.02 to 0.17 away), while where its late feasible trials lie varies with
    the seed (medians 0.40 to 0.77). Evolution, which only ranks infeasible trials last,
    still mutates across the boundary: 25% deep over seeds 0 to 5 (12.5% over seeds 6 to 11;
    over seeds 0 to 2 the share was 17% on one machine and 25% on another), against 82% (72%)
    when it is not told the constraint at all; its late feasible trials lie at a median x of
    0.57 (0.51), nearer the boundary than random search's."""

    def tell(config: dict[str, Any], value: float) -> Observation:
        gap = 0.4 - config["x"]
        return Observation(dict(config), value, std_error=0.0, constraint_gaps=(gap,))

    def loss(config: dict[str, Any]) -> float:
        return (config["x"] - 0.2) ** 2 + (config["y"] - 0.5) ** 2

    late: list[Observation] = []
    for seed in range(3 if learner == "gp" else 6):
        optimizer = create_optimizer(learner, PLANE, seed=seed, budget=40)
        history = run_study(optimizer, loss, budget=40, tell=tell)
        assert any(not o.feasible for o in history)
        late += history[20:]
        if learner == "gp":
            best = min((o for o in history if o.feasible), key=lambda o: o.value)
            assert math.dist((best.params["x"], best.params["y"]), (0.4, 0.5)) < 0.01
    deep = np.mean([o.params["x"] < 0.3 for o in late])
    median = np.median([o.params["x"] for o in late if o.feasible])
    assert deep < (0.4 if learner == "evolution" else 0.15)
    if learner == "evolution":
        assert median < 0.62
    if learner == "nas_evolution":
        assert median < 0.5
