"""Shared fixtures: a database URL for every backend (SQLite file and a real PostgreSQL)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

POSTGRES_ADMIN_URL = os.environ.get(
    "FOLDWISE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)


def _postgres_database() -> Iterator[str]:
    """Create a throw-away PostgreSQL database and drop it afterwards."""
    import psycopg

    name = f"foldwise_test_{uuid.uuid4().hex[:12]}"
    try:
        admin = psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        if os.environ.get("CI") == "true":
            raise RuntimeError(f"CI needs PostgreSQL at {POSTGRES_ADMIN_URL}: {exc}") from exc
        pytest.skip(f"no PostgreSQL at {POSTGRES_ADMIN_URL} (set FOLDWISE_TEST_POSTGRES_URL)")
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
        try:
            base = POSTGRES_ADMIN_URL.rsplit("/", 1)[0].replace(
                "postgresql://", "postgresql+psycopg://"
            )
            yield f"{base}/{name}"
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path) -> Iterator[str]:
    """An empty database on each backend the service supports."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'foldwise.db'}"
    else:
        yield from _postgres_database()
