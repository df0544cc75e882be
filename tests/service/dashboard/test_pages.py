"""The dashboard pages in real Chromium: they load cleanly, draw, submit, stop and go live."""

from __future__ import annotations

from fastapi.testclient import TestClient

from foldwise.schemas import TrialStatus
from service.db import fold_runs as fold_repo
from service.db import studies as study_repo
from service.db import trials as trial_repo
from tests.service.dashboard.conftest import FOLDS, RUNNING, TRIALS, Dashboard, open_ready
from tests.service.study_specs import study_spec

PLOTS = ["plot-history", "plot-parcoords", "plot-slices", "plot-folds", "plot-curves"]


def _api(dashboard: Dashboard) -> TestClient:
    """The dashboard's app in-process, as its admin (the served app's own Host is allowed)."""
    return TestClient(dashboard.app, base_url="http://127.0.0.1", headers=dashboard.headers)


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


def test_trial_table_sorts_filters_and_pages(page, dashboard: Dashboard) -> None:
    open_ready(page, f"/dashboard/studies/{dashboard.study_id}")
    api = _api(dashboard)
    best = api.get(f"/studies/{dashboard.study_id}/trials", params={"sort": "value"}).json()
    page.click("#trials th[data-sort='value']")
    first = page.locator("#trials tbody tr").first
    page.wait_for_function(
        f"document.querySelector('#trials tbody tr').dataset.trial == {best['data'][0]['number']}"
    )
    assert first.get_attribute("data-trial") == str(best["data"][0]["number"])
    for _ in range(2):  # ascending, then descending
        page.click("#trials th[data-sort='params.lr']")
    by_lr = api.get(f"/studies/{dashboard.study_id}/trials", params={"sort": "-params.lr"}).json()
    page.wait_for_selector("#trials th.sorted-desc[data-sort='params.lr']")
    page.wait_for_function(
        f"document.querySelector('#trials tbody tr').dataset.trial == {by_lr['data'][0]['number']}"
    )
    page.select_option("#filter-status", "failed")
    page.wait_for_function(
        "document.querySelectorAll('#trials tbody tr .badge.completed').length == 0"
    )
    statuses = page.locator("#trials tbody .badge").all_inner_texts()
    assert statuses and set(statuses) == {"failed"}
    page.select_option("#filter-status", "")
    page.select_option("#page-size", "25")
    page.wait_for_function("document.querySelectorAll('#trials tbody tr').length == 25")
    page.click("#next")
    page.wait_for_function(
        f"document.querySelectorAll('#trials tbody tr').length == {TRIALS - 25}"
    )
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
        fold_repo.record_epoch(session, running.id, 77, {"val_loss": 0.25})
        study_repo.touch_study(session, study_id)  # as every scheduler write does
    page.wait_for_function("document.getElementById('plot-history').data[0].x.includes(500)")
    page.wait_for_function(
        "document.getElementById('plot-curves').data.some(t => t.x.includes(77))"
    )
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
