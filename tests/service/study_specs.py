"""Study documents the service tests submit."""

from __future__ import annotations

from typing import Any


def study_spec(**overrides: Any) -> dict[str, Any]:
    """A small valid study document; keyword arguments replace top-level sections."""
    spec: dict[str, Any] = {
        "name": "digits-mlp",
        "objective": {"metric": "val_loss", "direction": "minimize"},
        "space": {
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
        },
        "optimizer": {"name": "random", "seed": 3},
        "budget": {"trials": 4},
        "parallel": {"trial_groups": 2, "folds": 3, "workers_per_fold": 1},
        "trainer": {"task": "digits_mlp", "epochs": 2, "batch_size": 64},
    }
    spec.update(overrides)
    return spec
