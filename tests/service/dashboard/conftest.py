"""Real headless Chromium (Debian's, driven by Playwright) against the real app on SQLite.

The browser tests skip when ``/usr/bin/chromium`` is missing (``make browser`` installs it),
except under ``CI=true``, where a missing browser is an error.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from foldwise.schemas import Role
from foldwise.service.app import create_app
from foldwise.service.config import Settings
from foldwise.service.token_admin import create_token
from tests.browser import CHROMIUM, CHROMIUM_ARGS, require_chromium, sign_in
from tests.databases import bring_to_head
from tests.large_study import fill_study
from tests.served_app import serve

TRIALS, FOLDS, EPOCHS, RUNNING = 40, 3, 5, 2


@pytest.fixture(scope="package")
def browser() -> Iterator[object]:
    """One Chromium for this package's tests. Not session-wide: Playwright's sync API keeps its
    event loop installed as the thread's running loop while it is open, which would break every
    later test that calls ``asyncio.run``."""
    require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@dataclass
class Dashboard:
    """A served app, its sessions, one filled study, and an admin token."""

    url: str
    app: object
    study_id: int
    token: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


@pytest.fixture
def dashboard(tmp_path: Path) -> Iterator[Dashboard]:
    url = f"sqlite:///{tmp_path / 'dashboard.db'}"
    bring_to_head(url)
    token = create_token(url, "admin", Role.ADMIN)
    app = create_app(Settings(database_url=url, upgrade_db=True, scheduler_enabled=False))
    with serve(app) as base:
        study_id = fill_study(
            app.state.engine,
            trials=TRIALS,
            folds=FOLDS,
            epochs=EPOCHS,
            running=RUNNING,
            failure_rate=0.1,
        )
        yield Dashboard(base, app, study_id, token)


@dataclass
class Console:
    """Console errors and uncaught exceptions of a page; the fixture fails the test on any."""

    errors: list[str] = field(default_factory=list)
    allowed: list[str] = field(default_factory=list)

    def allow(self, fragment: str) -> None:
        """Chromium logs every non-2xx fetch; a test expecting one (a 422) says so here."""
        self.allowed.append(fragment)

    def unexpected(self) -> list[str]:
        return [e for e in self.errors if not any(a in e for a in self.allowed)]


@pytest.fixture
def page(browser, dashboard: Dashboard) -> Iterator[object]:
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, base_url=dashboard.url)
    sign_in(context, dashboard.url, dashboard.token)
    page = context.new_page()
    console = Console()
    page.on("console", lambda m: m.type == "error" and console.errors.append(m.text))
    page.on("pageerror", lambda exc: console.errors.append(str(exc)))
    page.on("dialog", lambda dialog: dialog.accept())
    page.set_default_timeout(15_000)
    page.console = console
    yield page
    context.close()
    assert console.unexpected() == [], f"console errors: {console.errors}"


def open_ready(page, path: str) -> None:
    """Open a dashboard page and wait until its first render has finished."""
    page.goto(path)
    page.wait_for_selector("body[data-ready=true]")
