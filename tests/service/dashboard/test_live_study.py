"""A study really running on the service (Ray, DDP folds): the page follows it, then stops it."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.browser import sign_in, wait_until
from tests.live_service import LiveService
from tests.service.study_specs import study_spec

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def service(shared_service: LiveService) -> LiveService:
    return shared_service


def _spec() -> dict:
    return study_spec(
        name="live-dashboard",
        space={"lr": {"type": "float", "low": 1e-3, "high": 1e-1, "log": True}},
        optimizer={"name": "random", "seed": 2},
        budget={"trials": 200},
        parallel={"trial_groups": 1, "folds": 2, "workers_per_fold": 1},
        resources={"cpus_per_worker": 0.5},
        trainer={"task": "tests.user_tasks.tiny:task", "epochs": 3, "batch_size": 32},
    )


def test_running_study_updates_live_and_the_stop_button_stops_it(
    browser, service: LiveService, tmp_path: Path
) -> None:
    study = httpx.post(
        f"{service.url}/studies", json=_spec(), headers=service.headers, timeout=30
    ).json()
    context = browser.new_context(base_url=service.url)
    sign_in(context, service.url, service.token)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda m: m.type == "error" and errors.append(m.text))
    page.on("dialog", lambda dialog: dialog.accept())
    page.goto(f"/dashboard/studies/{study['id']}")
    page.wait_for_selector("body[data-ready=true]")
    shown = "(document.getElementById('plot-history').data?.[0]?.x?.length ?? 0)"
    at_load = page.evaluate(shown)
    wait_until(page, f"{shown} > {at_load}", timeout=180_000)  # arrived by polling
    page.click("#stop")
    page.wait_for_selector("#study-status .badge.stopped", timeout=120_000)
    context.close()
    final = httpx.get(
        f"{service.url}/studies/{study['id']}", headers=service.headers, timeout=30
    ).json()
    assert final["status"] == "stopped" and final["progress"]["finished"] < 200
    assert errors == [], errors
