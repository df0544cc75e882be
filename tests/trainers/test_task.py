from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from trainers.builtin import digits_mlp
from trainers.task import Task, TaskNotFound, resolve_task


def test_builtin_task_resolves_and_builds() -> None:
    task = resolve_task("digits_mlp")
    assert task.kind == "classification"
    model = task.build_model(
        {"depth": 2, "width_1": 32, "width": 8, "act": "gelu", "dropout": 0.1}
    )
    shapes = [m.out_features for m in model.modules() if isinstance(m, nn.Linear)]
    assert shapes == [32, 8, 10]
    assert any(isinstance(m, nn.GELU) for m in model.modules())
    assert any(isinstance(m, nn.Dropout) for m in model.modules())


def test_digits_data_is_standardised_float32() -> None:
    X, y = digits_mlp.load_data()
    assert X.dtype == np.float32 and X.shape == (1797, 64) and y.dtype == np.int64
    assert abs(float(X.mean())) < 1e-3


@pytest.mark.parametrize("name", ["tests.user_tasks.tiny", "tests.user_tasks.tiny:task"])
def test_user_task_by_module_or_attribute(name: str) -> None:
    task = resolve_task(name)
    X, y = task.load_data()
    assert X.shape == (300, 8) and set(np.unique(y)) == {0, 1, 2}
    assert task.build_model({"mode": "ok"})(torch.zeros(2, 8)).shape == (2, 3)
    with pytest.raises(ValueError, match="tiny task refuses mode=raise"):
        task.build_model({"mode": "raise"})


def test_defaults_adam_and_loss_by_kind() -> None:
    task = resolve_task("digits_mlp")
    model = task.build_model({})
    optimizer = task.make_optimizer(model, {"lr": 0.05, "weight_decay": 1e-4})
    assert isinstance(optimizer, torch.optim.Adam)
    assert optimizer.param_groups[0]["lr"] == 0.05
    assert optimizer.param_groups[0]["weight_decay"] == 1e-4
    assert isinstance(task.loss_fn({}), nn.CrossEntropyLoss)
    regression = Task(
        "r", type("R", (), {"kind": "regression", "load_data": None, "build_model": None})
    )
    assert isinstance(regression.loss_fn({}), nn.MSELoss)


class _ClassTask:
    kind = "regression"

    def load_data(self, options: dict) -> tuple[np.ndarray, np.ndarray]:
        return np.zeros((options["n"], 2)), np.zeros(options["n"])

    def build_model(self, params: dict) -> nn.Module:
        return nn.Linear(2, 1)


def test_class_task_is_instantiated_and_gets_options() -> None:
    task = resolve_task(f"{__name__}:_ClassTask")
    X, y = task.load_data({"n": 4})
    assert X.shape == (4, 2) and task.kind == "regression"


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("no_such_task", "cannot import 'no_such_task'"),
        ("not a name", "neither a built-in task"),
        ("tests.user_tasks.nope:task", "cannot import 'tests.user_tasks.nope'"),
        ("tests.user_tasks.tiny:missing", "has no 'missing'"),
        ("tests.user_tasks:task", "has no 'task'"),
        ("json", "has no load_data or build_model"),
    ],
)
def test_unknown_tasks_raise_task_not_found(name: str, message: str) -> None:
    with pytest.raises(TaskNotFound, match=message) as info:
        resolve_task(name)
    assert isinstance(info.value, ValueError)
    assert "\n" not in str(info.value)
