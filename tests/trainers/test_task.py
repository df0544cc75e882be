from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import Dataset, Subset

from foldwise.trainers.builtin import digits_mlp
from foldwise.trainers.fold_data import ArrayBatches, ArrayDataset, load_task_data
from foldwise.trainers.task import Loop, TaskNotFound, TaskProfile, call_hook, resolve_task


def test_builtin_task_resolves_and_builds() -> None:
    task = resolve_task("digits_mlp")
    assert (task.kind, task.loop) == ("classification", Loop.BUILTIN)
    model = task.obj.build_model(
        {"depth": 2, "width_1": 32, "width": 8, "act": "gelu", "dropout": 0.1}
    )
    shapes = [m.out_features for m in model.modules() if isinstance(m, nn.Linear)]
    assert shapes == [32, 8, 10]
    assert any(isinstance(m, nn.GELU) for m in model.modules())
    assert any(isinstance(m, nn.Dropout) for m in model.modules())


def test_digits_data_is_standardised_float32() -> None:
    X, y = digits_mlp.load_data({})
    assert X.dtype == np.float32 and X.shape == (1797, 64) and y.dtype == np.int64
    assert abs(float(X.mean())) < 1e-3


@pytest.mark.parametrize("name", ["tests.user_tasks.tiny", "tests.user_tasks.tiny:task"])
def test_user_task_by_module_or_attribute(name: str) -> None:
    task = resolve_task(name)
    data = load_task_data(task, {})
    assert isinstance(data.dataset, ArrayDataset) and data.eval_dataset is data.dataset
    assert len(data) == 300 and set(np.unique(data.targets)) == {0, 1, 2}
    x, y = ArrayBatches(Subset(Subset(data.dataset, [9, 8, 7, 6]), [3, 1]))[[0, 1]]
    assert x.shape == (2, 8) and x.dtype == torch.float32 and y.dtype == torch.long
    assert torch.equal(x, data.dataset.X[[6, 8]])  # a view of a view, sliced at once
    assert task.obj.build_model({"mode": "ok"})(torch.zeros(2, 8)).shape == (2, 3)
    with pytest.raises(ValueError, match="tiny task refuses mode=raise"):
        task.obj.build_model({"mode": "raise"})


def test_the_built_in_loop_declares_what_it_reports() -> None:
    profile = resolve_task("digits_mlp").profile()
    assert profile.loop is Loop.BUILTIN and "val_accuracy" in profile.declared_metrics
    assert "epoch_seconds" in profile.metrics() and "gpu_mem_mb" not in profile.metrics()
    assert "gpu_mem_mb" in profile.metrics(gpu=True)
    assert TaskProfile.from_json(profile.to_json()) == profile
    with pytest.raises(ValueError, match="not a task profile"):
        TaskProfile.from_json('{"kind": "weird", "loop": "own", "metrics": []}')


class _ClassTask:
    kind = "regression"

    def load_data(self, options: dict) -> tuple[np.ndarray, np.ndarray]:
        return np.zeros((options["n"], 2)), np.zeros(options["n"])

    def build_model(self, params: dict) -> nn.Module:
        return nn.Linear(2, 1)


def test_class_task_is_instantiated_and_gets_options() -> None:
    task = resolve_task(f"{__name__}:_ClassTask")
    data = load_task_data(task, {"n": 4})
    assert len(data) == 4 and task.kind == "regression"
    assert data.dataset[0][1].shape == (1,)  # regression targets are (n, 1) float32


class _Images(Dataset):
    """Labels in ``targets`` (torchvision's way); samples read one by one, counted."""

    def __init__(self) -> None:
        self.targets = [0, 1] * 10
        self.reads = 0

    def __len__(self) -> int:
        return 20

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        self.reads += 1
        return torch.full((3,), float(i)), self.targets[i]


class _OwnLoop:
    metrics = ["val_f1"]

    def load_data(self) -> Dataset:
        return _Images()

    def load_eval_data(self) -> Dataset:
        return _Images()

    def train_fold(self, ctx) -> None:
        pass


