"""The dashboard's aggregate endpoints: history, top trials' folds and running learning curves."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from fastapi.testclient import TestClient

from foldwise.schemas import TrialStatus
from foldwise.service.db import fold_runs as fold_repo
from foldwise.service.db import studies as study_repo
from foldwise.service.db import trials as trial_repo
from foldwise.trainers.report import EpochReport
from tests.large_study import fill_study

TRIALS, FOLDS, EPOCHS, RUNNING = 60, 3, 4, 2


def _fill(api: TestClient) -> int:
    engine = api.app.state.engine
    return fill_study(engine, trials=TRIALS, folds=FOLDS, epochs=EPOCHS, running=RUNNING)


def _completed(api: TestClient, study_id: int) -> list[dict]:
    url = f"/studies/{study_id}/trials"
    return api.get(url, params={"status": "completed", "limit": 1000}).json()["data"]


def _prune(api: TestClient, study_id: int, number: int, value: float, folds: int = 1) -> str:
    """Store trial ``number`` pruned after ``folds`` folds, as the scheduler does; its reason."""
    reason = f"after {folds} of {FOLDS} folds: {value} vs incumbent (trial 3) (forgiving rule)"
    with api.app.state.sessions.begin() as session:
        trial = trial_repo.create_trial(
            session, study_id, {"lr": 0.01, "act": "relu"}, number=number
        )
        trial_repo.finish_trial(
            session,
            trial,
            TrialStatus.PRUNED,
            value=value,
            std_error=0.01,
            value_folds=folds,
            pruned_reason=reason,
        )
        study_repo.touch_study(session, study_id)
    return reason


def test_history_has_every_completed_trial_and_the_exact_best_steps(api: TestClient) -> None:
    study_id = _fill(api)
    completed = sorted(_completed(api, study_id), key=lambda t: t["number"])
    body = api.get(f"/studies/{study_id}/insights/history").json()
    assert body["count"] == len(completed) and not body["sampled"]
    assert body["number"] == [t["number"] for t in completed]
    assert body["value"] == [t["value"] for t in completed]
    assert body["std_error"] == [t["std_error"] for t in completed]
    assert body["params"]["act"] == [t["params"]["act"] for t in completed]
    assert body["params"]["width_2"] == [t["params"].get("width_2") for t in completed]
    steps, best = [], float("inf")
    for trial in completed:
        if trial["value"] < best:
            best = trial["value"]
            steps.append(trial["number"])
    assert body["best"]["number"] == steps and body["best"]["value"][-1] == best


def test_history_downsamples_but_keeps_the_best_and_the_envelope(api: TestClient) -> None:
    study_id = _fill(api)
    full = api.get(f"/studies/{study_id}/insights/history").json()
    body = api.get(f"/studies/{study_id}/insights/history", params={"max_points": 12}).json()
    assert body["sampled"] and len(body["number"]) <= 12 and body["count"] == full["count"]
    assert min(full["value"]) in body["value"] and max(full["value"]) in body["value"]
    assert body["number"] == sorted(body["number"])
    assert all(len(column) == len(body["number"]) for column in body["params"].values())
    assert body["best"] == full["best"]  # the best-so-far line is never sampled


def test_history_since_a_cursor_returns_only_what_finished_after(api: TestClient) -> None:
    study_id = _fill(api)
    cursor = api.get(f"/studies/{study_id}/insights/history").json()["cursor"]
    url = f"/studies/{study_id}/insights/history"
    repeated = api.get(url, params={"since": cursor}).json()["number"]
    assert len(repeated) <= 2  # only the overlap window before the cursor comes again
    with api.app.state.sessions.begin() as session:
        trial = trial_repo.create_trial(session, study_id, {"lr": 0.01, "act": "relu"}, number=999)
        trial_repo.finish_trial(session, trial, TrialStatus.COMPLETED, value=0.01, std_error=0.001)
        study_repo.touch_study(session, study_id)  # as every scheduler write does
    body = api.get(url, params={"since": cursor}).json()
    assert body["number"] == [*repeated, 999]
    assert body["best"]["number"][-1] == 999 and body["best"]["value"][-1] == 0.01
    assert body["count"] == len(_completed(api, study_id))
    assert datetime.fromisoformat(body["cursor"]).replace(tzinfo=UTC) > datetime.fromisoformat(
        cursor
    ).replace(tzinfo=UTC)


def test_history_shows_pruned_trials_apart_and_keeps_them_out_of_the_best_line(
    api: TestClient,
) -> None:
    study_id = _fill(api)
    url = f"/studies/{study_id}/insights/history"
    before = api.get(url).json()
    assert before["pruned"] == {
        "count": 0,
        "sampled": False,
        "number": [],
        "value": [],
        "std_error": [],
        "value_folds": [],
        "reason": [],
    }
    reasons = [
        _prune(api, study_id, 200 + i, value, folds=1 + i) for i, value in enumerate([0.9, -5.0])
    ]
    body = api.get(url).json()
    for key in ("count", "sampled", "number", "value", "std_error", "params", "best"):
        assert body[key] == before[key], key  # a better partial mean is still not a best
    pruned = api.get(f"/studies/{study_id}/trials", params={"status": "pruned"}).json()["data"]
    assert body["pruned"] == {
        "count": 2,
        "sampled": False,
        "number": [200, 201],
        "value": [0.9, -5.0],
        "std_error": [0.01, 0.01],
        "value_folds": [1, 2],
        "reason": reasons,
    }
    assert [t["pruned_reason"] for t in pruned] == reasons


def test_history_samples_pruned_trials_into_a_quarter_of_the_points(api: TestClient) -> None:
    study_id = _fill(api)
    values = [0.5 + 0.01 * i for i in range(30)]
    for i, value in enumerate(values):
        _prune(api, study_id, 300 + i, value)
    url = f"/studies/{study_id}/insights/history"
    body = api.get(url, params={"max_points": 12}).json()["pruned"]
    assert body["count"] == 30 and body["sampled"]
    assert 2 <= len(body["number"]) <= 3 and body["number"] == sorted(body["number"])
    assert min(values) in body["value"] and max(values) in body["value"]
    assert all(len(body[k]) == len(body["number"]) for k in ("value", "value_folds", "reason"))
    full = api.get(url, params={"max_points": 120}).json()["pruned"]
    assert not full["sampled"] and full["value"] == values


def test_history_since_a_cursor_returns_pruned_trials_that_finished_after(
    api: TestClient,
) -> None:
    study_id = _fill(api)
    url = f"/studies/{study_id}/insights/history"
    cursor = api.get(url).json()["cursor"]
    reason = _prune(api, study_id, 998, 0.7, folds=2)
    body = api.get(url, params={"since": cursor}).json()
    assert body["pruned"]["number"] == [998] and body["pruned"]["reason"] == [reason]
    assert body["pruned"]["value_folds"] == [2]
    later = datetime.fromisoformat(body["cursor"]).replace(tzinfo=UTC)
    assert later > datetime.fromisoformat(cursor).replace(tzinfo=UTC)  # moved by a pruned trial
    assert api.get(url, params={"since": body["cursor"]}).json()["pruned"]["number"] == [998]


def test_history_response_model_documents_the_pruned_trials(api: TestClient) -> None:
    schemas = api.get("/openapi.json").json()["components"]["schemas"]
    assert "pruned" in schemas["History"]["required"]
    pruned = schemas["PrunedHistory"]
    assert {"count", "number", "value", "value_folds", "reason"} <= set(pruned["required"])


def test_folds_of_the_top_trials_in_best_order(api: TestClient) -> None:
    study_id = _fill(api)
    body = api.get(f"/studies/{study_id}/insights/folds", params={"top": 3}).json()
    best = api.get(f"/studies/{study_id}/trials", params={"sort": "best", "limit": 3}).json()
    assert body["folds"] == FOLDS
    assert body["number"] == [t["number"] for t in best["data"]]
    for number, values, mean in zip(
        body["number"], body["fold_values"], body["value"], strict=True
    ):
        trial = api.get(f"/studies/{study_id}/trials/{number}").json()
        done = {f["fold"]: f["value"] for f in trial["folds"] if f["status"] == "completed"}
        assert values == [done[k] for k in range(FOLDS)]
        assert abs(sum(values) / FOLDS - mean) < 1e-9


def test_curves_of_running_trials_and_only_new_epochs_after_the_cursor(api: TestClient) -> None:
    study_id = _fill(api)
    url = f"/studies/{study_id}/insights/curves"
    body = api.get(url).json()
    assert body["metric"] == "val_loss" and body["running"] == [TRIALS - 2, TRIALS - 1]
    assert set(body["trial"]) == set(body["running"]) and len(body["epoch"]) >= RUNNING * FOLDS
    assert all(isinstance(v, float) for v in body["value"])
    assert api.get(url, params={"after": body["cursor"]}).json()["trial"] == []
    trial = api.get(f"/studies/{study_id}/trials/{TRIALS - 1}").json()
    with api.app.state.sessions.begin() as session:
        run = trial_repo.get_trial(session, study_id, TRIALS - 1).fold_runs[0]
        fold_repo.record_epoch(
            session, run.id, EpochReport(99, {"val_loss": 0.5, "val_accuracy": 0.9})
        )
        study_repo.touch_study(session, study_id)
    new = api.get(url, params={"after": body["cursor"], "metric": "val_accuracy"}).json()
    assert (new["trial"], new["fold"], new["epoch"], new["value"]) == (
        [TRIALS - 1],
        [trial["folds"][0]["fold"]],
        [99],
        [0.9],
    )


def test_unknown_study_and_bad_arguments(api: TestClient) -> None:
    assert api.get("/studies/12345/insights/history").status_code == 404
    study_id = _fill(api)
    assert api.get(f"/studies/{study_id}/insights/history?max_points=1").status_code == 422
    assert api.get(f"/studies/{study_id}/insights/history?since=yesterday").status_code == 422
    assert api.get(f"/studies/{study_id}/insights/curves?after=-1").status_code == 422


def test_trials_that_break_a_constraint_are_neither_best_nor_steps_of_the_best_line(
    api: TestClient,
) -> None:
    """The best completed trials, stored as breaking the study's constraints (as the
    scheduler stores them), come after every feasible one in ``sort=best`` and the top folds,
    and the best-so-far line steps over them: it ends at the study's best trial."""
    study_id = _fill(api)
    ranked = sorted(_completed(api, study_id), key=lambda t: (t["value"], t["number"]))
    broken = {t["number"] for t in ranked[:2]}
    with api.app.state.sessions.begin() as session:
        for trial in ranked:
            row = trial_repo.get_trial(session, study_id, trial["number"], with_folds=False)
            row.feasible = trial["number"] not in broken
        study_repo.touch_study(session, study_id)
    feasible = [t["number"] for t in ranked if t["number"] not in broken]
    best = api.get(f"/studies/{study_id}").json()["best_trial"]
    assert best["number"] == feasible[0]
    listed = api.get(f"/studies/{study_id}/trials", params={"sort": "best", "limit": 1000})
    numbers = [t["number"] for t in listed.json()["data"] if t["status"] == "completed"]
    assert numbers == feasible + [t["number"] for t in ranked if t["number"] in broken]
    top = api.get(f"/studies/{study_id}/insights/folds", params={"top": 3}).json()
    assert top["number"] == feasible[:3]
    line = api.get(f"/studies/{study_id}/insights/history").json()["best"]
    assert not broken & set(line["number"]) and line["number"][-1] == feasible[0]


