"""The trials of a study over HTTP: paging, sorting, filtering and the per-fold detail."""

from __future__ import annotations

from datetime import timedelta

from fastapi.testclient import TestClient

from foldwise.schemas import FoldStatus, TrialStatus
from foldwise.service.db import fold_runs as fold_repo
from foldwise.service.db import trials as trial_repo
from foldwise.trainers.report import EpochReport
from tests.service.study_specs import study_spec

VALUES = [0.5, None, 0.2, 0.9]  # trial 1 failed


def _fill(api: TestClient, direction: str = "minimize") -> int:
    spec = study_spec(objective={"metric": "val_loss", "direction": direction})
    study_id = api.post("/studies", json=spec).json()["id"]
    with api.app.state.sessions.begin() as session:
        for number, value in enumerate(VALUES):
            trial = trial_repo.create_trial(session, study_id, {"lr": 0.01}, number=number)
            status = TrialStatus.FAILED if value is None else TrialStatus.COMPLETED
            run = fold_repo.start_fold_run(session, trial.id, 0)
            for epoch in (1, 2):
                fold_repo.record_epoch(
                    session, run.id, EpochReport(epoch, {"val_loss": 1.0 / epoch})
                )
            fold_repo.record_epoch(
                session, run.id, EpochReport(2, {"val_loss": 99.0})
            )  # idempotent
            fold_status = FoldStatus.FAILED if value is None else FoldStatus.COMPLETED
            fold_repo.finish_fold_run(
                session,
                run.id,
                fold_status,
                value=value,
                error=None if value else "boom",
                traceback=None if value else "Traceback...",
            )
            error = "fold 0: boom" if value is None else None
            trial_repo.finish_trial(
                session,
                trial,
                status,
                value=value,
                std_error=0.01 if value else None,
                error=error,
            )
    return study_id


def test_list_sort_filter_and_page(api: TestClient) -> None:
    study_id = _fill(api)
    url = f"/studies/{study_id}/trials"
    page = api.get(url).json()
    assert page["count"] == 4
    assert [t["number"] for t in page["data"]] == [0, 1, 2, 3]
    best = api.get(url, params={"sort": "best"}).json()["data"]
    assert [t["number"] for t in best] == [2, 0, 3, 1]  # the failed trial last
    newest = api.get(url, params={"sort": "-number", "limit": 2, "offset": 1}).json()
    assert [t["number"] for t in newest["data"]] == [2, 1] and newest["count"] == 4
    failed = api.get(url, params={"status": "failed"}).json()
    assert failed["count"] == 1 and failed["data"][0]["error"] == "fold 0: boom"
    assert api.get(url, params={"sort": "sideways"}).status_code == 422


def test_sort_by_parameters_and_duration(api: TestClient) -> None:
    study_id = api.post("/studies", json=study_spec()).json()["id"]
    rows = [  # lr, depth, width_2 (only when depth >= 2), act, seconds from start to finish
        ({"lr": 0.1, "depth": 1, "act": "tanh"}, 30),
        ({"lr": 0.002, "depth": 3, "width_2": 128, "act": "relu"}, 5),
        ({"lr": 0.03, "depth": 2, "width_2": 16, "act": "gelu"}, 3600),
    ]
    with api.app.state.sessions.begin() as session:
        for number, (params, seconds) in enumerate(rows):
            trial = trial_repo.create_trial(session, study_id, params, number=number)
            trial_repo.finish_trial(session, trial, TrialStatus.COMPLETED, value=0.1 * number)
            trial.finished_at = trial.started_at + timedelta(seconds=seconds)
    url = f"/studies/{study_id}/trials"

    def order(sort: str) -> list[int]:
        response = api.get(url, params={"sort": sort})
        assert response.status_code == 200, response.text
        return [t["number"] for t in response.json()["data"]]

    assert order("params.lr") == [1, 2, 0] and order("-params.lr") == [0, 2, 1]
    assert order("params.depth") == [0, 2, 1]
    assert order("params.act") == [2, 1, 0]  # categorical: as text
    assert order("params.width_2") == [2, 1, 0] and order("-params.width_2") == [1, 2, 0]
    assert order("duration") == [1, 0, 2] and order("-duration") == [2, 0, 1]
    bad = api.get(url, params={"sort": "params.momentum"})
    assert bad.status_code == 422
    detail = bad.json()["detail"][0]
    assert detail["loc"] == ["query", "sort"] and "params.lr" in detail["msg"]


