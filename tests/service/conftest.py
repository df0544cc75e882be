"""Fixtures for the API: the real app on a real database, with the scheduler off."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from foldwise.schemas import Role
from foldwise.service.app import create_app
from foldwise.service.config import Settings
from foldwise.service.db.engine import SessionRunner
from foldwise.service.token_admin import create_token
from tests.databases import bring_to_head


def signed_in_client(
    database_url: str,
    role: Role = Role.ADMIN,
    *,
    client_address: tuple[str, int] = ("127.0.0.1", 50000),
    **settings: Any,
) -> TestClient:
    """A TestClient of the real app (scheduler off unless ``settings`` say otherwise) whose
    requests carry a token of ``role``, named after the role, and come from
    ``client_address``; enter it to start the app."""
    scratch = Path(tempfile.mkdtemp(prefix="foldwise-test-"))  # nothing lands in the checkout
    settings = {
        "scheduler_enabled": False,
        "artifact_dir": scratch / "artifacts",
        "code_cache_dir": scratch / "code",
        **settings,
    }
    config = Settings(
        database_url=database_url,
        upgrade_db=True,
        allowed_hosts=["testserver", "127.0.0.1", "localhost"],
        **settings,
    )
    bring_to_head(database_url)
    client = TestClient(create_app(config), client=client_address)
    token = create_token(database_url, role.value, role, replace=True) if config.auth else ""
    if token:
        client.headers["Authorization"] = f"Bearer {token}"
    return client


@pytest.fixture
def api(database_url: str) -> Iterator[TestClient]:
    """The API as an admin sees it."""
    with signed_in_client(database_url) as client:
        yield client


@pytest.fixture
def lanes(database_url: str) -> Iterator[tuple[SessionRunner, SessionRunner]]:
    """The scheduler's two lanes on a migrated, empty database on each backend: its control
    lane and the lane its batches of fold reports go on."""
    bring_to_head(database_url)
    control = SessionRunner(database_url, 4, lane="scheduler")
    reports = SessionRunner(database_url, 1, lane="reports")
    yield control, reports
    for runner in (control, reports):
        runner.engine.dispose()


@pytest.fixture
def db(database_url: str) -> Iterator[SessionRunner]:
    """A migrated, empty database on each backend, as the scheduler's session runner."""
    bring_to_head(database_url)
    runner = SessionRunner(database_url, limit=2)
    yield runner
    runner.engine.dispose()
