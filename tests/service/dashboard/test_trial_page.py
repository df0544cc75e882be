"""The trial page in real Chromium: clean error text, and learning curves that say something true
whatever state the trial is in."""

from __future__ import annotations

from fastapi.testclient import TestClient

from foldwise.schemas import TrialStatus
from foldwise.service.db import studies as study_repo
from foldwise.service.db import trials as trial_repo
from tests.browser import wait_until
from tests.service.dashboard.conftest import FOLDS, Dashboard, open_ready
from tests.service.dashboard.studies import GOOD, add_failed_trial, add_study

# What Ray's traceback of a failed fold looked like in the database before the executor
# stripped its colour codes.
RAY_TRACEBACK = (
    "\x1b[36mray::DDPWorker.run()\x1b[39m (pid=9247, ip=192.0.2.2, actor_id=fab6)\n"
    '  File "tests/user_tasks/tiny.py", line 44, in build_model\n'
    '    raise ValueError("tiny task refuses mode=raise")\n'
    "ValueError: tiny task refuses mode=raise"
)


def test_a_traceback_stored_with_colour_codes_shows_without_them(
    page, dashboard: Dashboard
) -> None:
    study_id = add_study(dashboard, GOOD[:3])
    add_failed_trial(
        dashboard,
        study_id,
        3,
        error="\x1b[31mValueError: tiny task refuses mode=raise\x1b[0m",
        traceback=RAY_TRACEBACK,
    )
    open_ready(page, f"/dashboard/studies/{study_id}/trials/3")
    page.click("#folds details summary")
    trace = page.inner_text("#folds pre.trace")
    assert trace.startswith("ray::DDPWorker.run() (pid=9247")
    shown = page.inner_text("main")
    assert "\x1b" not in shown and "[36m" not in shown and "[0m" not in shown
    assert page.inner_text("#folds .error-text") == "ValueError: tiny task refuses mode=raise"
    assert page.inner_text("#trial-error") == "fold 0: ValueError: tiny task refuses mode=raise"


def test_a_trial_that_failed_before_its_first_epoch_says_so(page, dashboard: Dashboard) -> None:
    study_id = add_study(dashboard, GOOD[:3])
    error = "TrainingDiverged: train loss became nan at epoch 1"
    add_failed_trial(dashboard, study_id, 3, error=error)
    open_ready(page, f"/dashboard/studies/{study_id}/trials/3")
    assert page.inner_text("#plot-curves .empty") == (
        "This trial reported no epochs: it failed before any fold finished an epoch "
        f"(fold 0: {error})."
    )
    assert page.locator("#metric").is_hidden()  # no metric to choose
    assert page.locator("#curves-tools").is_hidden()


def test_a_trial_with_epochs_lists_its_metrics_and_draws_them(page, dashboard: Dashboard) -> None:
    """The best trial of the generated study: three folds of five epochs, six metrics."""
    api = TestClient(dashboard.app, base_url="http://127.0.0.1", headers=dashboard.headers)
    best = api.get(f"/studies/{dashboard.study_id}").json()["best_trial"]["number"]
    open_ready(page, f"/dashboard/studies/{dashboard.study_id}/trials/{best}")
    options = page.locator("#metric option").all_inner_texts()
    assert options == [
        "epoch_seconds",
        "lr",
        "samples_per_second",
        "train_loss",
        "val_accuracy",
        "val_loss",
    ]  # numbers per epoch; not the epoch itself
    assert page.input_value("#metric") == "val_loss"  # the objective first
    curves = page.evaluate("document.getElementById('plot-curves').data")
    assert len(curves) >= FOLDS and max(len(c["y"]) for c in curves) == 5
    page.select_option("#metric", "val_accuracy")
    wait_until(
        page, "document.getElementById('plot-curves').layout.yaxis.title.text === 'val_accuracy'"
    )
    page.check("#curves-log")
    wait_until(page, "document.getElementById('plot-curves').layout.yaxis.type === 'log'")
    assert page.locator("#plot-curves .empty").count() == 0


def test_running_and_pending_trials_without_epochs_say_what_they_wait_for(
    page, dashboard: Dashboard
) -> None:
    study_id = add_study(dashboard, GOOD[:3], running=1)
    open_ready(page, f"/dashboard/studies/{study_id}/trials/3")
    assert page.inner_text("#plot-curves .empty") == (
        "No epoch reported yet: the folds are training their first epoch."
    )
    with dashboard.app.state.sessions.begin() as session:
        trial = trial_repo.create_trial(session, study_id, {"lr": 0.01}, number=4)
        trial.status = TrialStatus.PENDING
        trial.started_at = None
        study_repo.touch_study(session, study_id)
    open_ready(page, f"/dashboard/studies/{study_id}/trials/4")
    assert page.inner_text("#plot-curves .empty") == "This trial has not started yet."
