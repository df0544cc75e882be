"""Aging evolution: who is alive, who wins, and what a mutation changes."""

from __future__ import annotations

import numpy as np
import pytest

from foldwise.optimizers.gp import GPOptimizer
from foldwise.optimizers.nas_evolution import NASEvolutionOptimizer, _reflect
from foldwise.optimizers.sampling import config_key
from foldwise.space import contains
from tests.optimizers.problems import CONDITIONAL, make_space, observe

CELL = make_space(
    {
        "op": {"type": "categorical", "choices": ["conv3", "conv5", "pool", "skip"]},
        "layers": {"type": "int", "low": 1, "high": 4},
        "kernel": {"type": "int", "low": 1, "high": 7, "when": {"op": {"in": ["conv3", "conv5"]}}},
    }
)


def changed(parent: dict, child: dict) -> set[str]:
    """Names whose value differs between the two, or that only one of them has."""
    return {n for n in parent.keys() | child.keys() if parent.get(n) != child.get(n)}


def test_a_child_changes_one_choice_and_its_dependants_only() -> None:
    optimizer = NASEvolutionOptimizer(CELL, seed=0)
    rng = np.random.default_rng(0)
    parent = {"op": "conv3", "layers": 2, "kernel": 3}
    for _ in range(200):
        child = optimizer.mutate(parent, rng)
        assert contains(CELL, child)
        diff = changed(parent, child)
        assert diff and (len(diff) == 1 or diff == {"op", "kernel"})
        if child["op"] in ("pool", "skip"):
            assert "kernel" not in child


def test_newly_active_parameters_get_values() -> None:
    optimizer = NASEvolutionOptimizer(CELL, seed=0)
    rng = np.random.default_rng(1)
    children = [optimizer.mutate({"op": "pool", "layers": 2}, rng) for _ in range(200)]
    convs = [c for c in children if c["op"].startswith("conv")]
    assert convs and all(1 <= c["kernel"] <= 7 for c in convs)


def test_the_oldest_die_and_the_best_of_the_living_breed() -> None:
    """An old champion has aged out: children descend from the best member still alive."""
    optimizer = NASEvolutionOptimizer(CELL, seed=0, population=4, sample_size=4)
    champion = observe({"op": "skip", "layers": 1}, 0.0)
    alive = [observe({"op": "pool", "layers": k}, 5.0 + k) for k in (1, 2, 3)]
    alive.append(observe({"op": "conv5", "layers": 4, "kernel": 5}, 1.0))
    optimizer.update([champion, *alive], [])
    for child in optimizer.suggest(10):
        assert len(changed(alive[-1].params, child)) <= 2  # one step from conv5/4/5
        assert child != champion.params


def test_the_first_population_is_random_counting_pending_trials() -> None:
    optimizer = NASEvolutionOptimizer(CELL, seed=0, population=5)
    best = observe({"op": "conv3", "layers": 2, "kernel": 3}, 0.0)
    optimizer.update([best], [{"op": "pool", "layers": 1}])
    # 3 random trials complete the first population, then children of the only result
    batch = optimizer.suggest(8)
    assert all(len(changed(best.params, c)) <= 2 for c in batch[3:])
    assert sum(len(changed(best.params, c)) > 2 for c in batch[:3]) >= 1


def test_failed_members_never_win() -> None:
    optimizer = NASEvolutionOptimizer(CELL, seed=0, population=4, sample_size=4)
    good = observe({"op": "conv5", "layers": 3, "kernel": 7}, 2.0)
    failed = [observe({"op": "skip", "layers": k}, None) for k in (1, 2, 4)]
    optimizer.update([*failed, good], [])
    assert all(len(changed(good.params, c)) <= 2 for c in optimizer.suggest(10))


def test_children_are_new_even_in_a_crowded_neighbourhood() -> None:
    optimizer = NASEvolutionOptimizer(CONDITIONAL, seed=0, population=5, sample_size=5)
    rng = np.random.default_rng(0)
    history = [observe(c, float(i)) for i, c in enumerate(optimizer.suggest(5))]
    neighbours = [optimizer.mutate(history[0].params, rng) for _ in range(30)]
    optimizer.update(history, neighbours)
    keys = [config_key(c) for c in optimizer.suggest(10)]
    assert len(set(keys)) == 10 and not set(keys) & {config_key(c) for c in neighbours}


