"""The evolutionary optimizer: generations from the history, genes, and what children inherit."""

from __future__ import annotations

import numpy as np
import pytest

from foldwise.optimizers.evolution import EvolutionOptimizer
from foldwise.optimizers.sampling import config_key
from foldwise.space import contains
from tests.optimizers.problems import CONDITIONAL, make_space, observe

LINE = make_space(
    {
        "x": {"type": "float", "low": 0.0, "high": 1.0},
        "k": {"type": "int", "low": 1, "high": 3},
        "act": {"type": "categorical", "choices": ["relu", "tanh", "gelu"]},
    }
)


def generations(*blocks: list[tuple[float, str, float]]) -> list:
    """Completed observations from blocks of (x, act, loss)."""
    return [
        observe({"x": x, "k": 2, "act": act}, loss) for block in blocks for x, act, loss in block
    ]


OLD = [(0.05 + 0.01 * i, "gelu", 10.0 + i) for i in range(5)]  # poor, near x = 0
NEW = [(0.9 + 0.02 * i, ["relu", "tanh"][i % 2], 1.0 + i) for i in range(5)]  # good, near x = 1


def test_children_come_from_the_latest_complete_generation() -> None:
    optimizer = EvolutionOptimizer(LINE, seed=0, population=5, generations=3)
    running = [{"x": 0.5, "k": 1, "act": "gelu"}]
    optimizer.update(generations(OLD, NEW, NEW[:2]), running)  # generation 2 is incomplete
    children = optimizer.suggest(20)
    # generation 2 is the last of G = 3: no mutation, so children stay between good parents
    # (the old elite loses every tournament) and categorical genes come from a parent.
    assert all(0.8 <= c["x"] <= 1.0 for c in children)
    assert {c["act"] for c in children} <= {"relu", "tanh"}
    keys = {config_key(c) for c in children}
    assert len(keys) == 20 and config_key(running[0]) not in keys


def test_mutation_is_strong_early_and_resamples_categories() -> None:
    optimizer = EvolutionOptimizer(LINE, seed=0, population=5, generations=20)
    optimizer.update(generations(OLD, NEW), [])
    children = optimizer.suggest(40)
    assert any(c["x"] < 0.6 for c in children)
    assert "gelu" in {c["act"] for c in children}


def test_the_first_generation_is_random_and_complete_before_breeding() -> None:
    optimizer = EvolutionOptimizer(LINE, seed=0, population=5, generations=3)
    optimizer.update(generations(NEW[:4]), [])
    children = optimizer.suggest(30)
    assert min(c["x"] for c in children) < 0.5  # not bred from the (good) four so far


def test_a_converged_pool_still_yields_new_configurations() -> None:
    same = [(0.5, "relu", 1.0)] * 5
    optimizer = EvolutionOptimizer(LINE, seed=0, population=5, generations=2)
    optimizer.update(generations(same, same), [])
    children = optimizer.suggest(3)
    assert config_key({"x": 0.5, "k": 2, "act": "relu"}) not in {config_key(c) for c in children}
    assert len({config_key(c) for c in children}) == 3


def test_failed_generations_fall_back_to_random() -> None:
    optimizer = EvolutionOptimizer(LINE, seed=0, population=5)
    optimizer.update([observe({"x": 0.1 * i, "k": 1, "act": "relu"}, None) for i in range(5)], [])
    assert all(contains(LINE, c) for c in optimizer.suggest(4))


@pytest.mark.parametrize(
    ("options", "generation", "expected"),
    [
        ({"generations": 7}, 3, 7),
        ({"budget": 95}, 3, 10),
        ({"budget": 95, "generations": 4}, 3, 4),
        ({}, 2, 10),
        ({}, 12, 25),
    ],
)
def test_the_horizon_comes_from_options_or_recedes(
    options: dict, generation: int, expected: int
) -> None:
    assert EvolutionOptimizer(LINE, population=10, **options).horizon(generation) == expected


def test_genes_are_unit_coordinates_in_log_space() -> None:
    optimizer = EvolutionOptimizer(CONDITIONAL)
    config = {"lr": 10**-2.5, "depth": 1, "width_1": 64, "act": "relu", "slope": 0.25}
    genes = optimizer.genes(config)
    names = optimizer.encoding.names
    lr_gene = genes[names.index("lr")]
    assert lr_gene == pytest.approx((-2.5 + 4) / (np.log10(0.3) + 4))
    assert np.isnan(genes[names.index("width_2")])
    assert genes[names.index("act")] == 0
    back = optimizer.config(np.nan_to_num(genes, nan=0.5))
    assert back == pytest.approx(config) and back.keys() == config.keys()


def test_integer_genes_reach_both_bounds() -> None:
    optimizer = EvolutionOptimizer(LINE)
    genes = optimizer.genes({"x": 0.5, "k": 2, "act": "tanh"})
    k = optimizer.encoding.names.index("k")
    low, high = genes.copy(), genes.copy()
    low[k], high[k] = 0.0, 1.0
    assert optimizer.config(low)["k"] == 1 and optimizer.config(high)["k"] == 3
