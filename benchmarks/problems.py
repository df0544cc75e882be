"""The synthetic problems of the optimizer benchmark, each with its known optimum.

Definitions follow the Virtual Library of Simulation Experiments (Surjanovic & Bingham) and
BoTorch's test functions: Branin, Hartmann6, a mixed-type Hartmann6 (two integer and one
categorical dimension), Ackley, Levy and Rosenbrock. ``tests/test_benchmark_problems.py`` checks
every objective against its optimum.

Ackley's usual box [−32.768, 32.768]^d has its optimum exactly at the centre, which Ax tries
first, so there it measured only that habit (regret 0 from trial 1 on every seed); here the
box keeps its width but is shifted, [−15, 50]^6, with the optimum inside and off the centre.
Levy's usual [−10, 10]^d has its optimum at 1, so near the centre that the centre alone has
regret 1.08 in 6 dimensions; it is shifted the same way, to [−6, 14]^6.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

Objective = Callable[[dict[str, Any]], float]

# Hartmann6 (Dixon & Szegő): global minimum -3.32237 on [0, 1]^6.
H_A = np.array(
    [[10, 3, 17, 3.5, 1.7, 8], [0.05, 10, 17, 0.1, 8, 14], [3, 3.5, 1.7, 10, 17, 8]]
    + [[17, 8, 0.05, 10, 0.1, 14]]
)
H_P = 1e-4 * np.array(
    [[1312, 1696, 5569, 124, 8283, 5886], [2329, 4135, 8307, 3736, 1004, 9991]]
    + [[2348, 1451, 3522, 2883, 3047, 6650], [4047, 8828, 8732, 5743, 1091, 381]]
)
H_ALPHA = np.array([1.0, 1.2, 3.0, 3.2])
HARTMANN6_ARGMIN = (0.20169, 0.150011, 0.476874, 0.275332, 0.311652, 0.6573)
MIXED_LEVELS = ["0.0", "0.25", "0.5", "0.75", "1.0"]
MIXED_OPTIMUM = -3.317134
"""Best value of the mixed Hartmann6: each grid/choice head near the top, L-BFGS on the rest."""
MIXED_ARGMIN_HEAD = {"i0": 4, "i1": 3, "c2": "0.5"}


@dataclass(frozen=True)
class Problem:
    name: str
    space: dict[str, dict[str, Any]]
    objective: Objective
    budget: int
    optimum: float | None  # None: regret is measured from the best value any run found
    argmin: dict[str, Any] | None = None
    """A configuration at the optimum (for the mixed Hartmann6, only its discrete head)."""


def hartmann6(x: np.ndarray) -> float:
    inner = (H_A * (np.asarray(x)[None, :] - H_P) ** 2).sum(1)
    return float(-(H_ALPHA * np.exp(-inner)).sum())


def branin(c: dict[str, Any]) -> float:
    x1, x2 = c["x1"], c["x2"]
    b, k = 5.1 / (4 * math.pi**2), 5 / math.pi
    return (x2 - b * x1**2 + k * x1 - 6) ** 2 + 10 * (1 - 1 / (8 * math.pi)) * math.cos(x1) + 10


def hartmann_mixed(c: dict[str, Any]) -> float:
    head = [c["i0"] / 20, c["i1"] / 20, float(c["c2"])]
    return hartmann6(np.array(head + [c["x3"], c["x4"], c["x5"]]))


def ackley(x: np.ndarray) -> float:
    """Minimum 0 at the origin; a nearly flat outer region full of local minima."""
    x = np.asarray(x, dtype=float)
    a, b, c = 20.0, 0.2, 2 * math.pi
    mean_sq, mean_cos = float(np.mean(x**2)), float(np.mean(np.cos(c * x)))
    return -a * math.exp(-b * math.sqrt(mean_sq)) - math.exp(mean_cos) + a + math.e


def levy(x: np.ndarray) -> float:
    """Minimum 0 at (1, ..., 1)."""
    w = 1 + (np.asarray(x, dtype=float) - 1) / 4
    head = math.sin(math.pi * w[0]) ** 2
    body = float(np.sum((w[:-1] - 1) ** 2 * (1 + 10 * np.sin(math.pi * w[:-1] + 1) ** 2)))
    tail = (w[-1] - 1) ** 2 * (1 + math.sin(2 * math.pi * w[-1]) ** 2)
    return head + body + tail


def rosenbrock(x: np.ndarray) -> float:
    """Minimum 0 at (1, ..., 1), at the bottom of a long, curved, flat valley."""
    x = np.asarray(x, dtype=float)
    return float(np.sum(100 * (x[1:] - x[:-1] ** 2) ** 2 + (x[:-1] - 1) ** 2))


def box(names: list[str], low: float, high: float) -> dict[str, dict[str, Any]]:
    return {name: {"type": "float", "low": low, "high": high} for name in names}


def _vector(function: Callable[[np.ndarray], float], dims: int) -> Objective:
    return lambda c: function(np.array([c[f"x{i}"] for i in range(dims)]))


def synthetic_problems() -> dict[str, Problem]:
    """The synthetic part of the suite, by name, with budgets of evaluations."""
    six = [f"x{i}" for i in range(6)]
    mixed = {
        "i0": {"type": "int", "low": 0, "high": 20},
        "i1": {"type": "int", "low": 0, "high": 20},
        "c2": {"type": "categorical", "choices": MIXED_LEVELS},
        **box(["x3", "x4", "x5"], 0.0, 1.0),
    }
    found = [
        Problem(
            "branin",
            {"x1": {"type": "float", "low": -5, "high": 10}, **box(["x2"], 0.0, 15.0)},
            branin,
            30,
            0.397887,
            {"x1": math.pi, "x2": 2.275},
        ),
        Problem(
            "hartmann6",
            box(six, 0.0, 1.0),
            _vector(hartmann6, 6),
            50,
            -3.32237,
            dict(zip(six, HARTMANN6_ARGMIN, strict=True)),
        ),
        Problem("hartmann6_mixed", mixed, hartmann_mixed, 50, MIXED_OPTIMUM, MIXED_ARGMIN_HEAD),
        Problem(
            "ackley6",
            box(six, -15.0, 50.0),  # the usual width, but the optimum off the centre
            _vector(ackley, 6),
            60,
            0.0,
            dict.fromkeys(six, 0.0),
        ),
        Problem("levy6", box(six, -6.0, 14.0), _vector(levy, 6), 60, 0.0, dict.fromkeys(six, 1.0)),
        Problem(
            "rosenbrock4",
            box(six[:4], -5.0, 10.0),
            _vector(rosenbrock, 4),
            50,
            0.0,
            dict.fromkeys(six[:4], 1.0),
        ),
    ]
    return {problem.name: problem for problem in found}
