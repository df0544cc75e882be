"""A study's trials as CSV over HTTP: columns, each fold's value, filters, safe cells, ETags,
and pages of trials read one at a time, two queries each, however many there are."""

from __future__ import annotations

import csv
import io
import time
from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event, insert, select

from foldwise.schemas import FoldStatus, Role, TrialStatus
from foldwise.service.api.routes import exports
from foldwise.service.db import fold_runs as fold_repo
from foldwise.service.db import studies as study_repo
from foldwise.service.db import trials as trial_repo
from foldwise.service.db.models import FoldRunRow, TrialRow
from foldwise.service.token_admin import create_token
from tests.service.study_specs import study_spec

PARAMS = {"lr": 0.01, "depth": 2, "width_1": 32, "width_2": 64, "act": "relu"}


def _rows(response) -> list[dict[str, str]]:
    assert response.status_code == 200, response.text
    return list(csv.DictReader(io.StringIO(response.text)))


def _fill(api: TestClient) -> int:
    """Trial 0 completed on its 3 folds (fold 1 on a second attempt), trial 1 failed with an
    error a spreadsheet would run, trial 2 pruned after fold 0, trial 3 running."""
    study_id = api.post("/studies", json=study_spec()).json()["id"]
    with api.app.state.sessions.begin() as session:
        shallow = {k: v for k, v in PARAMS.items() if k != "width_2"} | {"depth": 1}
        params = [PARAMS, {**PARAMS, "act": "tanh"}, shallow, PARAMS]
        trials = [
            trial_repo.create_trial(session, study_id, p, number=n) for n, p in enumerate(params)
        ]
        runs = [(0, 0, FoldStatus.COMPLETED, 0.5), (0, 1, FoldStatus.LOST, None)]
        runs += [(0, 1, FoldStatus.COMPLETED, 0.25), (0, 2, FoldStatus.COMPLETED, 0.75)]
        runs += [(1, 0, FoldStatus.FAILED, None), (2, 0, FoldStatus.COMPLETED, 0.9)]
        runs += [(2, 1, FoldStatus.CANCELLED, None), (3, 0, FoldStatus.COMPLETED, 0.125)]
        for number, fold, status, value in runs:
            run = fold_repo.start_fold_run(session, trials[number].id, fold)
            fold_repo.finish_fold_run(session, run.id, status, value=value)
        trial_repo.finish_trial(
            session, trials[0], TrialStatus.COMPLETED, value=0.5, std_error=0.14, value_folds=3
        )
        trials[0].finished_at = trials[0].started_at + timedelta(seconds=90)
        trial_repo.finish_trial(session, trials[1], TrialStatus.FAILED, error="=cmd|' /C calc")
        trial_repo.finish_trial(
            session,
            trials[2],
            TrialStatus.PRUNED,
            value=0.9,
            std_error=0.3,
            value_folds=1,
            pruned_reason="-clearly worse",
        )
        study_repo.touch_study(session, study_id)
    return study_id


def test_one_row_per_trial_with_each_folds_value(api: TestClient) -> None:
    study_id = _fill(api)
    response = api.get(f"/studies/{study_id}/trials.csv")
    assert response.headers["content-type"] == "text/csv; charset=utf-8"
    disposition = response.headers["content-disposition"]
    assert disposition == f'attachment; filename="study-{study_id}-trials.csv"'
    rows = _rows(response)
    assert list(rows[0]) == [
        *("number", "status", "value", "std_error", "value_folds"),
        *(f"params_{name}" for name in ("lr", "depth", "width_1", "width_2", "act")),
        *("fold_0", "fold_1", "fold_2"),
        *("started_at", "finished_at", "duration_s", "error", "pruned_reason"),
    ]
    assert [r["number"] for r in rows] == ["0", "1", "2", "3"]
    assert [r["status"] for r in rows] == ["completed", "failed", "pruned", "running"]
    done, failed, pruned, running = rows
    assert [done[f"fold_{k}"] for k in range(3)] == ["0.5", "0.25", "0.75"]
    assert (done["value"], done["std_error"], done["value_folds"]) == ("0.5", "0.14", "3")
    assert done["duration_s"] == "90.0" and done["params_act"] == "relu"
    assert datetime.fromisoformat(done["finished_at"]).tzinfo is not None
    assert [failed[f"fold_{k}"] for k in range(3)] == ["", "", ""]
    assert failed["error"] == "'=cmd|' /C calc" and failed["value"] == ""
    assert [pruned[f"fold_{k}"] for k in range(3)] == ["0.9", "", ""]
    assert pruned["pruned_reason"] == "'-clearly worse" and pruned["params_width_2"] == ""
    assert running["fold_0"] == "0.125" and running["finished_at"] == ""