def test_a_dataset_is_read_lazily_with_its_labels_from_targets() -> None:
    task = resolve_task(f"{__name__}:_OwnLoop")
    assert task.loop is Loop.OWN and task.profile().declared_metrics == ("val_f1",)
    data = load_task_data(task, {})
    assert data.dataset.reads == 0 and data.targets.tolist() == [0, 1] * 10
    assert data.eval_dataset is not data.dataset


class _NoMetrics:
    def load_data(self) -> tuple:
        return np.zeros((4, 1)), np.zeros(4)

    def train_fold(self, ctx) -> None:
        pass


class _TwoWays(_NoMetrics):
    metrics = ["m"]

    def build_module(self, params: dict) -> nn.Module:
        return nn.Linear(1, 1)


class _OwnLoopWithItsModel(_NoMetrics):
    """An own loop that gives build_model too: it trains with train_fold, and its saved models
    can be rebuilt (for a hold-out score)."""

    metrics = ["m"]

    def build_model(self, params: dict) -> nn.Module:
        return nn.Linear(1, 1)

    def load_test_data(self) -> tuple:
        return [[0.0]], [0]


class _Reserved(_NoMetrics):
    metrics = ["val_f1", "epoch_seconds"]


def test_hooks_get_the_fold_context_when_they_ask_for_it() -> None:
    assert call_hook(lambda params: params, {"a": 1}, ctx="ctx") == {"a": 1}
    assert call_hook(lambda params, ctx: ctx, {"a": 1}, ctx="ctx") == "ctx"


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("no_such_task", "cannot import 'no_such_task'"),
        ("not a name", "neither a built-in task"),
        ("tests.user_tasks.nope:task", "cannot import 'tests.user_tasks.nope'"),
        ("tests.user_tasks.tiny:missing", "has no 'missing'"),
        ("tests.user_tasks:task", "has no 'task'"),
        ("json", "has no load_data"),
        (f"{__name__}:_NoMetrics", "declare the metrics it reports"),
        (f"{__name__}:_TwoWays", "has both train_fold and build_module"),
        (f"{__name__}:_Reserved", "foldwise measures 'epoch_seconds' itself"),
    ],
)
def test_unknown_tasks_raise_task_not_found(name: str, message: str) -> None:
    with pytest.raises(TaskNotFound, match=message) as info:
        resolve_task(name)
    assert isinstance(info.value, ValueError)
    assert "\n" not in str(info.value)


def test_an_own_loop_may_give_build_model_to_rebuild_its_saved_models() -> None:
    task = resolve_task(f"{__name__}:_OwnLoopWithItsModel")
    assert task.loop is Loop.OWN and task.model_builder() is not None
    profile = task.profile()
    assert (profile.test_data, profile.rebuilds_models, profile.own_loaders) == (True, True, True)
    assert TaskProfile.from_json(profile.to_json()) == profile
    bare = resolve_task(f"{__name__}:_Declared").profile()
    assert (bare.test_data, bare.rebuilds_models) == (False, False)


class _Declared(_NoMetrics):
    metrics = ["m"]


def test_a_test_fraction_keeps_the_same_stratified_digits_aside() -> None:
    options = {"test_fraction": 0.25}
    X, y = digits_mlp.load_data(options)
    X_test, y_test = digits_mlp.load_test_data(options)
    assert (len(y), len(y_test)) == (1347, 450)
    assert np.bincount(y_test).min() >= 43  # each class keeps its share (the smallest has 174)
    again, _ = digits_mlp.load_test_data(options)
    assert np.array_equal(again, X_test)
    whole, labels = digits_mlp.load_data({})
    assert np.array_equal(np.bincount(y) + np.bincount(y_test), np.bincount(labels))
    with pytest.raises(ValueError, match="only when trainer.options sets test_fraction"):
        digits_mlp.load_test_data({})
