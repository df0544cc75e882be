"""Screenshots of every dashboard page for docs/screenshots/, from a generated study.

Run: `.venv/bin/python -m tests.service.dashboard.screenshots [--trials 1000] [--out DIR]`.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from foldwise.schemas import Role
from foldwise.service.app import create_app
from foldwise.service.config import Settings
from foldwise.service.db.schema import upgrade_database
from foldwise.service.token_admin import create_token
from tests.browser import CHROMIUM, CHROMIUM_ARGS, sign_in
from tests.large_study import fill_study
from tests.served_app import serve
from tests.service.dashboard.studies import DIVERGED

ROOT = Path(__file__).resolve().parents[3]
BAD_SPEC = """name: typo
objective: {metric: val_loss, direction: minimise}
space:
  lr: {type: float, low: 0.3, high: 1.0e-4, log: true}
optimizer: {name: random}
budget: {trials: 20}
"""


def capture(trials: int, out: Path) -> list[Path]:
    """Fill a SQLite study, serve it, and save a PNG of each page; return the paths."""
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'shots.db'}"
        upgrade_database(url)
        token = create_token(url, "screenshots", Role.ADMIN)
        app = create_app(Settings(database_url=url, upgrade_db=True, scheduler_enabled=False))
        with serve(app) as base, sync_playwright() as playwright:
            study_id = fill_study(app.state.engine, trials=trials, folds=5, epochs=20)
            _diverge(app, study_id)
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            context = browser.new_context(viewport={"width": 1400, "height": 900}, base_url=base)
            sign_in(context, base, token)
            page = context.new_page()
            headers = {"Authorization": f"Bearer {token}"}
            shots = [
                _shot(page, "/dashboard", out / "studies.png"),
                _submit_error(page, out / "submit-error.png"),
                _shot(page, f"/dashboard/studies/{study_id}", out / "study.png", full=True),
                _shot(
                    page,
                    _trial_path(app, headers, study_id, "completed"),
                    out / "trial.png",
                    full=True,
                ),
                _shot(
                    page,
                    _trial_path(app, headers, study_id, "failed"),
                    out / "trial-failed.png",
                    full=True,
                ),
            ]
            browser.close()
    return shots


def _shot(page, path: str, file: Path, *, full: bool = False) -> Path:
    page.goto(path)
    page.wait_for_selector("body[data-ready=true]")
    page.evaluate("document.querySelectorAll('#folds details').forEach(d => { d.open = true; })")
    page.wait_for_timeout(300)  # let Plotly finish its transitions
    page.screenshot(path=str(file), full_page=full)
    return file


def _submit_error(page, file: Path) -> Path:
    page.goto("/dashboard")
    page.wait_for_selector("body[data-ready=true]")
    page.click("#submit summary")
    page.fill("#spec", BAD_SPEC)
    page.click("#submit-spec")
    page.wait_for_selector("#spec-errors li")
    page.screenshot(path=str(file), full_page=True)
    return file


def _diverge(app, study_id: int) -> None:
    """One completed trial diverged, as happens in a real search: the plots keep it on the edge."""
    from foldwise.schemas import TrialStatus
    from foldwise.service.db import studies as study_repo
    from foldwise.service.db import trials as trial_repo

    with app.state.sessions.begin() as session:
        completed = TrialStatus.COMPLETED
        rows, _ = trial_repo.list_trials(session, study_id, status=completed, limit=1, offset=50)
        for row in rows:
            row.value = DIVERGED
        study_repo.touch_study(session, study_id)


def _trial_path(app, headers: dict[str, str], study_id: int, status: str) -> str:
    from fastapi.testclient import TestClient

    client = TestClient(app, base_url="http://127.0.0.1", headers=headers)
    params = {"status": status, "sort": "best", "limit": 1}
    number = client.get(f"/studies/{study_id}/trials", params=params).json()["data"][0]["number"]
    return f"/dashboard/studies/{study_id}/trials/{number}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    args = parser.parse_args()
    for path in capture(args.trials, args.out):
        print(path)


if __name__ == "__main__":
    main()
