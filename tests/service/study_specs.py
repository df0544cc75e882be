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
        "racing": {"rule": "off"},  # these tests count on every fold running; racing has its own
    }
    spec.update(overrides)
    return spec


def tiny_task_spec(modes: list[str], **overrides: Any) -> dict[str, Any]:
    """A study of the tiny user task (tests/user_tasks/tiny.py) whose trials draw their `mode`
    from `modes`: 6 trials, 2 at a time, 2 folds of 2 ranks, 2 epochs; keyword arguments
    replace top-level sections."""
    spec = study_spec(
        space={
            "mode": {"type": "categorical", "choices": modes},
            "lr": {"type": "float", "low": 1e-3, "high": 1e-1, "log": True},
        },
        optimizer={"name": "random", "seed": 1},
        budget={"trials": 6},
        parallel={"trial_groups": 2, "folds": 2, "workers_per_fold": 2},
        resources={"cpus_per_worker": 0.5},
        trainer={"task": "tests.user_tasks.tiny:task", "epochs": 2, "batch_size": 32},
    )
    spec.update(overrides)
    return spec
