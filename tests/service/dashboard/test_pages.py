"""The dashboard pages in real Chromium: they load cleanly, draw, submit, stop and go live."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from foldwise.cv import CrossValidation, CVScheme
from foldwise.schemas import FoldStatus, JobStatus, TrialStatus
from foldwise.service.db import fold_runs as fold_repo
from foldwise.service.db import holdout as holdout_repo
from foldwise.service.db import studies as study_repo
from foldwise.service.db import study_warnings as warning_repo
from foldwise.service.db import trials as trial_repo
from foldwise.trainers.report import EpochReport
from tests.browser import wait_until
from tests.service.dashboard.conftest import FOLDS, RUNNING, TRIALS, Dashboard, open_ready
from tests.service.study_specs import study_spec

PLOTS = ["plot-history", "plot-parcoords", "plot-slices", "plot-folds", "plot-curves"]
PRUNED = 100
REASON = (
    "after 2 of 3 folds: 0.91 ± 0.02 vs incumbent (trial 3) 0.12 on the same folds, worse by "
    "0.79, more than the incumbent's worst fold lies from its mean (0.05; forgiving rule)"
)
FOLD_REASON = "fold 1 at epoch 2: 0.95, worse than the median 0.31 of 6 other trials' runs"
CANCELLED = f"trial {PRUNED} ended first (pruned): {REASON}"


def _api(dashboard: Dashboard) -> TestClient:
    """The dashboard's app in-process, as its admin (the served app's own Host is allowed)."""
    return TestClient(dashboard.app, base_url="http://127.0.0.1", headers=dashboard.headers)


def _store_pruned_trial(dashboard: Dashboard) -> None:
    """Trial ``PRUNED`` as the scheduler leaves one: fold 0 completed, fold 1 pruned by the
    pruning rule, fold 2 cancelled, and the trial pruned at the mean of the first two."""
    endings = [
        (FoldStatus.COMPLETED, 0.87, None),
        (FoldStatus.PRUNED, 0.95, FOLD_REASON),
        (FoldStatus.CANCELLED, None, CANCELLED),
    ]
    with dashboard.app.state.sessions.begin() as session:
        params = {"lr": 0.2, "depth": 1, "width_1": 16, "act": "tanh", "dropout": 0.4}
        trial = trial_repo.create_trial(session, dashboard.study_id, params, number=PRUNED)
        for fold, (status, value, error) in enumerate(endings):
            run = fold_repo.start_fold_run(session, trial.id, fold)
            for epoch in (1, 2):
                fold_repo.record_epoch(
                    session, run.id, EpochReport(epoch, {"val_loss": 1.2 - 0.1 * epoch})
                )
            fold_repo.finish_fold_run(session, run.id, status, value=value, error=error)
        trial_repo.finish_trial(
            session,
            trial,
            TrialStatus.PRUNED,
            value=0.91,
            std_error=0.04,
            value_folds=2,
            pruned_reason=REASON,
        )
        study_repo.touch_study(session, dashboard.study_id)


def test_studies_page_lists_the_study_with_its_progress(page, dashboard: Dashboard) -> None:
    open_ready(page, "/")
    row = page.locator(f"#studies tr[data-study='{dashboard.study_id}']")
    assert "running" in row.inner_text()
    study = _api(dashboard).get(f"/studies/{dashboard.study_id}").json()
    finished = study["progress"]["finished"]
    assert f"{finished} / {TRIALS}" in row.inner_text()
    assert f"{RUNNING} running" in row.inner_text()
    best = study["best_trial"]["number"]
    assert row.locator(f"a[href$='/trials/{best}']").count() == 1


def test_bad_spec_shows_the_error_at_the_line_of_its_field(page, dashboard: Dashboard) -> None:
    open_ready(page, "/dashboard")
    page.click("#submit summary")
    text = "name: broken\nobjective: {metric: val_loss, direction: sideways}\nspace: {}\n"
    page.fill("#spec", text)
    page.console.allow("status of 422")
    page.click("#submit-spec")
    error = page.locator("#spec-errors li[data-field='objective.direction']")
    error.wait_for()
    assert error.get_attribute("data-line") == "2"
    assert "line 2" in error.inner_text()
    assert "2" in page.locator("#gutter .bad").all_inner_texts()


def test_spec_that_is_not_yaml_names_its_line(page, dashboard: Dashboard) -> None:
    open_ready(page, "/dashboard")
    page.click("#submit summary")
    page.fill("#spec", "name: x\nspace: [unclosed\n")
    page.console.allow("status of 422")
    page.click("#submit-spec")
    page.locator("#spec-errors li").wait_for()
    assert "not valid YAML" in page.inner_text("#spec-errors")
    assert page.locator("#gutter .bad").count() == 1


def test_good_spec_creates_a_study_and_opens_it(page, dashboard: Dashboard) -> None:
    import json

    open_ready(page, "/dashboard")
    page.click("#submit summary")
    page.fill("#spec", json.dumps(study_spec(name="from-the-browser"), indent=2))
    page.click("#submit-spec")
    page.wait_for_url("**/dashboard/studies/*")
    page.wait_for_selector("body[data-ready=true]")
    assert page.inner_text("#study-name") == "from-the-browser"
    assert page.inner_text("#study-status") == "queued"


def test_study_page_draws_every_plot_and_the_table(page, dashboard: Dashboard) -> None:
    open_ready(page, f"/dashboard/studies/{dashboard.study_id}")
    for plot in PLOTS:
        assert page.locator(f"#{plot} .main-svg").count() >= 1, plot
    history = page.evaluate("document.getElementById('plot-history').data[0].x.length")
    completed = _api(dashboard).get(f"/studies/{dashboard.study_id}").json()["progress"]
    assert history == completed["completed"]
    curves = page.evaluate("document.getElementById('plot-curves').data.length")
    assert curves == RUNNING * FOLDS
    lines = page.evaluate(
        "document.getElementById('plot-parcoords').data.filter(t => t.mode === 'lines')"
        ".reduce((n, t) => n + t.x.filter(x => x === null).length, 0)"
    )
    assert lines == completed["completed"]  # one polyline per completed trial
    labels = page.locator("#plot-parcoords .annotation-text").all_text_contents()
    assert {"lr", "depth", "act", "val_loss"} <= set(labels)
    assert page.locator("#trials tbody tr").count() == TRIALS  # one page of 50
    selection = _api(dashboard).get(f"/studies/{dashboard.study_id}/insights/folds").json()
    selection = selection["selection"]
    note = page.inner_text("#folds-selection")
    assert f"Best trial #{selection['number']}" in note and "expect" in note
    assert f"best of {selection['trials']} trials on the same folds" in note
    marked = page.evaluate(
        "document.getElementById('plot-folds').data.find(t => t.name === 'expected on new data').y"
    )
    assert marked == [selection["corrected"]]


def test_trial_table_sorts_filters_and_pages(page, dashboard: Dashboard) -> None:
    open_ready(page, f"/dashboard/studies/{dashboard.study_id}")
    api = _api(dashboard)
    best = api.get(f"/studies/{dashboard.study_id}/trials", params={"sort": "value"}).json()
    page.click("#trials th[data-sort='value']")
    first = page.locator("#trials tbody tr").first
    top_row = "document.querySelector('#trials tbody tr').dataset.trial"
    wait_until(page, f"{top_row} == {best['data'][0]['number']}")
    assert first.get_attribute("data-trial") == str(best["data"][0]["number"])
    for _ in range(2):  # ascending, then descending
        page.click("#trials th[data-sort='params.lr']")
    by_lr = api.get(f"/studies/{dashboard.study_id}/trials", params={"sort": "-params.lr"}).json()
    page.wait_for_selector("#trials th.sorted-desc[data-sort='params.lr']")
    wait_until(page, f"{top_row} == {by_lr['data'][0]['number']}")
    page.select_option("#filter-status", "failed")
    wait_until(page, "document.querySelectorAll('#trials tbody tr .badge.completed').length == 0")
    statuses = page.locator("#trials tbody .badge").all_inner_texts()
    assert statuses and set(statuses) == {"failed"}
    page.select_option("#filter-status", "")
    page.select_option("#page-size", "25")
    wait_until(page, "document.querySelectorAll('#trials tbody tr').length == 25")
    page.click("#next")
    wait_until(page, f"document.querySelectorAll('#trials tbody tr').length == {TRIALS - 25}")
    assert page.inner_text("#page-label") == f"26–{TRIALS} of {TRIALS}"


def test_stop_button_asks_for_a_stop(page, dashboard: Dashboard) -> None:
    open_ready(page, f"/dashboard/studies/{dashboard.study_id}")
    page.click("#stop")  # sent with the CSRF token (the scheduler, off here, carries it out)
    page.wait_for_selector("#study-status .badge.stopping")
    assert page.locator("#stop").is_hidden()
    study = _api(dashboard).get(f"/studies/{dashboard.study_id}").json()
    assert study["stop_requested"] and study["status"] == "running"


def test_live_updates_arrive_as_small_deltas(page, dashboard: Dashboard) -> None:
    urls: list[str] = []
    open_ready(page, f"/dashboard/studies/{dashboard.study_id}")
    page.on("request", lambda request: urls.append(request.url))
    study_id = dashboard.study_id
    with dashboard.app.state.sessions.begin() as session:
        trial = trial_repo.create_trial(session, study_id, {"lr": 0.01, "act": "relu"}, number=500)
        trial_repo.finish_trial(session, trial, TrialStatus.COMPLETED, value=-1.0, std_error=0.01)
        running = trial_repo.get_trial(session, study_id, TRIALS - 1).fold_runs[0]
        fold_repo.record_epoch(session, running.id, EpochReport(77, {"val_loss": 0.25}))
        study_repo.touch_study(session, study_id)  # as every scheduler write does
    wait_until(page, "document.getElementById('plot-history').data[0].x.includes(500)")
    wait_until(page, "document.getElementById('plot-curves').data.some(t => t.x.includes(77))")
    page.wait_for_selector("#card-best a[href$='/trials/500']")
    insight_calls = [u for u in urls if "/insights/history" in u]
    assert insight_calls and all("since=" in u for u in insight_calls)
    assert all("after=" in u for u in urls if "/insights/curves" in u)


def test_trial_page_shows_folds_errors_and_tracebacks(page, dashboard: Dashboard) -> None:
    api = _api(dashboard)
    failed = api.get(f"/studies/{dashboard.study_id}/trials", params={"status": "failed"}).json()
    number = failed["data"][0]["number"]
    open_ready(page, f"/dashboard/studies/{dashboard.study_id}/trials/{number}")
    assert "CUDA out of memory" in page.inner_text("#trial-error")
    page.click("#folds details summary")
    assert "Traceback (most recent call last)" in page.inner_text("#folds pre.trace")
    assert page.locator("#plot-curves .main-svg").count() >= 1
    assert page.locator("#links a").count() == 0  # the API names no timeline yet


def test_trial_page_links_the_timeline_and_checkpoints_the_api_names(
    page, dashboard: Dashboard
) -> None:
    api = _api(dashboard)
    best = api.get(f"/studies/{dashboard.study_id}").json()["best_trial"]["number"]
    path = f"/studies/{dashboard.study_id}/trials/{best}"
    trial = api.get(path).json()
    trial["has_timeline"] = True  # the flags issue #4's routes set
    trial["folds"][0]["model_saved"] = True
    trial["folds"][1]["links"] = {"checkpoint": f"{path}/folds/1/checkpoint"}
    is_api = lambda url: url.endswith(path) and "/dashboard/" not in url  # noqa: E731
    page.route(is_api, lambda route: route.fulfill(json=trial))
    open_ready(page, f"/dashboard{path}")
    assert page.get_attribute("#links a", "href") == f"{path}/timeline"
    assert page.locator(f"#folds a[href='{path}/folds/0/model']").count() == 1
    assert page.locator(f"#folds a[href='{path}/folds/1/checkpoint']").count() == 1
    assert page.locator("#params dt").count() == len(trial["params"])
    assert page.locator("#folds tbody tr").count() == len(trial["folds"])
    assert "±" in page.inner_text("#card-value")


def test_a_pruned_trial_is_marked_in_the_table_and_the_history(page, dashboard: Dashboard) -> None:
    _store_pruned_trial(dashboard)
    open_ready(page, f"/dashboard/studies/{dashboard.study_id}")
    row = page.locator(f"#trials tbody tr[data-trial='{PRUNED}']")
    assert row.get_attribute("class") == "pruned"
    assert row.locator(".badge.pruned").inner_text() == "pruned"
    value = row.locator("td.value")
    assert value.get_attribute("title") == REASON
    assert value.locator(".value-folds").inner_text() == f"2/{FOLDS} folds"
    assert "0.91 ± 0.04" in value.inner_text()
    assert row.locator("td.reason").get_attribute("title") == REASON
    assert page.locator("#trials tbody .value-folds").count() == 1  # the others rest on all K
    pruned = page.evaluate(
        "document.getElementById('plot-history').data"
        ".find(t => t.name === 'pruned (partial mean)')"
    )
    assert pruned["x"] == [PRUNED] and pruned["y"] == [0.91]
    assert pruned["marker"]["symbol"] == "circle-open" and pruned["customdata"] == [PRUNED]
    hover = pruned["text"][0]
    assert hover.startswith(f"0.91 ± 0.04 over 2 of {FOLDS} folds<br>after 2 of 3 folds:")
    assert "forgiving rule)" in hover and all(len(line) <= 80 for line in hover.split("<br>"))
    legend = page.locator("#plot-history .legendtext").all_text_contents()
    assert "pruned (partial mean)" in legend
    completed = page.evaluate("document.getElementById('plot-history').data[0].x")
    assert PRUNED not in completed
    assert "1 pruned trial at the mean of the folds they ran" in page.inner_text("#history-note")
    page.select_option("#filter-status", "pruned")
    wait_until(page, "document.querySelectorAll('#trials tbody tr').length == 1")
    assert page.locator("#trials tbody tr").get_attribute("data-trial") == str(PRUNED)


def test_a_pruned_trial_arrives_in_the_history_while_the_page_is_live(
    page, dashboard: Dashboard
) -> None:
    open_ready(page, f"/dashboard/studies/{dashboard.study_id}")
    assert page.evaluate("document.getElementById('plot-history').data.length") == 2
    _store_pruned_trial(dashboard)
    wait_until(
        page,
        "document.getElementById('plot-history').data"
        f".some(t => t.name === 'pruned (partial mean)' && t.x.includes({PRUNED}))",
    )
    page.wait_for_selector(f"#trials tbody tr.pruned[data-trial='{PRUNED}']")


def test_trial_page_shows_why_a_trial_and_its_folds_were_pruned(
    page, dashboard: Dashboard
) -> None:
    _store_pruned_trial(dashboard)
    open_ready(page, f"/dashboard/studies/{dashboard.study_id}/trials/{PRUNED}")
    assert page.inner_text("#trial-status") == "pruned"
    assert page.inner_text("#trial-pruned .callout.pruned") == f"Pruned: {REASON}"
    assert page.inner_text("#trial-error") == ""
    card = page.inner_text("#card-value")
    assert "0.91 ± 0.04" in card and f"value over 2 of {FOLDS} folds" in card
    pruned = page.locator("#folds tbody tr.pruned")
    assert pruned.get_attribute("data-fold") == "1"
    assert pruned.locator(".badge.pruned").count() == 1
    assert pruned.locator(".reason-text").inner_text() == FOLD_REASON
    assert "0.95" in pruned.inner_text()
    cancelled = page.locator("#folds tbody tr.cancelled")
    assert cancelled.get_attribute("data-fold") == "2"
    assert cancelled.locator(".reason-text").inner_text() == CANCELLED
    assert page.locator("#folds tbody tr[data-fold='0'] .badge.completed").count() == 1


def test_trial_page_says_which_node_and_gpus_each_fold_ran_on(page, dashboard: Dashboard) -> None:
    """Placement as the scheduler records it on a cluster: one fold on two nodes, one on a
    node with GPUs; a fold not yet placed shows a dash."""
    api = _api(dashboard)
    best = api.get(f"/studies/{dashboard.study_id}").json()["best_trial"]["number"]
    node_a, node_b = "a1" * 28, "b2" * 28
    with dashboard.app.state.sessions.begin() as session:
        trial = trial_repo.get_trial(session, dashboard.study_id, best)
        runs = sorted(trial.fold_runs, key=lambda r: (r.fold, r.attempt))
        runs[0].placement = [
            {"rank": 0, "node_id": node_a, "node_ip": "10.0.0.5", "gpu_ids": []},
            {"rank": 1, "node_id": node_b, "node_ip": "10.0.0.6", "gpu_ids": []},
        ]
        runs[1].placement = [
            {"rank": 0, "node_id": node_b, "node_ip": "10.0.0.6", "gpu_ids": ["3"]}
        ]
        study_repo.touch_study(session, dashboard.study_id)
    open_ready(page, f"/dashboard/studies/{dashboard.study_id}/trials/{best}")
    cells = page.locator("#folds td.placement")
    assert cells.nth(0).inner_text().split("\n") == ["a1a1a1a1 (10.0.0.5)", "b2b2b2b2 (10.0.0.6)"]
    assert cells.nth(1).inner_text() == "b2b2b2b2 (10.0.0.6) GPU 3"
    assert cells.count() == 2  # the other folds were never placed
    assert (
        page.get_attribute("#folds td.placement div >> nth=0", "title")
        == f"node {node_a}, ranks 0"
    )


def test_a_study_waiting_for_the_cluster_says_why(page, dashboard: Dashboard) -> None:
    why = (
        "waiting for cluster resources: 2 fold runs ready, each needs 4 CPUs; 0 of 4 CPUs are free"
    )
    with dashboard.app.state.sessions.begin() as session:
        study = study_repo.get_study(session, dashboard.study_id)
        study.waiting = why
        study_repo.touch_study(session, dashboard.study_id)
    open_ready(page, f"/dashboard/studies/{dashboard.study_id}")
    assert page.inner_text("#study-waiting") == why
    assert _api(dashboard).get(f"/studies/{dashboard.study_id}").json()["waiting"] == why


def test_study_page_names_the_task_and_the_code_it_runs(page, dashboard: Dashboard) -> None:
    code_hash = "1a2b3c4d5e6f" + "0" * 52
    with dashboard.app.state.sessions.begin() as session:
        study = study_repo.get_study(session, dashboard.study_id)
        task = study.spec.trainer.task
        study.code_hash = code_hash
        study_repo.touch_study(session, dashboard.study_id)
    open_ready(page, f"/dashboard/studies/{dashboard.study_id}")
    assert page.inner_text("#card-task .value").split() == [task, "code", "1a2b3c4d5e6f"]
    assert page.get_attribute("#card-task .code", "title") == f"code {code_hash}"


def test_study_page_shows_the_hold_out_score_beside_the_cv_value(
    page, dashboard: Dashboard
) -> None:
    with dashboard.app.state.sessions.begin() as session:
        study = study_repo.get_study(session, dashboard.study_id)
        cv = CrossValidation(scheme=CVScheme.GROUP, repeats=2)
        study.spec = study.spec.model_copy(update={"cv": cv})
        holdout_repo.request_holdout(study, 3, "both", 1)
        objective = {"metric": "val_loss", "test_metric": "loss", "cv": 0.25,
                     "cv_std_error": 0.02, "ensemble": 0.31, "refit": 0.29}  # fmt: skip
        holdout_repo.set_holdout(
            study,
            JobStatus.COMPLETED,
            ensemble={"loss": 0.31, "accuracy": 0.9},
            refit={"loss": 0.29, "accuracy": 0.91},
            objective=objective,
        )
        study_repo.touch_study(session, dashboard.study_id)
    open_ready(page, f"/dashboard/studies/{dashboard.study_id}")
    assert page.inner_text("#card-holdout .label") == "Hold-out (trial 3)"
    lines = page.inner_text("#card-holdout .value").splitlines()
    assert lines == [
        "test loss 0.31 / 0.29 · CV 0.25 ± 0.02",
        "ensemble: loss 0.31, accuracy 0.9",
        "refit: loss 0.29, accuracy 0.91",
    ]
    first, scheme = page.inner_text("#card-folds .value").splitlines()
    assert first.startswith(f"{FOLDS} ×2 repeats × ") and scheme == "group"


def test_study_page_downloads_the_trials_as_csv(page, browser, dashboard: Dashboard) -> None:
    study_id = dashboard.study_id
    open_ready(page, f"/dashboard/studies/{study_id}")
    link = page.get_by_role("link", name="Download CSV")
    assert link.get_attribute("href") == f"/studies/{study_id}/trials.csv"
    with page.expect_download() as info:
        link.click()  # the page's browser is signed in by its cookie only: no bearer token
    download = info.value
    assert download.failure() is None
    assert download.suggested_filename == f"study-{study_id}-trials.csv"
    with Path(download.path()).open(newline="", encoding="utf-8") as file:
        rows = list(csv.DictReader(file))

    trials = _api(dashboard).get(f"/studies/{study_id}/trials", params={"limit": 1000}).json()
    assert trials["count"] == TRIALS
    by_number = {trial["number"]: trial for trial in trials["data"]}
    assert [int(row["number"]) for row in rows] == sorted(by_number)
    assert [f"fold_{k}" for k in range(FOLDS)] == [c for c in rows[0] if c.startswith("fold_")]
    for row in rows:
        trial = by_number[int(row["number"])]
        assert row["status"] == trial["status"]
        if trial["value"] is None:
            assert row["value"] == ""
        else:
            assert float(row["value"]) == pytest.approx(trial["value"])
        assert {k: row[f"params_{k}"] for k in trial["params"]} == {
            k: str(v) for k, v in trial["params"].items()
        }

    # Without the sign-in cookie the same link is refused: the download above rode on it.
    stranger = browser.new_context(base_url=dashboard.url)
    try:
        assert stranger.request.get(f"/studies/{study_id}/trials.csv").status == 401
    finally:
        stranger.close()


def test_trials_that_break_a_constraint_are_crosses_off_the_best_line_and_badged(
    page, dashboard: Dashboard
) -> None:
    """In the history, a completed trial that breaks the study's constraints is a grey cross
    of its own series, and the best-so-far line steps over it."""
    limit = [{"metric": "n_params", "op": "<=", "value": 5000}]
    study_id = _api(dashboard).post("/studies", json=study_spec(constraints=limit)).json()["id"]
    values = {0: (0.5, True), 1: (0.2, False), 2: (0.4, True), 3: (0.1, False)}
    with dashboard.app.state.sessions.begin() as session:
        for number, (value, feasible) in values.items():
            params = {"lr": 0.1, "depth": 1, "width_1": 16, "act": "relu"}
            trial = trial_repo.create_trial(session, study_id, params, number=number)
            trial_repo.finish_trial(
                session,
                trial,
                TrialStatus.COMPLETED,
                value=value,
                constraint_values=[4000.0 if feasible else 6000.0],
                feasible=feasible,
            )
        study_repo.touch_study(session, study_id)
    open_ready(page, f"/dashboard/studies/{study_id}")
    traces = page.evaluate(
        "document.getElementById('plot-history').data.map(t => [t.name, t.x, t.y])"
    )
    by_name = {name: (x, y) for name, x, y in traces}
    assert by_name["trial value ± fold s.e."][0] == [0, 2]
    assert by_name["breaks a constraint"] == ([1, 3], [0.2, 0.1])
    # steps at trials 0 and 2, the line drawn on to the last trial
    assert by_name["best so far"] == ([0, 2, 3], [0.5, 0.4, 0.4])
    badges = [
        page.locator(f"#trials tbody tr[data-trial='{n}'] .badge.infeasible").count()
        for n in values
    ]
    assert badges == [0, 1, 0, 1]  # and in the trial table, a badge beside its status


def test_study_page_shows_each_warning_with_links_to_its_trials(
    page, dashboard: Dashboard
) -> None:
    partial = "the objective val_loss differs from rank to rank in the same epoch: ..."
    with dashboard.app.state.sessions.begin() as session:
        for trial in (3, 1, 3):
            warning_repo.record_warning(
                session, dashboard.study_id, "partial_metric", partial, trial
            )
        warning_repo.record_warning(session, dashboard.study_id, "task", "made up", 2)
        study_repo.touch_study(session, dashboard.study_id)
    open_ready(page, f"/dashboard/studies/{dashboard.study_id}")
    shown = page.locator(".callout.warning")
    assert shown.count() == 2
    first = page.locator(".callout.warning[data-kind=partial_metric]")
    assert first.inner_text().startswith(f"Warning: {partial}")
    assert "3 fold runs; trials #1, #3" in first.inner_text()
    links = first.locator("a").evaluate_all("links => links.map(a => a.getAttribute('href'))")
    assert links == [f"/dashboard/studies/{dashboard.study_id}/trials/{n}" for n in (1, 3)]


def test_a_pareto_study_page_names_its_objectives_and_its_front(
    page, dashboard: Dashboard
) -> None:
    objectives = [
        {"metric": "val_loss", "direction": "minimize"},
        {"metric": "n_params", "direction": "minimize"},
    ]
    study_id = (
        _api(dashboard).post("/studies", json=study_spec(objectives=objectives)).json()["id"]
    )
    with dashboard.app.state.sessions.begin() as session:
        for number, values in enumerate([(0.3, 900.0), (0.2, 2000.0), (0.4, 1000.0)]):
            params = {"lr": 0.1, "depth": 1, "width_1": 16, "act": "relu"}
            trial = trial_repo.create_trial(session, study_id, params, number=number)
            trial_repo.finish_trial(
                session,
                trial,
                TrialStatus.COMPLETED,
                value=values[0],
                objective_values=[[values[0], 0.01], [values[1], 0.0]],
            )
        study_repo.touch_study(session, study_id)
    open_ready(page, f"/dashboard/studies/{study_id}")
    assert page.inner_text("#card-objectives .value") == "minimize val_loss · minimize n_params"
    wait_until(page, "document.querySelector('#card-front .value').textContent !== '—'")
    assert page.inner_text("#card-front .value") == "2 trials on the front"
    assert page.locator("#card-best").count() == 0  # no single best to show