def test_status_and_sort_as_the_trial_list(api: TestClient) -> None:
    study_id = _fill(api)
    url = f"/studies/{study_id}/trials.csv"
    best = _rows(api.get(url, params={"sort": "best"}))
    listed = api.get(f"/studies/{study_id}/trials", params={"sort": "best"}).json()["data"]
    assert [int(r["number"]) for r in best] == [t["number"] for t in listed] == [0, 2, 1, 3]
    assert [r["number"] for r in _rows(api.get(url, params={"sort": "-params.act"}))][0] == "1"
    pruned = _rows(api.get(url, params={"status": "pruned"}))
    assert [(r["number"], r["fold_0"]) for r in pruned] == [("2", "0.9")]
    assert _rows(api.get(url, params={"status": "pending"})) == []
    assert api.get(url, params={"status": "pending"}).text.startswith('"number","status"')
    bad = api.get(url, params={"sort": "params.momentum"})
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["query", "sort"]
    assert api.get(url, params={"status": "asleep"}).status_code == 422


def test_unknown_or_deleted_study_is_a_json_404(api: TestClient) -> None:
    missing = api.get("/studies/999/trials.csv")
    assert missing.status_code == 404 and missing.json() == {"detail": "study 999 not found"}
    study_id = _fill(api)
    assert api.delete(f"/studies/{study_id}").status_code == 202
    assert api.get(f"/studies/{study_id}/trials.csv").status_code == 404


def test_etag_follows_the_folds_too(api: TestClient) -> None:
    study_id = _fill(api)
    url = f"/studies/{study_id}/trials.csv"
    first = api.get(url)
    etag = first.headers["etag"]
    assert first.headers["cache-control"] == "no-cache"
    held = api.get(url, headers={"If-None-Match": etag})
    assert held.status_code == 304 and not held.content and held.headers["etag"] == etag
    with api.app.state.sessions.begin() as session:  # a running trial's fold finishes
        trial = trial_repo.get_trial(session, study_id, 3, with_folds=False)
        run = fold_repo.start_fold_run(session, trial.id, 1)
        fold_repo.finish_fold_run(session, run.id, FoldStatus.COMPLETED, value=0.375)
        study_repo.touch_study(session, study_id, trials=False)
    changed = api.get(url, headers={"If-None-Match": etag})
    assert changed.status_code == 200 and _rows(changed)[3]["fold_1"] == "0.375"


def test_a_viewer_may_download(api: TestClient, database_url: str) -> None:
    study_id = _fill(api)
    token = create_token(database_url, "reader", Role.VIEWER)
    viewer = TestClient(api.app, headers={"Authorization": f"Bearer {token}"})
    assert len(_rows(viewer.get(f"/studies/{study_id}/trials.csv"))) == 4
    assert TestClient(api.app).get(f"/studies/{study_id}/trials.csv").status_code == 401


def test_ten_thousand_trials_in_pages_of_a_thousand(api: TestClient) -> None:
    trials, folds = 10_000, 3
    study_id = api.post("/studies", json=study_spec()).json()["id"]
    start = datetime(2026, 11, 1, tzinfo=UTC)
    with api.app.state.sessions.begin() as session:
        db = session.connection()
        db.execute(
            insert(TrialRow.__table__),
            [
                {
                    "study_id": study_id,
                    "number": n,
                    "status": "completed",
                    "params": {**PARAMS, "lr": 1e-4 + n * 1e-5},
                    "value": 1.0 / (n + 1),
                    "std_error": 0.01,
                    "value_folds": folds,
                    "created_at": start,
                    "started_at": start,
                    "finished_at": start + timedelta(seconds=n),
                }
                for n in range(trials)
            ],
        )
        ids = db.execute(select(TrialRow.id).where(TrialRow.study_id == study_id)).scalars()
        db.execute(
            insert(FoldRunRow.__table__),
            [
                {"trial_id": i, "fold": k, "attempt": 0, "status": "completed", "value": k + 0.5}
                for i in ids
                for k in range(folds)
            ],
        )
        study_repo.touch_study(session, study_id)
    statements: list[str] = []

    def count(conn, cursor, statement, *args) -> None:  # noqa: ANN001 - SQLAlchemy's hook
        statements.append(statement)

    engine = api.app.state.engine
    event.listen(engine, "before_cursor_execute", count)
    try:
        started = time.perf_counter()
        response = api.get(f"/studies/{study_id}/trials.csv", params={"sort": "-value"})
        seconds = time.perf_counter() - started
    finally:
        event.remove(engine, "before_cursor_execute", count)
    rows = _rows(response)
    print(f"\n{trials} trials x {folds} folds as CSV: {seconds:.2f} s, {len(response.content)} B")
    assert len(rows) == trials and rows[0]["number"] == "0" and rows[-1]["number"] == "9999"
    assert all(r["fold_2"] == "2.5" for r in rows)
    on_trials = [s for s in statements if "FROM trials" in s or "FROM fold_runs" in s]
    # the revision, the study, the trials' order, their other parameters, then per page of
    # 1,000 trials one query for their folds and one for the trials
    pages = trials // exports.EXPORT_PAGE
    assert len(statements) == 4 + 2 * pages and len(on_trials) == 2 + 2 * pages, statements
    assert seconds < 10


