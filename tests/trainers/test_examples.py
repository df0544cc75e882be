"""The shipped examples work: the NAS study validates, the example tasks train a fold."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from foldwise.spec import OPTIMIZER_NAMES, StudySpec
from trainers.ddp import free_port
from trainers.fold_runner import run_fold
from trainers.job import FoldJob
from trainers.task import resolve_task

ROOT = Path(__file__).resolve().parents[2]


def test_nas_example_validates_and_uses_the_nas_optimizer() -> None:
    spec = StudySpec.model_validate(yaml.safe_load((ROOT / "examples/nas.yaml").read_text()))
    expected = "nas_evolution" if "nas_evolution" in OPTIMIZER_NAMES else "random"
    assert spec.optimizer.name == expected and spec.trainer.task == "nas_cnn"


def test_dataset_task_is_stacked_into_arrays() -> None:
    task = resolve_task("examples.tasks.wine_quality:classification")
    X, y = task.load_data()
    assert X.shape == (178, 13) and y.shape == (178,) and y.dtype == np.int64
    optimizer = task.make_optimizer(task.build_model({"depth": 2}), {"lr": 0.1})
    assert [g["weight_decay"] for g in optimizer.param_groups] == [1e-4, 0.0]
    assert task.loss_fn({"smoothing": 0.1}).label_smoothing == 0.1


@pytest.mark.parametrize(
    ("task", "params", "metric"),
    [
        ("examples.tasks.wine_quality:classification", {"lr": 0.05, "width": 16}, "val_accuracy"),
        ("examples.tasks.wine_quality:regression", {"lr": 0.003, "width": 32}, "val_mse"),
    ],
)
def test_example_tasks_train_a_fold(task: str, params: dict, metric: str) -> None:
    job = FoldJob(
        task=task,
        params=params,
        fold=0,
        folds=3,
        epochs=15,
        batch_size=16,
        objective_metric=metric,
        direction="maximize" if metric == "val_accuracy" else "minimize",
        options={"noise": 0.1},
    )
    epochs = list(run_fold(job, rank=0, master_addr="127.0.0.1", master_port=free_port()))
    if metric == "val_accuracy":
        assert epochs[-1][metric] > 0.85
    else:
        assert min(e[metric] for e in epochs) < 0.65  # predicting the mean scores about 1.0
