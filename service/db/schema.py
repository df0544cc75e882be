"""Schema versions: upgrade a database with Alembic, and refuse to run on an outdated one."""

from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

from foldwise.service.db.engine import make_engine


def _migrations_dir() -> Path:
    """The Alembic folder (foldwise.migrations), found without importing it: its environment
    imports the models, so importing it here would make the two import each other."""
    spec = find_spec("foldwise.migrations")
    assert spec is not None and spec.submodule_search_locations, "foldwise.migrations is missing"
    return Path(next(iter(spec.submodule_search_locations)))


MIGRATIONS_DIR = _migrations_dir()


class OutdatedSchema(RuntimeError):
    """The database's schema is not the one this version of foldwise needs."""


def alembic_config(url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()
    assert head is not None, "migrations/versions holds no revision"
    return head


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def upgrade_database(url: str) -> str:
    """Bring the database at ``url`` to the newest schema; returns the revision now at head."""
    command.upgrade(alembic_config(url), "head")
    engine = make_engine(url)
    try:
        return current_revision(engine) or ""
    finally:
        engine.dispose()


def check_schema(engine: Engine) -> None:
    """Raise ``OutdatedSchema`` with a one-line explanation unless the database is at head."""
    current, head = current_revision(engine), head_revision()
    if current == head:
        return
    where = engine.url.render_as_string(hide_password=True)
    found = f"is at revision {current}" if current else "has no foldwise schema"
    raise OutdatedSchema(
        f"the database {where} {found}; this foldwise needs {head}: "
        "run `foldwise db upgrade` (or start with --upgrade-db)"
    )


def prepare_database(url: str, *, upgrade: bool) -> None:
    """Upgrade the schema when asked to, then insist it is current (``OutdatedSchema`` if not)."""
    if upgrade:
        upgrade_database(url)
    engine = make_engine(url)
    try:
        check_schema(engine)
    finally:
        engine.dispose()