def test_pages_hold_every_trial_once_in_the_order_it_began_with(
    api: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pages of 3: a trial that finishes while the export runs (and would now sort first)
    keeps its place and comes once, as it is when its page is read."""
    monkeypatch.setattr(exports, "EXPORT_PAGE", 3)
    study_id = api.post("/studies", json=study_spec()).json()["id"]
    values = [0.3, 0.9, 0.1, 0.5, 0.7, 0.2, 0.8, None, None, None]  # None: still running
    with api.app.state.sessions.begin() as session:
        for number, value in enumerate(values):
            trial = trial_repo.create_trial(session, study_id, PARAMS, number=number)
            if value is not None:
                trial_repo.finish_trial(session, trial, TrialStatus.COMPLETED, value=value)
        study_repo.touch_study(session, study_id)
    read = trial_repo.export_records
    pages: list[int] = []

    def reading(session, trial_ids):  # noqa: ANN001, ANN202 - the repository's signature
        pages.append(len(trial_ids))
        if len(pages) == 3:
            with api.app.state.sessions.begin() as writing:
                trial = trial_repo.get_trial(writing, study_id, 8, with_folds=False)
                trial_repo.finish_trial(writing, trial, TrialStatus.COMPLETED, value=0.95)
                study_repo.touch_study(writing, study_id)
        return read(session, trial_ids)

    monkeypatch.setattr(trial_repo, "export_records", reading)
    rows = _rows(api.get(f"/studies/{study_id}/trials.csv", params={"sort": "-value"}))
    assert pages == [3, 3, 3, 1]
    assert [int(r["number"]) for r in rows] == [1, 6, 4, 3, 0, 5, 2, 7, 8, 9]
    assert [(r["status"], r["value"]) for r in rows[7:]] == [
        ("running", ""),
        ("completed", "0.95"),
        ("running", ""),
    ]
    again = _rows(api.get(f"/studies/{study_id}/trials.csv", params={"sort": "-value"}))
    assert [int(r["number"]) for r in again][:2] == [8, 1]


def test_parameters_outside_the_space_follow_by_name(api: TestClient) -> None:
    study_id = api.post("/studies", json=study_spec()).json()["id"]
    with api.app.state.sessions.begin() as session:
        held = [{**PARAMS, "zeta": 1, "alpha": "a"}, {**PARAMS, "beta": True}, PARAMS]
        for number, params in enumerate(held):
            trial = trial_repo.create_trial(session, study_id, params, number=number)
            if number:
                trial_repo.finish_trial(session, trial, TrialStatus.FAILED, error="boom")
        study_repo.touch_study(session, study_id)
    url = f"/studies/{study_id}/trials.csv"
    header = list(_rows(api.get(url))[0])
    space = [f"params_{name}" for name in PARAMS]
    assert header[5:13] == [*space, "params_alpha", "params_beta", "params_zeta"]
    [row] = _rows(api.get(url, params={"status": "running"}))
    assert list(row)[5:12] == [*space, "params_alpha", "params_zeta"]
    assert (row["params_zeta"], row["params_alpha"]) == ("1", "a")
    failed = _rows(api.get(url, params={"status": "failed"}))
    assert [r["params_beta"] for r in failed] == ["true", ""]
