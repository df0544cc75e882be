"""The contract every registered optimizer keeps (STYLE §13), one parametrized suite.

Options shrink the model-based optimizers' start-up so the mechanics show within small budgets;
the quality checks run with defaults.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from foldwise.optimizers import BaseOptimizer, create_optimizer
from foldwise.optimizers.base import Observation
from foldwise.optimizers.registry import optimizer_names
from foldwise.optimizers.sampling import config_key
from foldwise.space import Param, contains
from foldwise.spec import Direction
from tests.optimizers.problems import (
    CONDITIONAL,
    PLANE,
    TINY,
    bowl,
    conditional_loss,
    observe,
    run_study,
)

QUICK = {
    "random": {},
    "gp": {"n_initial": 5, "candidates": 200, "restarts": 0},
    "evolution": {"population": 5},
    "nas_evolution": {"population": 6, "sample_size": 3},
}
LEARNERS = [name for name in optimizer_names() if name != "random"]


def quick(name: str, space: dict[str, Param] = CONDITIONAL, **kwargs: Any) -> BaseOptimizer:
    return create_optimizer(name, space, options=QUICK.get(name, {}), **kwargs)


@pytest.fixture(params=optimizer_names())
def name(request: pytest.FixtureRequest) -> str:
    return request.param


def test_suggestions_hold_exactly_the_active_parameters(name: str) -> None:
    suggested: list[dict] = []
    optimizer = quick(name, seed=1)
    run_study(
        optimizer,
        conditional_loss,
        budget=18,
        parallel=4,
        finish=2,
        on_step=lambda *_: suggested.extend(optimizer.suggest(4)),
    )
    assert suggested
    assert all(contains(CONDITIONAL, config) for config in suggested)
    assert {c["depth"] for c in suggested} >= {1, 2} and any("slope" in c for c in suggested)


def test_the_same_seed_gives_the_same_study(name: str) -> None:
    first, second, other = (
        run_study(quick(name, seed=seed), conditional_loss, budget=15, parallel=4, finish=2)
        for seed in (7, 7, 8)
    )
    assert [o.params for o in first] == [o.params for o in second]
    assert [o.params for o in first] != [o.params for o in other]


def test_a_rebuilt_optimizer_suggests_what_the_live_one_would(name: str) -> None:
    live = quick(name, seed=3)
    checked = []

    def compare(completed, pending) -> None:
        expected = live.suggest(2)
        assert live.suggest(2) == expected  # no hidden state between calls
        rebuilt = quick(name, seed=3)
        rebuilt.update([observe(o.params, o.value) for o in completed], [dict(p) for p in pending])
        assert rebuilt.suggest(2) == expected
        checked.append(len(completed))

    run_study(live, conditional_loss, budget=16, parallel=4, finish=2, on_step=compare)
    assert max(checked) >= 12


def test_pending_configurations_are_never_suggested_again(name: str) -> None:
    optimizer = quick(name, seed=5)

    def check(completed, pending) -> None:
        batch = optimizer.suggest(4)
        keys = [config_key(c) for c in batch]
        assert len(set(keys)) == len(keys)
        assert not set(keys) & {config_key(p) for p in pending}
        assert not set(keys) & {config_key(o.params) for o in completed}

    run_study(optimizer, conditional_loss, budget=16, parallel=4, finish=2, on_step=check)


def test_a_small_space_is_exhausted_before_anything_repeats(name: str) -> None:
    optimizer = quick(name, space=TINY, seed=0)
    first = optimizer.suggest(4)
    assert len({config_key(c) for c in first}) == 4
    optimizer.update([observe(first[0], 1.0)], first[1:])
    more = optimizer.suggest(3)  # nothing new is left: repeats are allowed, never errors
    assert len(more) == 3 and all(contains(TINY, c) for c in more)


def test_count_is_validated(name: str) -> None:
    optimizer = quick(name)
    assert optimizer.suggest(0) == []
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError):
            optimizer.suggest(bad)


def test_failed_observations_are_accepted(name: str) -> None:
    optimizer = quick(name, seed=2)

    def flaky(config: dict) -> float | None:
        return None if config["lr"] > 0.01 else conditional_loss(config)

    history = run_study(optimizer, flaky, budget=15, parallel=4, finish=2)
    assert any(o.failed for o in history)
    optimizer.update([*history, observe(history[0].params, math.nan)], [])
    assert all(contains(CONDITIONAL, c) for c in optimizer.suggest(3))


def test_unknown_options_are_refused(name: str) -> None:
    with pytest.raises(ValueError, match="bogus"):
        create_optimizer(name, CONDITIONAL, options={"bogus": 1})


@pytest.mark.parametrize(
    ("name", "options"),
    [
        ("gp", {"n_initial": 0}),
        ("gp", {"n_initial": "10"}),
        ("gp", {"n_initial": True}),
        ("gp", {"xi": -0.1}),
        ("gp", {"xi": math.inf}),
        ("gp", {"liar": "median"}),
        ("gp", {"candidates": 1}),
        ("gp", {"restarts": -1}),
        ("gp", {"max_points": 50}),
        ("gp", {"candidates": 10**18}),  # a maximum for each: a study that is accepted runs
        ("gp", {"restarts": 10**18}),
        ("gp", {"max_points": 10**6}),
        ("gp", {"n_initial": 10**9}),
        ("evolution", {"population": 1}),
        ("evolution", {"population": 2.5}),
        ("evolution", {"elite_fraction": 0.9}),
        ("evolution", {"generations": 1}),
        ("evolution", {"population": 10**9}),
        ("evolution", {"generations": 10**12}),
        ("evolution", {"seed": 3}),
        ("nas_evolution", {"population": 1}),
        ("nas_evolution", {"population": 0}),
        ("nas_evolution", {"sample_size": 0}),
        ("nas_evolution", {"population": 10**9, "sample_size": 10**9}),
        ("nas_evolution", {"population": 4, "sample_size": 5}),
        ("nas_evolution", {"numeric_step": 0.0}),
    ],
)
def test_bad_option_values_are_refused(name: str, options: dict) -> None:
    with pytest.raises(ValueError):
        create_optimizer(name, CONDITIONAL, options=options)


@pytest.mark.parametrize("direction", list(Direction))
@pytest.mark.parametrize("learner", LEARNERS)
def test_the_direction_is_respected(learner: str, direction: Direction) -> None:
    """Maximising the bowl and minimising its negation both lead to its peak (0.8, 0.7).

    An optimizer that got the direction wrong would head for the corners instead.
    """

    def objective(config: dict) -> float:
        return bowl(config) if direction is Direction.MAXIMIZE else -bowl(config)

    optimizer = create_optimizer(learner, PLANE, direction=direction, seed=0, budget=40)
    history = run_study(optimizer, objective, budget=40)
    late = np.array([[o.params["x"], o.params["y"]] for o in history[20:]])
    distance = np.median(np.linalg.norm(late - (0.8, 0.7), axis=1))
    assert distance < 0.3  # random search: about 0.45 to 0.65


@pytest.mark.parametrize("learner", LEARNERS)
def test_failures_steer_the_search_away(learner: str) -> None:
    """Trials with x < 0.35 always fail: random search would put 7 of 20 late trials there."""

    def fragile(config: dict) -> float | None:
        if config["x"] < 0.35:
            return None
        return (config["x"] - 0.75) ** 2 + (config["y"] - 0.5) ** 2

    optimizer = create_optimizer(learner, PLANE, seed=0, budget=40)
    history = run_study(optimizer, fragile, budget=40)
    assert sum(o.failed for o in history) >= 3  # the region was tried, and found failing
    assert sum(o.failed for o in history[20:]) <= 4


def test_a_pruned_trial_is_a_noisy_observation_not_a_failure(name: str) -> None:
    good, pruned = {"x": 0.2, "y": 0.2}, {"x": 0.9, "y": 0.9}
    partial = Observation(pruned, 0.5, std_error=0.3, folds=1, pruned=True)
    optimizer = create_optimizer(name, PLANE, seed=0, options=QUICK.get(name, {}))
    optimizer.update([observe(good, 0.1), partial], [])
    assert partial.ok and list(optimizer.losses()) == [0.1, 0.5]
    assert config_key(pruned) in optimizer.seen_keys()
    assert all(config_key(c) != config_key(pruned) for c in optimizer.suggest(4))
    as_complete = Observation(pruned, 0.5, std_error=0.3)
    assert _digest(name, [observe(good, 0.1), partial]) != _digest(
        name, [observe(good, 0.1), as_complete]
    )


def _digest(name: str, history: list[Observation]) -> list[int]:
    optimizer = create_optimizer(name, PLANE, seed=0, options=QUICK.get(name, {}))
    optimizer.update(history, [])
    return optimizer._digest


@pytest.mark.parametrize("learner", LEARNERS)
def test_a_region_of_pruned_trials_with_good_partial_means_is_not_avoided(learner: str) -> None:
    """The best region (x < 0.35) is raced away early in every trial, but its partial means
    are good: unlike failures there, it keeps drawing trials."""

    def loss(config: dict) -> float:
        return (config["x"] - 0.2) ** 2 + (config["y"] - 0.5) ** 2

    optimizer = create_optimizer(learner, PLANE, seed=0, budget=40)
    history: list[Observation] = []
    for _ in range(40):
        optimizer.update(history, [])
        [config] = optimizer.suggest(1)
        pruned = config["x"] < 0.35
        history.append(
            Observation(
                config, loss(config), std_error=0.02, folds=2 if pruned else 5, pruned=pruned
            )
        )
    assert sum(o.pruned for o in history[20:]) >= 12  # failed there instead: 2 of 20


def test_random_search_draws_the_same_configurations_whatever_they_scored() -> None:
    """The n-th trial's configuration depends on the seed and n only: two studies whose trials
    scored differently, asked one or three at a time, run the same configurations."""

    def sequence(score, batch: int) -> list[dict]:
        optimizer = create_optimizer("random", CONDITIONAL, seed=5)
        drawn: list[dict] = []
        while len(drawn) < 9:
            batch_drawn = optimizer.suggest(batch)
            drawn += batch_drawn
            observations = [Observation(params=p, value=score(p)) for p in drawn]
            optimizer.update(observations, [])
        return drawn

    one = sequence(lambda _p: 1.0, 1)
    assert sequence(conditional_loss, 3) == one
    assert len({config_key(p) for p in one}) == 9
    assert create_optimizer("random", CONDITIONAL, seed=6).suggest(1) != one[:1]
