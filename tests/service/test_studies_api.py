"""The /studies resource over HTTP on SQLite and PostgreSQL (the scheduler is off here)."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from foldwise.errors import InvalidSpec
from foldwise.trainers.task import BUILTIN_TASKS
from tests.service.conftest import signed_in_client
from tests.service.study_specs import study_spec


def _locs(response: Any) -> list[list[Any]]:
    return [item["loc"] for item in response.json()["detail"]]


def test_create_study_returns_the_resolved_spec(api: TestClient) -> None:
    response = api.post("/studies", json=study_spec())
    assert response.status_code == 201, response.text
    study = response.json()
    assert study["status"] == "queued"
    assert study["spec"]["optimizer"]["seed"] == 3
    assert study["spec"]["resources"] == {"cpus_per_worker": 1.0, "gpus_per_worker": 0.0}
    assert study["spec"]["trainer"]["lr_scaling"] == "linear"
    assert study["spec"]["objective"]["use"] == "best"
    assert study["progress"]["budget"] == 4
    assert study["progress"]["finished"] == 0
    assert study["best_trial"] is None
    assert api.get(f"/studies/{study['id']}").json()["spec"] == study["spec"]


def test_seed_defaults_the_optimizer_seed(api: TestClient) -> None:
    spec = study_spec(seed=11, optimizer={"name": "random"})
    assert api.post("/studies", json=spec).json()["spec"]["optimizer"]["seed"] == 11


@pytest.mark.parametrize(
    ("overrides", "loc"),
    [
        ({"parallel": {"folds": 1}}, ["body", "parallel", "folds"]),
        ({"budget": {"trials": 0}}, ["body", "budget", "trials"]),
        ({"colour": "blue"}, ["body", "colour"]),
        ({"space": {}}, ["body", "space"]),
        ({"optimizer": {"name": "hyperband"}}, ["body", "optimizer", "name"]),
        ({"trainer": {"task": "no_such_task"}}, ["body", "trainer", "task"]),
        ({"trainer": {"task": "tests.no_such_module:task"}}, ["body", "trainer", "task"]),
        (
            {"optimizer": {"name": "random", "options": {"bogus": 1}}},
            ["body", "optimizer", "options", "bogus"],
        ),
        (  # accepted, it would hang the scheduler at its first model-based suggestion
            {"optimizer": {"name": "gp", "options": {"candidates": 10**18}}},
            ["body", "optimizer", "options", "candidates"],
        ),
        (
            {"optimizer": {"name": "gp", "options": {"xi": 0.1, "liar": "truth"}}},
            ["body", "optimizer", "options", "liar"],
        ),
        (
            {"optimizer": {"name": "gp", "options": {"n_initial": 5, "zeta": 1}}},
            ["body", "optimizer", "options", "zeta"],
        ),
        (  # an empty choice is refused, not read as the default
            {"optimizer": {"name": "gp", "options": {"prior_mean": ""}}},
            ["body", "optimizer", "options", "prior_mean"],
        ),
        (
            {"optimizer": {"name": "gp", "options": {"prior_mean": "median"}}},
            ["body", "optimizer", "options", "prior_mean"],
        ),
        (
            {"optimizer": {"name": "gp", "options": {"multi_objective": ""}}},
            ["body", "optimizer", "options", "multi_objective"],
        ),
        (
            {"optimizer": {"name": "evolution", "options": {"seed": 1}}},
            ["body", "optimizer", "options", "seed"],
        ),
    ],
)
def test_bad_spec_is_a_422_naming_the_field(
    api: TestClient, overrides: dict[str, Any], loc: list[str]
) -> None:
    response = api.post("/studies", json=study_spec(**overrides))
    assert response.status_code == 422, response.text
    assert any(found[: len(loc)] == loc for found in _locs(response)), _locs(response)
    assert api.get("/studies").json()["count"] == 0


@pytest.mark.parametrize(
    "task",
    [
        "no_such_task",  # neither built in nor under an allowed package
        "digits-mlp",  # not a task name at all
        "tests.user_tasks.no_such_module:Task",  # under an allowed package, but not there
    ],
)
def test_an_unknown_task_lists_the_built_in_tasks_and_the_allowed_packages(
    database_url: str, monkeypatch: pytest.MonkeyPatch, task: str
) -> None:
    # A task registered in the trainers' registry is listed too: the list is read from there.
    monkeypatch.setitem(BUILTIN_TASKS, "extra_builtin", "tests.user_tasks.tiny:Task")
    modules = ["tests.user_tasks", "labtasks"]
    with signed_in_client(database_url, task_modules=modules) as api:
        response = api.post("/studies", json=study_spec(trainer={"task": task}))
        assert response.status_code == 422, response.text
        [error] = response.json()["detail"]
        assert error["loc"] == ["body", "trainer", "task"]
        message = error["msg"]
        assert repr(task) in message
        assert f"the built-in tasks are {', '.join(BUILTIN_TASKS)}," in message
        assert "extra_builtin" in message and "digits_mlp" in message
        assert (
            "custom tasks are 'package.module:attr' under tests.user_tasks, labtasks "
            "(FOLDWISE_TASK_MODULES)"
        ) in message
        assert "should match pattern" not in message
        # What the SDK and the CLI print names the field.
        [problem] = InvalidSpec.from_detail(response.json()["detail"]).problems
        assert problem == f"trainer.task: {message}"
        assert api.get("/studies").json()["count"] == 0


def test_an_unknown_task_says_when_no_custom_tasks_are_allowed(api: TestClient) -> None:
    response = api.post("/studies", json=study_spec(trainer={"task": "mypkg.tasks:Net"}))
    assert response.status_code == 422, response.text
    [error] = response.json()["detail"]
    assert error["loc"] == ["body", "trainer", "task"]
    assert error["msg"] == (
        f"task 'mypkg.tasks:Net' is not one this service runs: the built-in tasks are "
        f"{', '.join(BUILTIN_TASKS)}, and custom tasks are not enabled "
        "(FOLDWISE_TASK_MODULES is empty)"
    )


@pytest.mark.parametrize(
    ("param", "fragment"),
    [
        ({"type": "float", "low": 1.0, "high": 1.0}, "below high"),
        ({"type": "float", "low": 0.0, "high": 1.0, "log": True}, "low > 0"),
        ({"type": "categorical", "choices": []}, "must not be empty"),
        ({"type": "int", "low": 1, "high": 4, "when": {"ghost": {"eq": 1}}}, "ghost"),
    ],
)
def test_bad_parameter_is_a_422_under_space(
    api: TestClient, param: dict[str, Any], fragment: str
) -> None:
    response = api.post("/studies", json=study_spec(space={"x": param}))
    assert response.status_code == 422
    detail = response.json()["detail"]
    assert all(item["loc"][:2] == ["body", "space"] for item in detail)
    assert any(fragment in item["msg"] for item in detail), detail


def test_list_studies_is_an_envelope_newest_first(api: TestClient) -> None:
    ids = [api.post("/studies", json=study_spec(name=f"s{i}")).json()["id"] for i in range(3)]
    page = api.get("/studies", params={"limit": 2}).json()
    assert page["count"] == 3
    assert [s["id"] for s in page["data"]] == ids[::-1][:2]
    assert api.get("/studies", params={"status": "running"}).json() == {"data": [], "count": 0}


def test_unknown_ids_are_404_with_a_detail(api: TestClient) -> None:
    for path in ("/studies/999", "/studies/999/trials", "/studies/999/trials/0"):
        response = api.get(path)
        assert response.status_code == 404
        assert "999" in response.json()["detail"]
    assert api.post("/studies/999/stop").status_code == 404
    assert api.delete("/studies/999").status_code == 404


def test_stop_and_delete_are_requests_the_scheduler_carries_out(api: TestClient) -> None:
    study_id = api.post("/studies", json=study_spec()).json()["id"]
    stop = api.post(f"/studies/{study_id}/stop")
    assert stop.status_code == 202  # recorded: the scheduler (off here) is the one writer
    assert stop.json()["stop_requested"] and stop.json()["status"] == "queued"
    assert api.get(f"/studies/{study_id}").json()["stop_requested"]
    deleted = api.delete(f"/studies/{study_id}")
    assert deleted.status_code == 202 and not deleted.content
    assert api.get(f"/studies/{study_id}").status_code == 404  # gone to every reader at once
    assert api.get("/studies").json()["count"] == 0
    assert api.post(f"/studies/{study_id}/stop").status_code == 404


def test_health_docs_and_root(api: TestClient) -> None:
    health = api.get("/health").json()
    assert health["database"]["ok"] is True
    assert health["status"] == "ok"
    assert api.get("/docs").status_code == 200
    assert "/studies" in api.get("/openapi.json").json()["paths"]
    root = api.get("/", follow_redirects=False)
    assert root.status_code in (302, 307) and root.headers["location"] == "/dashboard"


def test_dashboard_page_and_its_assets_are_served_locally(api: TestClient) -> None:
    signed_out = api.get("/dashboard", headers={"Authorization": ""}, follow_redirects=False)
    assert signed_out.status_code == 303
    assert signed_out.headers["location"] == "/dashboard/sign-in?next=/dashboard"
    assert api.get("/dashboard/sign-in", headers={"Authorization": ""}).status_code == 200
    api.cookies.set("foldwise_token", api.headers["Authorization"].removeprefix("Bearer "))
    page = api.get("/dashboard", headers={"Authorization": ""})
    assert page.status_code == 200 and "<table" in page.text
    assert "http" not in page.text.split("<body>", 1)[1].replace("/docs", "")  # no CDN
    for asset in ("studies.js", "dashboard.css"):
        assert api.get(f"/dashboard/static/{asset}").status_code == 200
