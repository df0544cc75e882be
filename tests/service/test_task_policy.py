"""No code from request bodies: a task is refused by name or loaded outside the API's process."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from foldwise.schemas import Role
from foldwise.service.admission.task_profiles import DESCRIBED
from tests.service.conftest import signed_in_client
from tests.service.study_specs import study_spec

SIDE_EFFECT = "tests.untrusted.side_effect"


def _task_spec(task: str) -> dict:
    return study_spec(trainer={"task": task, "epochs": 1, "batch_size": 32})


@pytest.fixture
def marker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The file a side-effecting task module writes when something imports it (with no profile
    kept from an earlier test: the module is imported again)."""
    path = tmp_path / "imported-by"
    monkeypatch.setenv("SIDE_EFFECT_MARKER", str(path))
    sys.modules.pop(SIDE_EFFECT, None)
    DESCRIBED.clear()
    return path


@pytest.mark.parametrize(
    "task",
    [
        "os:system",
        "subprocess:Popen",
        "antigravity:x",
        "unittest.__main__",
        f"{SIDE_EFFECT}:task",
        "tests.user_taskstiny:task",  # a prefix must match whole package names
    ],
)
def test_tasks_outside_the_allowed_packages_are_refused_unimported(
    database_url: str, marker: Path, task: str
) -> None:
    before = set(sys.modules)
    with signed_in_client(database_url, task_modules=["tests.user_tasks"]) as api:
        response = api.post("/studies", json=_task_spec(task))
        count = api.get("/studies").json()["count"]
    assert response.status_code == 422, response.text
    [error] = response.json()["detail"]
    assert error["loc"] == ["body", "trainer", "task"]
    assert "digits_mlp, nas_mlp, nas_cnn" in error["msg"] and "tests.user_tasks" in error["msg"]
    module = task.partition(":")[0]
    assert module not in set(sys.modules) - before
    assert not marker.exists() and count == 0


def test_an_allowed_task_is_loaded_in_another_process_never_this_one(
    database_url: str, marker: Path
) -> None:
    with signed_in_client(database_url, task_modules=["tests.untrusted"]) as api:
        response = api.post("/studies", json=_task_spec(SIDE_EFFECT))
    assert response.status_code == 201, response.text
    assert SIDE_EFFECT not in sys.modules
    assert marker.exists() and int(marker.read_text()) != os.getpid()


def test_a_task_is_loaded_once_per_snapshot_and_options(database_url: str, marker: Path) -> None:
    spec = _task_spec(SIDE_EFFECT)
    with signed_in_client(database_url, task_modules=["tests.untrusted"]) as api:
        assert api.post("/studies", json=spec).status_code == 201
        assert marker.exists()
        marker.unlink()
        assert api.post("/studies", json=spec).status_code == 201
        assert not marker.exists()  # the same code and options: the profile was kept
        spec["trainer"]["options"] = {"rows": 100}
        assert api.post("/studies", json=spec).status_code == 201
        assert marker.exists()  # other options: the task may answer otherwise


def test_a_task_that_cannot_be_loaded_is_a_422_with_the_reason(database_url: str) -> None:
    with signed_in_client(database_url, task_modules=["tests.user_tasks"]) as api:
        response = api.post("/studies", json=_task_spec("tests.user_tasks.missing:task"))
    assert response.status_code == 422
    [error] = response.json()["detail"]
    assert error["loc"] == ["body", "trainer", "task"] and "cannot import" in error["msg"]


def test_the_metric_check_knows_a_user_tasks_kind(database_url: str) -> None:
    spec = _task_spec("tests.user_tasks.tiny:task")
    spec["objective"] = {"metric": "val_mse", "direction": "minimize"}
    with signed_in_client(database_url, Role.MEMBER, task_modules=["tests.user_tasks"]) as api:
        response = api.post("/studies", json=spec)
    assert response.status_code == 422
    assert "(classification) reports" in response.json()["detail"][0]["msg"]


def test_a_task_that_ends_the_process_loading_it_is_a_422(database_url: str) -> None:
    with signed_in_client(database_url, task_modules=["tests.untrusted"]) as api:
        response = api.post("/studies", json=_task_spec("tests.untrusted.exits:task"))
        count = api.get("/studies").json()["count"]
    assert response.status_code == 422, response.text
    [error] = response.json()["detail"]
    assert error["loc"] == ["body", "trainer", "task"] and "without an answer" in error["msg"]
    assert count == 0
