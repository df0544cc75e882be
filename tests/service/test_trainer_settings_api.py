"""Submit-time checks of how a task trains: the objective among what its loop reports, and no
trainer setting its loop would ignore (a 422 naming the field, nothing stored)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.service.conftest import signed_in_client
from tests.service.study_specs import study_spec

OWN = "tests.user_tasks.own_loop"


def _spec(task: str, metric: str, **trainer: Any) -> dict[str, Any]:
    return study_spec(
        objective={"metric": metric, "direction": "maximize"},
        trainer={"task": task, "epochs": 1, "batch_size": 32, **trainer},
    )


@pytest.fixture
def api(database_url: str):
    with signed_in_client(database_url, task_modules=["tests.user_tasks", "examples"]) as client:
        yield client


def test_an_own_loops_declared_metric_may_be_the_objective(api) -> None:
    response = api.post("/studies", json=_spec(OWN, "train_noise"))
    assert response.status_code == 201, response.text
    assert response.json()["spec"]["objective"]["metric"] == "train_noise"


def test_a_metric_an_own_loop_does_not_declare_is_refused_with_what_it_does(api) -> None:
    response = api.post("/studies", json=_spec(OWN, "val_f1"))
    assert response.status_code == 422
    [error] = response.json()["detail"]
    assert error["loc"] == ["body", "objective", "metric"]
    assert error["msg"].endswith("reports val_loss, val_accuracy, train_noise, train_loss")
    assert api.get("/studies").json()["count"] == 0


def test_what_foldwise_measures_of_an_epoch_is_no_objective(api) -> None:
    response = api.post("/studies", json=_spec(OWN, "epoch_seconds"))
    assert response.status_code == 422
    assert "epoch_seconds is what foldwise measures" in response.json()["detail"][0]["msg"]
    assert api.get("/studies").json()["count"] == 0


@pytest.mark.parametrize(
    ("setting", "value"),
    [("clip_grad_norm", 1.0), ("precision", "bf16"), ("num_workers", 2), ("val_batch_size", 64)],
)
def test_a_built_in_loop_setting_given_to_an_own_loop_is_refused(api, setting, value) -> None:
    response = api.post("/studies", json=_spec(OWN, "val_accuracy", **{setting: value}))
    assert response.status_code == 422
    [error] = response.json()["detail"]
    assert error["loc"] == ["body", "trainer", setting]
    assert "its own train_fold" in error["msg"] and "trainer.options" in error["msg"]
    assert api.get("/studies").json()["count"] == 0


def test_the_same_settings_reach_the_built_in_loop_and_lightning(api) -> None:
    settings = {"clip_grad_norm": 1.0, "precision": "bf16", "num_workers": 1}
    builtin = api.post("/studies", json=_spec("digits_mlp", "val_accuracy", **settings))
    assert builtin.status_code == 201, builtin.text
    lightning = _spec("examples.tasks.lightning_digits", "val_acc", **settings)
    assert api.post("/studies", json=lightning).status_code == 201


@pytest.mark.parametrize(("setting", "value"), [("num_workers", 2), ("val_batch_size", 64)])
def test_a_loader_setting_given_to_a_task_that_builds_its_loaders_is_refused(
    api, setting, value
) -> None:
    task = "tests.user_tasks.lightning_datamodule"
    response = api.post("/studies", json=_spec(task, "val_acc", **{setting: value}))
    assert response.status_code == 422
    [error] = response.json()["detail"]
    assert error["loc"] == ["body", "trainer", setting]
    assert "the DataLoaders of its build_datamodule" in error["msg"]
    assert "read ctx.trainer there instead" in error["msg"]
    settings = {"clip_grad_norm": 1.0, "precision": "bf16"}  # the Trainer's: they reach it
    assert api.post("/studies", json=_spec(task, "val_acc", **settings)).status_code == 201


@pytest.mark.parametrize(
    ("task", "metric", "given", "stored"),
    [
        (OWN, "val_accuracy", {}, ("none", 0)),  # an own loop trains at the rates it wrote
        ("digits_mlp", "val_accuracy", {}, ("linear", 1)),  # foldwise's loops scale
        ("examples.tasks.lightning_digits", "val_acc", {}, ("linear", 1)),
        (OWN, "val_accuracy", {"lr_scaling": "sqrt", "warmup_epochs": 2}, ("sqrt", 2)),
        ("digits_mlp", "val_accuracy", {"lr_scaling": "none"}, ("none", 1)),
    ],
)
def test_the_stored_spec_says_the_lr_scaling_and_warm_up_its_loop_applies(
    api, task: str, metric: str, given: dict[str, Any], stored: tuple[str, int]
) -> None:
    response = api.post("/studies", json=_spec(task, metric, **given))
    assert response.status_code == 201, response.text
    trainer = response.json()["spec"]["trainer"]
    assert (trainer["lr_scaling"], trainer["warmup_epochs"]) == stored