def test_numeric_steps_reflect_off_the_bounds() -> None:
    assert [_reflect(u) for u in (0.3, -0.2, 1.25, 2.5)] == [0.3, 0.2, 0.75, 0.5]


LEVELS = ["l0", "l1", "l2", "l3", "l4"]
EDGES = make_space({f"e{i}": {"type": "categorical", "choices": LEVELS} for i in range(4)})


def edge_loss(config: dict) -> float:
    """Lower levels are better on every edge; edge e0 counts most."""
    return sum((4 - i) * LEVELS.index(config[f"e{i}"]) for i in range(4))


def test_the_neighbours_are_every_single_change_with_conditions_resolved() -> None:
    optimizer = NASEvolutionOptimizer(CELL, seed=0)
    parent = {"op": "conv3", "layers": 2, "kernel": 3}
    neighbours = optimizer.neighbours(parent, np.random.default_rng(0))
    ops = sorted(n["op"] for n in neighbours if n["op"] != "conv3")
    assert ops == ["conv5", "pool", "skip"]  # each other choice once
    assert all(contains(CELL, n) and len(changed(parent, n)) <= 2 for n in neighbours)
    assert sum(n.get("kernel") != 3 and n["op"] == "conv3" for n in neighbours) >= 1
    assert all("kernel" not in n for n in neighbours if n["op"] in ("pool", "skip"))


def test_the_guide_picks_the_mutant_its_model_expects_to_improve() -> None:
    """After a random population of 16, a guided child beats the best result in most seeds
    (each seed does with a chance of about 0.7, so at least half of 32 leaves a chance of
    about 1% to fail on an unlucky stream), and lands far closer to it than a random
    one-choice mutation of a tournament winner."""
    gaps: dict[str, list[float]] = {"gp": [], "none": []}
    for seed in range(32):
        for guide, found in gaps.items():
            optimizer = NASEvolutionOptimizer(EDGES, seed=seed, population=16, guide=guide)
            history = [observe(c, edge_loss(c)) for c in optimizer.suggest(16)]
            optimizer.update(history, [])
            child = optimizer.suggest(1)[0]
            found.append(edge_loss(child) - min(o.value for o in history))
    assert sum(g < 0 for g in gaps["gp"]) >= 16, gaps
    assert np.mean(gaps["gp"]) < np.mean(gaps["none"]) - 3, gaps


def test_guided_children_are_new_and_count_the_batch_as_running(monkeypatch) -> None:
    """Each child of a batch is scored with the pending trials and the children before it
    told as running, under one fit of the model for the whole batch."""
    optimizer = NASEvolutionOptimizer(EDGES, seed=3, population=10)
    history = [observe(c, edge_loss(c)) for c in optimizer.suggest(10)]
    pending = [{"e0": "l0", "e1": "l0", "e2": "l0", "e3": "l4"}]
    optimizer.update(history, pending)
    told, fits = [], []
    score, fit = GPOptimizer.score_candidates, GPOptimizer._fit

    def spy_score(self, candidates, running):
        told.append([config_key(c) for c in running])
        return score(self, candidates, running)

    def spy_fit(self, rng):
        fits.append(1)
        return fit(self, rng)

    monkeypatch.setattr(GPOptimizer, "score_candidates", spy_score)
    monkeypatch.setattr(GPOptimizer, "_fit", spy_fit)
    batch = optimizer.suggest(6)
    keys = [config_key(c) for c in batch]
    assert len(set(keys)) == 6 and not set(keys) & {config_key(o.params) for o in history}
    assert told == [[config_key(pending[0]), *keys[:k]] for k in range(6)]
    assert len(fits) == 1


def test_a_small_budget_still_gets_guided_children() -> None:
    """The guided default population is a tenth of the budget, at least 10, but never more
    than half of it."""
    sizes = {b: NASEvolutionOptimizer(EDGES, seed=0, budget=b).population for b in (8, 30, 900)}
    assert sizes == {8: 4, 30: 10, 900: 50}
    assert NASEvolutionOptimizer(EDGES, seed=0, budget=8, guide="none").population == 5


def test_an_unknown_guide_is_refused() -> None:
    with pytest.raises(ValueError, match="guide"):
        NASEvolutionOptimizer(EDGES, seed=0, guide="tpe")