def test_best_trial_follows_the_direction(api: TestClient) -> None:
    assert api.get(f"/studies/{_fill(api)}").json()["best_trial"]["number"] == 2
    study = api.get(f"/studies/{_fill(api, 'maximize')}").json()
    assert study["best_trial"]["number"] == 3
    listed = {s["id"]: s["best_trial"]["number"] for s in api.get("/studies").json()["data"]}
    assert listed == {1: 2, 2: 3}  # one query for both, each in its own direction
    assert study["progress"] == {
        "budget": 4,
        "finished": 4,
        "running": 0,
        "pending": 0,
        "completed": 3,
        "failed": 1,
        "pruned": 0,
    }


def test_trial_detail_has_folds_and_epochs(api: TestClient) -> None:
    study_id = _fill(api)
    trial = api.get(f"/studies/{study_id}/trials/1").json()
    assert trial["status"] == "failed"
    (fold,) = trial["folds"]
    assert fold["status"] == "failed" and fold["attempt"] == 0
    assert fold["error"] == "boom" and fold["traceback"] == "Traceback..."
    assert [e["metrics"]["val_loss"] for e in fold["epochs"]] == [1.0, 0.5]


def test_text_stored_with_terminal_colours_is_served_without_them(api: TestClient) -> None:
    """A fold run recorded before the executor stripped Ray's colour codes reads clean."""
    study_id = _fill(api)
    header = "\x1b[36mray::DDPWorker.run()\x1b[39m (pid=9247)"
    with api.app.state.sessions.begin() as session:
        trial = trial_repo.get_trial(session, study_id, 1)
        trial.error = "fold 0: \x1b[31mboom\x1b[0m"
        trial.fold_runs[0].traceback = f"{header}\nValueError: boom"
    body = api.get(f"/studies/{study_id}/trials/1")
    assert "\\u001b" not in body.text and "\x1b" not in body.text
    detail = body.json()
    assert detail["error"] == "fold 0: boom"
    assert detail["folds"][0]["traceback"] == "ray::DDPWorker.run() (pid=9247)\nValueError: boom"
    [failed] = api.get(f"/studies/{study_id}/trials", params={"status": "failed"}).json()["data"]
    assert failed["error"] == "fold 0: boom"


def test_a_pruned_trial_shows_its_reason_and_folds_and_ranks_after_completed_ones(
    api: TestClient,
) -> None:
    study_id = _fill(api)
    reason = "after 2 of 3 folds: 0.1 vs incumbent (trial 2) 0.05 on the same folds, ..."
    with api.app.state.sessions.begin() as session:
        trial = trial_repo.create_trial(session, study_id, {"lr": 0.02}, number=4)
        trial_repo.finish_trial(
            session,
            trial,
            TrialStatus.PRUNED,
            value=0.1,  # a partial mean below every completed value
            std_error=0.03,
            value_folds=2,
            pruned_reason=reason,
        )
    url = f"/studies/{study_id}/trials"
    best = api.get(url, params={"sort": "best"}).json()["data"]
    assert [t["number"] for t in best] == [2, 0, 3, 4, 1]
    assert api.get(f"/studies/{study_id}").json()["best_trial"]["number"] == 2
    [pruned] = api.get(url, params={"status": "pruned"}).json()["data"]
    assert (pruned["value_folds"], pruned["pruned_reason"], pruned["error"]) == (2, reason, None)
    detail = api.get(f"{url}/4").json()
    assert detail["status"] == "pruned" and detail["value"] == 0.1
    progress = api.get(f"/studies/{study_id}").json()["progress"]
    assert (progress["pruned"], progress["finished"]) == (1, 5)
