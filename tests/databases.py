"""The tests' databases, made cheaply: most API tests want a fresh one.

- PostgreSQL: ``CREATE DATABASE`` copies and syncs a template, slower than many a test, so a
  test process keeps one database of its own and empties it for each test (the other sessions
  on it ended, every schema dropped, ``public`` made again), dropping it when the session ends.
  Its role must own ``public`` (any role on PostgreSQL 15 and later, which made it the
  database owner's).
- Migrating: ``bring_to_head`` copies a SQLite file this process migrated once, and gives the
  emptied PostgreSQL database the schema ``pg_dump`` read from it after its first migration
  (where ``pg_dump`` is installed), instead of running every Alembic migration again.
  ``tests/service/test_db_schema.py`` runs the migrations themselves.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy.engine import make_url

from tests.live_service import postgres_connect, postgres_url

if TYPE_CHECKING:
    import psycopg

_sqlite_template: Path | None = None
_postgres_name: str | None = None
_postgres_schema: str | None = None
"""The SQL of the migrated schema of ``_postgres_name``; "" where pg_dump could not give it."""


def empty_postgres_database() -> str:
    """This process's PostgreSQL database, emptied, as a SQLAlchemy URL
    (``PostgresUnavailable`` without a server)."""
    global _postgres_name
    with postgres_connect() as admin:
        if _postgres_name is None:
            name = f"foldwise_test_{uuid.uuid4().hex[:12]}"
            admin.execute(f'CREATE DATABASE "{name}"')
            atexit.register(_drop, name)  # in case the session's end is never reached
            _postgres_name = name
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid()",
            (_postgres_name,),
        )
    with _connect_ours() as conn:
        schemas = conn.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname NOT LIKE 'pg\\_%' "
            "AND nspname <> 'information_schema'"
        ).fetchall()
        for (schema,) in schemas:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
        conn.execute("CREATE SCHEMA public")
    return postgres_url(_postgres_name)


def bring_to_head(url: str) -> None:
    """What ``upgrade_database(url)`` does; a SQLite file that does not exist yet becomes a
    copy of one this process migrated, and this process's emptied PostgreSQL database gets the
    schema its first migration made."""
    global _postgres_schema
    parsed = make_url(url)
    sqlite = parsed.get_backend_name() == "sqlite" and parsed.database
    if sqlite and not Path(parsed.database).exists():
        shutil.copyfile(_sqlite(), parsed.database)
        return
    ours = _postgres_name is not None and parsed.database == _postgres_name
    empty = ours and _postgres_schema != "" and _postgres_is_empty()
    if empty and _postgres_schema and _restore_schema(_postgres_schema):
        return
    _upgrade(url)
    if empty and _postgres_schema is None:
        _postgres_schema = _dump_schema()


def _postgres_is_empty() -> bool:
    """Whether this process's PostgreSQL database holds no table."""
    with _connect_ours() as conn:
        row = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone()
    return row is not None and row[0] == 0


def _restore_schema(sql: str) -> bool:
    """Run the dumped schema's ``sql`` in this process's empty database, all of it or none;
    False (and the dump is no longer used) when the server refuses it."""
    global _postgres_schema
    import psycopg

    try:
        with _connect_ours() as conn, conn.transaction():
            conn.execute(sql)
    except psycopg.Error:  # a pg_dump whose SQL this server does not take
        _postgres_schema = ""
        return False
    return True


def _dump_schema() -> str:
    """The SQL that makes this process's PostgreSQL database again as it is now, without
    pg_dump's client commands (lines of psql's backslash commands); "" without pg_dump."""
    url = make_url(postgres_url(_postgres_name, driver="postgresql"))
    args = ["--no-owner", "--no-privileges", "--no-comments", "--inserts"]
    where = ["-h", url.host or "127.0.0.1", "-p", str(url.port or 5432)]
    try:
        done = subprocess.run(
            ["pg_dump", *args, *where, "-U", url.username or "postgres", _postgres_name],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PGPASSWORD": url.password or ""},
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    if done.returncode != 0:
        return ""
    return "\n".join(line for line in done.stdout.splitlines() if not line.startswith("\\"))


def _sqlite() -> Path:
    """This process's migrated SQLite file (checkpointed: its engines are disposed)."""
    global _sqlite_template
    if _sqlite_template is None:
        path = Path(tempfile.mkdtemp(prefix="foldwise-template-")) / "template.db"
        _upgrade(f"sqlite:///{path}")
        atexit.register(shutil.rmtree, path.parent, ignore_errors=True)
        _sqlite_template = path
    return _sqlite_template


def drop_postgres_database() -> None:
    """Drop this process's PostgreSQL database, if it made one (at the session's end)."""
    global _postgres_name, _postgres_schema
    if _postgres_name is not None:
        _drop(_postgres_name)
        _postgres_name = _postgres_schema = None


def _upgrade(url: str) -> None:
    from foldwise.service.db.schema import upgrade_database

    upgrade_database(url)


def _connect_ours() -> psycopg.Connection:
    return postgres_connect(postgres_url(_postgres_name, driver="postgresql"))


def _drop(name: str) -> None:
    try:
        with postgres_connect() as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    except Exception:  # the server may be gone at exit: nothing is left to drop then
        pass