def test_the_best_trials_value_beside_its_selection_corrected_estimate(api: TestClient) -> None:
    """The estimate is worked out over every completed trial's folds, not only the top ones
    the answer lists: each fold's best among them, against the best trial's own."""
    study_id = _fill(api)
    completed = _completed(api, study_id)
    folds = {}
    for trial in completed:
        detail = api.get(f"/studies/{study_id}/trials/{trial['number']}").json()
        folds[trial["number"]] = {
            f["fold"]: f["value"] for f in detail["folds"] if f["status"] == "completed"
        }
    best = min(completed, key=lambda t: (t["value"], t["number"]))["number"]
    fold_best = [min(values[k] for values in folds.values()) for k in range(FOLDS)]
    gaps = [folds[best][k] - fold_best[k] for k in range(FOLDS)]
    body = api.get(f"/studies/{study_id}/insights/folds", params={"top": 2}).json()
    selection = body["selection"]
    assert selection["number"] == best == body["number"][0]
    assert selection["trials"] == len(completed) > 2
    assert selection["bias"] == pytest.approx(sum(gaps) / FOLDS) and selection["bias"] > 0
    assert selection["corrected"] == pytest.approx(selection["value"] + selection["bias"])
    assert selection["value"] == pytest.approx(body["value"][0])
    assert selection["method"] == "tibshirani-2009"


def test_a_study_with_no_completed_trial_has_no_selection_estimate(api: TestClient) -> None:
    study_id = _fill(api)
    with api.app.state.sessions.begin() as session:
        for trial in _completed(api, study_id):
            row = trial_repo.get_trial(session, study_id, trial["number"], with_folds=False)
            row.status = TrialStatus.FAILED
        study_repo.touch_study(session, study_id)
    body = api.get(f"/studies/{study_id}/insights/folds").json()
    assert body["number"] == [] and body["selection"] is None
