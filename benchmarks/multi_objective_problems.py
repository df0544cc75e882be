"""The problems of the multi-objective benchmark, in minimisation form: ZDT1 and ZDT2 (6
dimensions, reference point (11, 11)), DTLZ2 (3 objectives, 6 dimensions, (1.1, 1.1, 1.1)) and
BraninCurrin (2 dimensions, (18, 6)), after BoTorch's definitions and reference points; the NAS
CNN on the digits (validation error in percent against thousands of parameters, read from the
table ``benchmarks/digits_cnn_table.py`` built; reference point (25 %, 60 thousand): a model
worse than a quarter wrong or larger than the table's largest counts for nothing; the table's
own front reaches 1298.7); and two constrained single-objective problems scored by the feasible
regret: Branin under ``(x1 - 2.5)^2 + (x2 - 7.5)^2 <= 50`` (Gardner et al. 2014's disc; optimum
0.397887, inside the disc) and Hartmann6 under ``||x||_2 <= 1.25`` (Ax's tutorial; optimum
-3.32237, inside).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchmarks import digits_cnn_table
from benchmarks.problems import branin, hartmann6

Values = tuple[list[float], float]
"""A configuration's objectives (minimisation form) and its constraint's signed gap to the
limit (positive: broken by that much; zero or negative: feasible)."""

BRANIN_OPTIMUM = 0.397887
HARTMANN6_OPTIMUM = -3.32237


@dataclass(frozen=True)
class Problem:
    """A problem in minimisation form: its space (study-spec form), what a configuration
    scores, and how a run is judged."""

    name: str
    space: dict[str, dict[str, Any]]
    evaluate: Callable[[dict[str, Any]], Values]
    reference: list[float] | None
    """The hypervolume's reference point; None for a constrained single-objective problem."""
    optimum: float = 0.0
    """A constrained single-objective problem's feasible optimum."""

    @property
    def objectives(self) -> int:
        return 1 if self.reference is None else len(self.reference)


def _unit(dims: int) -> dict[str, dict[str, Any]]:
    return {f"x{i}": {"type": "float", "low": 0.0, "high": 1.0} for i in range(dims)}


def _vector(config: dict[str, Any]) -> np.ndarray:
    return np.array([config[f"x{i}"] for i in range(len(config))])


def zdt(x: np.ndarray, concave: bool) -> list[float]:
    """ZDT1 (convex front) or ZDT2 (concave front): f1 = x0, f2 = g (1 - h(f1 / g))."""
    g = 1 + 9 * float(np.mean(x[1:]))
    ratio = x[0] / g
    return [float(x[0]), g * (1 - (ratio**2 if concave else math.sqrt(ratio)))]


def dtlz2(x: np.ndarray, objectives: int = 3) -> list[float]:
    g = float(np.sum((x[objectives - 1 :] - 0.5) ** 2))
    angles = x[: objectives - 1] * math.pi / 2
    out = []
    for i in range(objectives):
        value = 1 + g
        value *= float(np.prod(np.cos(angles[: objectives - 1 - i])))
        if i > 0:
            value *= math.sin(angles[objectives - 1 - i])
        out.append(value)
    return out


def branin_currin(x: np.ndarray) -> list[float]:
    x0, x1 = float(x[0]), float(x[1])
    b = branin({"x1": 15 * x0 - 5, "x2": 15 * x1})
    factor = 1 - math.exp(-1 / (2 * x1)) if x1 > 0 else 1.0
    currin = factor * (2300 * x0**3 + 1900 * x0**2 + 2092 * x0 + 60)
    currin /= 100 * x0**3 + 500 * x0**2 + 4 * x0 + 20
    return [b, currin]


def constrained_branin(config: dict[str, Any]) -> Values:
    x1, x2 = config["x1"], config["x2"]
    return [branin(config)], ((x1 - 2.5) ** 2 + (x2 - 7.5) ** 2 - 50.0) / 50.0


def constrained_hartmann6(config: dict[str, Any]) -> Values:
    x = _vector(config)
    return [hartmann6(x)], (float(np.linalg.norm(x)) - 1.25) / 1.25


DIGITS_CNN_REFERENCE = [25.0, 60.0]
"""Validation error (%) and thousands of parameters a front point must beat to count."""


def digits_cnn(config: dict[str, Any]) -> Values:
    """The table's mean validation error (%) and thousands of parameters of an architecture."""
    row = digits_cnn_table.load_table()[digits_cnn_table.key(config)]
    return [row["error"], row["params"] / 1000.0], 0.0


def problems() -> dict[str, Problem]:
    """Every problem of the benchmark, by name."""
    return {
        "ZDT1": Problem("ZDT1", _unit(6), lambda c: (zdt(_vector(c), False), 0.0), [11.0, 11.0]),
        "ZDT2": Problem("ZDT2", _unit(6), lambda c: (zdt(_vector(c), True), 0.0), [11.0, 11.0]),
        "DTLZ2": Problem("DTLZ2", _unit(6), lambda c: (dtlz2(_vector(c)), 0.0), [1.1] * 3),
        "BraninCurrin": Problem(
            "BraninCurrin", _unit(2), lambda c: (branin_currin(_vector(c)), 0.0), [18.0, 6.0]
        ),
        "Branin+disc": Problem(
            "Branin+disc",
            {
                "x1": {"type": "float", "low": -5.0, "high": 10.0},
                "x2": {"type": "float", "low": 0.0, "high": 15.0},
            },
            constrained_branin,
            None,
            BRANIN_OPTIMUM,
        ),
        "Hartmann6+ball": Problem(
            "Hartmann6+ball", _unit(6), constrained_hartmann6, None, HARTMANN6_OPTIMUM
        ),
        "DigitsCNN": Problem(
            "DigitsCNN", digits_cnn_table.space(), digits_cnn, DIGITS_CNN_REFERENCE
        ),
    }
