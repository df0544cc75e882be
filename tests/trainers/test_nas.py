"""NAS builders: the architecture comes from the params; impossible ones fail while building."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from foldwise.trainers.task import resolve_task
from tests.trainers.fold_jobs import epochs_of, make_job, run_local


def _linear_widths(model: nn.Module) -> list[int]:
    return [m.out_features for m in model.modules() if isinstance(m, nn.Linear)]


def test_nas_mlp_depth_and_per_layer_choices() -> None:
    task = resolve_task("nas_mlp")
    model = task.obj.build_model(
        {"depth": 3, "width_1": 32, "width_2": 8, "width_3": 16, "act_2": "tanh",
         "dropout_3": 0.5, "width_4": 999}  # width_4 is inactive at depth 3
    )  # fmt: skip
    assert _linear_widths(model) == [32, 8, 16, 10]
    assert [type(m) for m in model if not isinstance(m, nn.Linear)] == [
        nn.ReLU, nn.Tanh, nn.ReLU, nn.Dropout
    ]  # fmt: skip
    X, y = task.obj.load_data({})
    assert model(torch.as_tensor(X[:5])).shape == (5, 10) and X.shape[1] == 64


@pytest.mark.parametrize(
    ("params", "message"),
    [({"depth": 0}, "depth"), ({"depth": 2, "act_2": "swish"}, "activation"),
     ({"width": 0}, "width")],
)  # fmt: skip
def test_nas_mlp_rejects_impossible_architectures(params: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        resolve_task("nas_mlp").obj.build_model(params)


@pytest.mark.parametrize(
    "params",
    [{}, {"blocks": 3, "kernel": 4, "pool": "avg"}, {"blocks": 4, "pool": "none", "dense": 0},
     {"blocks": 2, "channels_1": 4, "channels_2": 12, "kernel_2": 5, "pool_2": "none"}],
)  # fmt: skip
def test_nas_cnn_builds_for_8x8_images(params: dict) -> None:
    task = resolve_task("nas_cnn")
    X, _ = task.obj.load_data({})
    assert X.shape[1:] == (1, 8, 8)
    assert task.obj.build_model(params)(torch.as_tensor(X[:3])).shape == (3, 10)


def test_nas_cnn_channels_come_from_params() -> None:
    model = resolve_task("nas_cnn").obj.build_model(
        {"blocks": 2, "channels_1": 4, "channels_2": 6}
    )
    convs = [m for m in model.modules() if isinstance(m, nn.Conv2d)]
    assert [c.out_channels for c in convs] == [4, 6]


def test_an_impossible_cnn_fails_its_fold_with_a_clear_error() -> None:
    job = make_job("nas_cnn", params={"blocks": 4, "pool": "max"}, folds=2, epochs=1)
    with pytest.raises(ValueError, match="shrinks the 8x8 image to nothing"):
        run_local(job)


def test_a_nas_cnn_fold_learns() -> None:
    params = {"blocks": 2, "channels": 8, "lr": 0.01, "dense": 32}
    job = make_job("nas_cnn", params=params, folds=3, epochs=3, batch_size=64)
    epochs = epochs_of(run_local(job))
    assert epochs[-1].metrics["val_accuracy"] > 0.7  # chance is 0.1; seeds 0-5 give 0.76-0.86
