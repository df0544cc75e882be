"""Scoring saved models on a task's test data: the hold-out score of a study's best trial.

Each saved model (a fold's or a refit's ``model.pt``) is rebuilt from its params
(``Task.model_builder``) and predicts the test set (``load_test_data``), batch by batch; an
ensemble averages what its members predict: class probabilities for classification (soft
voting), outputs for regression. The metrics are foldwise's for the task's kind
(``KIND_METRICS``), named as the validation metrics without ``val_`` (``val_loss`` is ``loss``
here), and the task's own ``test_metrics(outputs, targets)`` when it gives one.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from sklearn.metrics import f1_score, r2_score
from torch.utils.data import BatchSampler, DataLoader, SequentialSampler

from foldwise.trainers.ddp import to_device
from foldwise.trainers.fold_data import TaskData, array_batches, load_test_data
from foldwise.trainers.task import Task, TaskNotFound, resolve_task

KIND_METRICS = {
    "classification": ("loss", "accuracy", "f1"),
    "regression": ("mse", "mae", "r2"),
}
"""What every hold-out score reports: the mean cross-entropy of the predicted probabilities,
the accuracy and the macro-averaged F1; or the mean squared error (over every output), the
mean absolute error and R²."""


def score_saved_models(
    task_name: str,
    options: dict[str, Any],
    models: Sequence[bytes],
    *,
    batch_size: int = 1024,
    device: str = "cpu",
) -> dict[str, Any]:
    """``{"ensemble": metrics, "members": [metrics of each model]}`` of the saved ``models``
    (``model.pt`` files) of task ``task_name`` on its test data."""
    if not models:
        raise ValueError("no model to score")
    task = resolve_task(task_name)
    test = load_test_data(task, options)
    outputs = [
        predict(task, _load(data), test, batch_size=batch_size, device=device) for data in models
    ]
    targets = np.asarray(test.targets)
    return {
        "ensemble": score(task, np.mean(outputs, axis=0), targets),
        "members": [score(task, out, targets) for out in outputs],
    }


def predict(
    task: Task, saved: dict[str, Any], test: TaskData, *, batch_size: int, device: str = "cpu"
) -> np.ndarray:
    """What the saved model predicts for every test sample, in order: class probabilities
    (n, classes) or outputs (n, k). The task's ``predict(model, inputs)`` is used when it has
    one, else the model's forward."""
    builder = task.model_builder()
    if builder is None:
        raise TaskNotFound(
            f"task {task.name!r} cannot rebuild its saved models: give build_model(params)"
        )
    model = builder(saved["params"])
    model.load_state_dict(saved["state_dict"])
    model.to(device).eval()
    forward = task.hook("predict") or (lambda m, x: m(x))
    chunks = []
    with torch.no_grad():
        for batch in _loader(task, test, batch_size):
            inputs = to_device(batch[0], torch.device(device))
            chunks.append(torch.as_tensor(forward(model, inputs)).detach().float().cpu())
    out = torch.cat(chunks)
    if task.kind == "classification":
        return torch.softmax(out, dim=1).numpy()
    return out.reshape(len(out), -1).numpy()


def score(task: Task, outputs: np.ndarray, targets: np.ndarray) -> dict[str, float]:
    """The kind's metrics of ``outputs`` (probabilities, or regression outputs) against
    ``targets``, with the task's own ``test_metrics`` added."""
    if task.kind == "classification":
        labels = targets.astype(np.int64).reshape(-1)
        chosen = outputs[np.arange(len(labels)), labels]
        predicted = outputs.argmax(axis=1)
        metrics = {
            "loss": float(-np.mean(np.log(np.clip(chosen, 1e-12, None)))),
            "accuracy": float(np.mean(predicted == labels)),
            "f1": float(f1_score(labels, predicted, average="macro")),
        }
    else:
        y = targets.astype(np.float64).reshape(len(outputs), -1)
        errors = outputs.astype(np.float64) - y
        metrics = {
            "mse": float(np.mean(errors**2)),
            "mae": float(np.mean(np.abs(errors))),
            "r2": float(r2_score(y, outputs)),
        }
    own = task.hook("test_metrics")
    if own is not None:
        metrics.update({str(k): float(v) for k, v in own(outputs, targets).items()})
    return metrics


def _load(data: bytes) -> dict[str, Any]:
    saved = torch.load(io.BytesIO(data), map_location="cpu", weights_only=False)
    if not isinstance(saved, dict) or "state_dict" not in saved:
        raise ValueError("not a foldwise model file (no state_dict)")
    return saved


def _loader(task: Task, test: TaskData, batch_size: int) -> DataLoader:
    batches = array_batches(test.dataset)
    if batches is not None:  # arrays: a batch is one slice
        order = BatchSampler(SequentialSampler(range(len(batches))), batch_size, False)
        return DataLoader(batches, sampler=order, batch_size=None)
    collate = task.hook("collate_fn")
    options: dict[str, Any] = {} if collate is None else {"collate_fn": collate}
    return DataLoader(test.dataset, batch_size=batch_size, shuffle=False, **options)
