"""Search spaces, toy objectives and a study simulator shared by the optimizer tests."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from pydantic import TypeAdapter

from foldwise.optimizers import BaseOptimizer, Observation
from foldwise.space import Param

Objective = Callable[[dict[str, Any]], float | None]


def make_space(raw: dict[str, dict[str, Any]]) -> dict[str, Param]:
    """A validated space from its JSON form, as the study spec would give it."""
    return TypeAdapter(dict[str, Param]).validate_python(raw)


CONDITIONAL = make_space(
    {
        "lr": {"type": "float", "low": 1e-4, "high": 0.3, "log": True},
        "depth": {"type": "int", "low": 1, "high": 3},
        "width_1": {"type": "int", "low": 16, "high": 256, "log": True},
        "width_2": {
            "type": "int",
            "low": 16,
            "high": 256,
            "log": True,
            "when": {"depth": {"gte": 2}},
        },
        "act": {"type": "categorical", "choices": ["relu", "tanh", "gelu"]},
        "slope": {"type": "float", "low": 0.0, "high": 0.5, "when": {"act": "relu"}},
    }
)

PLANE = make_space(
    {
        "x": {"type": "float", "low": 0.0, "high": 1.0},
        "y": {"type": "float", "low": 0.0, "high": 1.0},
    }
)

TINY = make_space(
    {
        "n": {"type": "int", "low": 1, "high": 2},
        "act": {"type": "categorical", "choices": ["relu", "tanh"]},
    }
)


def conditional_loss(config: dict[str, Any]) -> float:
    """A smooth loss over CONDITIONAL whose best region is lr≈1e-2, depth 2, gelu."""
    loss = (math.log10(config["lr"]) + 2.0) ** 2 + 0.2 * abs(config["depth"] - 2)
    loss += 0.1 * (math.log2(config["width_1"]) - 6.0) ** 2
    loss += 0.1 * (math.log2(config.get("width_2", 64)) - 6.0) ** 2
    return loss + {"relu": 0.3 + config.get("slope", 0.0), "tanh": 0.5, "gelu": 0.0}[config["act"]]


def bowl(config: dict[str, Any]) -> float:
    """Peaks at (0.8, 0.7) when maximised; its minimum on the square is the corner (0, 0)."""
    return -((config["x"] - 0.8) ** 2 + (config["y"] - 0.7) ** 2)


def observe(config: dict[str, Any], value: float | None) -> Observation:
    return Observation(
        dict(config), value, std_error=None if value is None else 0.0, failed=value is None
    )


def run_study(
    optimizer: BaseOptimizer,
    objective: Objective,
    *,
    budget: int,
    parallel: int = 3,
    finish: int = 1,
    seed: int = 0,
    on_step: Callable[[list[Observation], list[dict[str, Any]]], None] | None = None,
    tell: Callable[[dict[str, Any], Any], Observation] = observe,
) -> list[Observation]:
    """Simulate the service: keep ``parallel`` trials in flight; finish ``finish`` of them
    (picked at random, so they arrive out of order) between two calls to ``suggest``.

    Before each ``suggest``, ``on_step(completed, pending)`` sees the picture the optimizer
    was just given; ``tell(config, objective(config))`` makes a finished trial's observation.
    Returns the completed observations in arrival order.
    """
    rng = np.random.default_rng(seed)
    completed: list[Observation] = []
    pending: list[dict[str, Any]] = []
    asked = 0
    while len(completed) < budget:
        want = min(parallel - len(pending), budget - asked)
        if want > 0:
            optimizer.update(completed, pending)
            if on_step is not None:
                on_step(completed, pending)
            pending += optimizer.suggest(want)
            asked += want
        for _ in range(min(finish, len(pending), budget - len(completed))):
            done = pending.pop(int(rng.integers(len(pending))))
            completed.append(tell(done, objective(done)))
    return completed
