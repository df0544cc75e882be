"""Alembic environment: the URL comes from the caller's config or FOLDWISE_DATABASE_URL."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from foldwise.service.config import get_settings
from foldwise.service.db.engine import make_engine
from foldwise.service.db.models import Base

config = context.config
target_metadata = Base.metadata


def _url() -> str:
    return config.get_main_option("sqlalchemy.url") or get_settings().database_url


def _configure(**kwargs: object) -> None:
    context.configure(
        target_metadata=target_metadata,
        render_as_batch=True,
        compare_type=True,
        **kwargs,
    )


def run_offline() -> None:
    _configure(url=_url(), literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    connection: Connection | None = config.attributes.get("connection")
    if connection is not None:
        _run_with(connection)
        return
    engine = make_engine(_url())
    try:
        with engine.connect() as conn:
            _run_with(conn)
    finally:
        engine.dispose()


def _run_with(connection: Connection) -> None:
    # SQLite rebuilds a table to alter it (copy, drop, rename): with foreign keys enforced, the
    # drop would cascade into the child tables. The pragma only takes outside a transaction.
    sqlite = connection.dialect.name == "sqlite"
    if sqlite:
        connection.exec_driver_sql("PRAGMA foreign_keys=OFF")
        connection.commit()
    try:
        _configure(connection=connection)
        with context.begin_transaction():
            context.run_migrations()
    finally:
        if sqlite:
            connection.exec_driver_sql("PRAGMA foreign_keys=ON")
            connection.commit()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
