"""Fixtures for the API: the real app on a real database, with the scheduler off."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from service.config import Settings


@pytest.fixture
def api(database_url: str) -> Iterator[TestClient]:
    settings = Settings(database_url=database_url, upgrade_db=True, scheduler_enabled=False)
    with TestClient(create_app(settings)) as client:
        yield client
