"""Submit-time checks of a study's cv and holdout against its task (a 422 naming the field,
nothing stored), and the hold-out and refit routes' answers to what cannot be done."""

from __future__ import annotations

from typing import Any

import pytest

from foldwise.schemas import StudyStatus
from foldwise.service.db.models import StudyRow
from tests.service.conftest import signed_in_client
from tests.service.study_specs import study_spec

OWN = "tests.user_tasks.own_loop"


def _spec(task: str = "digits_mlp", **overrides: Any) -> dict[str, Any]:
    return study_spec(trainer={"task": task, "epochs": 1, "batch_size": 32}, **overrides)


@pytest.fixture
def api(database_url: str):
    with signed_in_client(database_url, task_modules=["tests.user_tasks", "examples"]) as client:
        yield client


def test_the_stored_spec_says_the_scheme_the_task_gets(api) -> None:
    spec = _spec(holdout={"score": "both"})
    spec["trainer"]["options"] = {"test_fraction": 0.25}
    response = api.post("/studies", json=spec)
    assert response.status_code == 201, response.text
    study = response.json()
    assert study["spec"]["cv"] == {"scheme": "stratified", "repeats": 1, "gap": 0}
    assert study["spec"]["holdout"] == {"score": "both", "epochs": None}
    assert study["holdout"] is None
    regression = _spec("examples.tasks.wine_quality:regression", objective={"metric": "val_mse"})
    stored = api.post("/studies", json=regression).json()["spec"]["cv"]
    assert stored["scheme"] == "kfold"


@pytest.mark.parametrize(
    ("task", "overrides", "loc", "fragment"),
    [
        (
            "examples.tasks.wine_quality:regression",
            {"cv": {"scheme": "stratified"}, "objective": {"metric": "val_mse"}},
            ["body", "cv", "scheme"],
            "is a regression task: use kfold or group",
        ),
        (
            "tests.user_tasks.tiny",
            {"holdout": {"score": "ensemble"}},
            ["body", "holdout"],
            "gives no test data with these trainer.options: add load_test_data(options)",
        ),
        (  # the built-in digits keep test data aside only with trainer.options.test_fraction
            "digits_mlp",
            {"holdout": {"score": "ensemble"}},
            ["body", "holdout"],
            "task 'digits_mlp' gives no test data with these trainer.options",
        ),
        (
            f"{OWN}:WithoutItsModel",
            {"holdout": {"score": "refit"}, "objective": {"metric": "val_accuracy"}},
            ["body", "holdout", "score"],
            "add build_model(params), the model your loop trains",
        ),
    ],
)
def test_a_split_or_score_the_task_cannot_give_is_refused(
    api, task, overrides, loc, fragment
) -> None:
    response = api.post("/studies", json=_spec(task, **overrides))
    assert response.status_code == 422, response.text
    [error] = response.json()["detail"]
    assert error["loc"] == loc and fragment in error["msg"]
    assert api.get("/studies").json()["count"] == 0


def test_an_own_loop_that_rebuilds_its_models_may_be_scored(api) -> None:
    spec = _spec(OWN, holdout={"score": "both"}, objective={"metric": "val_accuracy"})
    assert api.post("/studies", json=spec).status_code == 201


def test_scores_and_refits_of_a_study_that_has_not_ended_are_refused(api) -> None:
    study = api.post("/studies", json=_spec()).json()
    for path, body in (("holdout", {}), ("refits", {"epochs": 3})):
        response = api.post(f"/studies/{study['id']}/{path}", json=body)
        assert response.status_code == 409, response.text
        assert response.json()["detail"] == (
            f"study {study['id']} is queued: ask once it has ended (a spec's holdout is "
            "scored as the study completes)"
        )
    assert api.get(f"/studies/{study['id']}/refits").json() == {"data": [], "count": 0}
    for path in ("refits/1", "refits/1/model"):
        response = api.get(f"/studies/{study['id']}/{path}")
        assert response.status_code == 404
        assert response.json()["detail"] == f"study {study['id']} has no refit 1"
    assert api.post("/studies/999/holdout", json={}).status_code == 404


@pytest.mark.parametrize(
    ("path", "body", "loc"),
    [
        ("holdout", {"score": "all"}, ["body", "score"]),
        ("holdout", {"trial": -1}, ["body", "trial"]),
        ("holdout", {"epochs": 0}, ["body", "epochs"]),
        ("holdout", {"epochs": 1.5}, ["body", "epochs"]),
        ("refits", {"trial": "1"}, ["body", "trial"]),
        ("refits", {"epochs": 10**6}, ["body", "epochs"]),
        ("refits", {"extra": 1}, ["body", "extra"]),
    ],
)
def test_bad_request_bodies_are_refused_at_their_field(api, path, body, loc) -> None:
    study = api.post("/studies", json=_spec()).json()
    response = api.post(f"/studies/{study['id']}/{path}", json=body)
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["loc"] == loc


def test_a_post_with_no_body_takes_the_defaults_and_another_media_type_is_a_415(api) -> None:
    study = api.post("/studies", json=_spec()).json()
    bare = api.post(f"/studies/{study['id']}/holdout")  # no body, no Content-Type
    assert bare.status_code == 409 and "is queued" in bare.json()["detail"]
    text = api.post(
        f"/studies/{study['id']}/refits", content=b"{}", headers={"Content-Type": "text/plain"}
    )
    assert text.status_code == 415


def test_an_ended_study_with_no_completed_trial_has_nothing_to_score(api) -> None:
    spec = _spec()
    spec["trainer"]["options"] = {"test_fraction": 0.25}
    study = api.post("/studies", json=spec).json()
    with api.app.state.sessions.begin() as session:
        session.get(StudyRow, study["id"]).status = StudyStatus.STOPPED
    for path in ("holdout", "refits"):
        response = api.post(f"/studies/{study['id']}/{path}")
        assert response.status_code == 409, response.text
        assert response.json()["detail"] == (
            f"study {study['id']} has no completed trial to score"
        )
    assert api.get(f"/studies/{study['id']}").json()["holdout"] is None  # nothing stored
