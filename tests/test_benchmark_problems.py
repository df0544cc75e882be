"""Every problem of the optimizer benchmark against its known optimum."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize

from benchmarks.optimizers import nas_problems
from benchmarks.problems import MIXED_LEVELS, hartmann_mixed, synthetic_problems

PROBLEMS = {**synthetic_problems(), **nas_problems()}


def _random_configs(space: dict, count: int, rng: np.random.Generator) -> list[dict]:
    configs = []
    for _ in range(count):
        config = {}
        for name, param in space.items():
            if param["type"] == "float":
                config[name] = float(rng.uniform(param["low"], param["high"]))
            elif param["type"] == "int":
                config[name] = int(rng.integers(param["low"], param["high"] + 1))
            else:
                config[name] = param["choices"][rng.integers(len(param["choices"]))]
        configs.append(config)
    return configs


@pytest.mark.parametrize("name", [n for n in PROBLEMS if n != "hartmann6_mixed"])
def test_the_objective_reaches_its_optimum_at_its_argmin(name: str) -> None:
    problem = PROBLEMS[name]
    assert problem.objective(problem.argmin) == pytest.approx(problem.optimum, abs=1e-5)


@pytest.mark.parametrize("name", list(PROBLEMS))
def test_no_random_point_beats_the_optimum(name: str) -> None:
    problem = PROBLEMS[name]
    rng = np.random.default_rng(7)
    values = [problem.objective(c) for c in _random_configs(problem.space, 3000, rng)]
    assert min(values) > problem.optimum - 1e-9
    assert max(values) - min(values) > 0.1  # not flat: there is something to optimise


def test_the_mixed_hartmanns_optimum_is_its_best_discrete_head_polished() -> None:
    """The stated optimum: the best (i0, i1, c2) head, the continuous tail polished by
    L-BFGS; no other head near the top does better."""
    problem = PROBLEMS["hartmann6_mixed"]

    def best_tail(head: dict) -> float:
        result = minimize(
            lambda x: hartmann_mixed({**head, "x3": x[0], "x4": x[1], "x5": x[2]}),
            x0=[0.275, 0.312, 0.657],
            bounds=[(0, 1)] * 3,
            method="L-BFGS-B",
        )
        return float(result.fun)

    assert best_tail(problem.argmin) == pytest.approx(problem.optimum, abs=1e-5)
    for i0 in (3, 4, 5):
        for i1 in (2, 3, 4):
            for c2 in MIXED_LEVELS:
                assert best_tail({"i0": i0, "i1": i1, "c2": c2}) >= problem.optimum - 1e-6


def test_the_suite_spans_the_problems_the_comparison_needs() -> None:
    assert set(PROBLEMS) == {
        "branin",
        "hartmann6",
        "hartmann6_mixed",
        "ackley6",
        "levy6",
        "rosenbrock4",
        "nb201_cifar10",
        "nb201_cifar100",
        "nb201_imagenet",
    }
    dims = {name: len(problem.space) for name, problem in PROBLEMS.items()}
    assert 5 <= dims["ackley6"] <= 10 and 5 <= dims["levy6"] <= 10
