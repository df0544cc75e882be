"""Shared fixtures: a database URL for every backend (SQLite file and a real PostgreSQL), and
the live service some live test files share (tests/shared_service.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.databases import drop_postgres_database, empty_postgres_database
from tests.live_service import PostgresUnavailable

pytest_plugins = ["tests.shared_service"]


def _postgres_database() -> Iterator[str]:
    """An empty PostgreSQL database (this test process's own, emptied: tests/databases.py);
    skipped without a server, except under CI."""
    try:
        yield empty_postgres_database()
    except PostgresUnavailable as exc:
        if os.environ.get("CI") == "true":
            raise RuntimeError(f"CI needs PostgreSQL: {exc}") from exc
        pytest.skip(f"{exc} (set FOLDWISE_TEST_POSTGRES_URL)")


@pytest.fixture(scope="session", autouse=True)
def _drop_the_postgres_database() -> Iterator[None]:
    """The PostgreSQL database this test process kept (tests/databases.py) goes at its end."""
    yield
    drop_postgres_database()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path) -> Iterator[str]:
    """An empty database on each backend the service supports."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'foldwise.db'}"
    else:
        yield from _postgres_database()


@pytest.fixture(autouse=True)
def _no_saved_credentials(tmp_path_factory: pytest.TempPathFactory, monkeypatch) -> None:
    """Tests never read this machine's saved tokens or FOLDWISE_TOKEN."""
    monkeypatch.setenv("FOLDWISE_CREDENTIALS", str(tmp_path_factory.mktemp("cred") / "c.json"))
    monkeypatch.delenv("FOLDWISE_TOKEN", raising=False)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Files with slow tests first, each file's tests in their order: ``make test`` gives a
    worker process a file at a time (pytest-xdist, tests/shared_service.py), so the long
    live tests start at once and the quick files fill the gaps, instead of one live file
    starting last."""
    slow = {item.path for item in items if item.get_closest_marker("slow") is not None}
    items.sort(key=lambda item: item.path not in slow)
