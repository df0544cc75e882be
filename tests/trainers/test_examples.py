"""The shipped examples work: the NAS study validates, the example tasks train a fold."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from foldwise.spec import OPTIMIZER_NAMES, StudySpec
from foldwise.trainers.fold_data import load_task_data
from foldwise.trainers.task import resolve_task
from tests.trainers.fold_jobs import epochs_of, make_job, run_local

ROOT = Path(__file__).resolve().parents[2]


def test_nas_example_validates_and_uses_the_nas_optimizer() -> None:
    spec = StudySpec.model_validate(yaml.safe_load((ROOT / "examples/nas.yaml").read_text()))
    expected = "nas_evolution" if "nas_evolution" in OPTIMIZER_NAMES else "random"
    assert spec.optimizer.name == expected and spec.trainer.task == "nas_cnn"


def test_dataset_task_is_read_as_a_dataset_and_its_hooks_work() -> None:
    task = resolve_task("examples.tasks.wine_quality:classification")
    data = load_task_data(task, {})
    assert len(data) == 178 and data.targets.dtype == np.int64
    optimizer = task.obj.make_optimizer(task.obj.build_model({"depth": 2}), {"lr": 0.1})
    assert [g["weight_decay"] for g in optimizer.param_groups] == [1e-4, 0.0]
    assert task.obj.loss_fn({"smoothing": 0.1}).label_smoothing == 0.1


@pytest.mark.parametrize(
    ("task", "params", "metric"),
    [
        ("examples.tasks.wine_quality:classification", {"lr": 0.05, "width": 16}, "val_accuracy"),
        ("examples.tasks.wine_quality:regression", {"lr": 0.003, "width": 32}, "val_mse"),
    ],
)
def test_example_tasks_train_a_fold(task: str, params: dict, metric: str) -> None:
    direction = "maximize" if metric == "val_accuracy" else "minimize"
    job = make_job(
        task,
        params=params,
        epochs=15,
        batch_size=16,
        objective={"metric": metric, "direction": direction},
        options={"noise": 0.1},
    )
    values = [e.metrics[metric] for e in epochs_of(run_local(job))]
    if metric == "val_accuracy":
        assert values[-1] > 0.85
    else:
        assert min(values) < 0.65  # predicting the mean scores about 1.0
