"""The tests' databases, made cheaply: most API tests want a fresh one.

- PostgreSQL: ``CREATE DATABASE`` takes about 0.3 s (it copies and syncs a template), so a test
  process keeps one database of its own and empties it for each test (the other sessions on it
  ended, every schema dropped, ``public`` made again: a few milliseconds), dropping it when the
  process ends.
- SQLite: running every Alembic migration takes 0.1-0.3 s, so ``bring_to_head`` copies a file
  this process migrated once. ``tests/service/test_db_schema.py`` runs the migrations themselves.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
import uuid
from pathlib import Path

from sqlalchemy.engine import make_url

from foldwise.service.db.schema import upgrade_database
from tests.live_service import POSTGRES_ADMIN_URL, PostgresUnavailable

_sqlite_template: Path | None = None
_postgres_name: str | None = None


def empty_postgres_database() -> str:
    """This process's PostgreSQL database, emptied, as a SQLAlchemy URL
    (``PostgresUnavailable`` without a server)."""
    global _postgres_name
    import psycopg

    try:
        admin = _connect(POSTGRES_ADMIN_URL)
    except psycopg.OperationalError as exc:
        raise PostgresUnavailable(f"no PostgreSQL at {POSTGRES_ADMIN_URL}: {exc}") from exc
    with admin:
        if _postgres_name is None:
            name = f"foldwise_test_{uuid.uuid4().hex[:12]}"
            admin.execute(f'CREATE DATABASE "{name}"')
            atexit.register(_drop, name)
            _postgres_name = name
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid()",
            (_postgres_name,),
        )
    with _connect(_database_url(_postgres_name, driver="postgresql")) as conn:
        schemas = conn.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname NOT LIKE 'pg\\_%' "
            "AND nspname <> 'information_schema'"
        ).fetchall()
        for (schema,) in schemas:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
        conn.execute("CREATE SCHEMA public")
    return _database_url(_postgres_name, driver="postgresql+psycopg")


def bring_to_head(url: str) -> None:
    """What ``upgrade_database(url)`` does; a SQLite file that does not exist yet becomes a
    copy of one this process migrated."""
    parsed = make_url(url)
    sqlite = parsed.get_backend_name() == "sqlite" and parsed.database
    if sqlite and not Path(parsed.database).exists():
        shutil.copyfile(_sqlite(), parsed.database)
    else:
        upgrade_database(url)


def _sqlite() -> Path:
    """This process's migrated SQLite file (checkpointed: its engines are disposed)."""
    global _sqlite_template
    if _sqlite_template is None:
        path = Path(tempfile.mkdtemp(prefix="foldwise-template-")) / "template.db"
        upgrade_database(f"sqlite:///{path}")
        atexit.register(shutil.rmtree, path.parent, ignore_errors=True)
        _sqlite_template = path
    return _sqlite_template


def _connect(url: str):  # noqa: ANN202 - psycopg is imported only where PostgreSQL is used
    import psycopg

    return psycopg.connect(url, autocommit=True, connect_timeout=5)


def _database_url(name: str, driver: str) -> str:
    return (
        f"{POSTGRES_ADMIN_URL.rsplit('/', 1)[0].replace('postgresql://', f'{driver}://')}/{name}"
    )


def _drop(name: str) -> None:
    try:
        with _connect(POSTGRES_ADMIN_URL) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    except Exception:  # noqa: BLE001 - the server may be gone at exit; nothing to keep then
        pass
