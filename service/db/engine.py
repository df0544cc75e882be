"""Engines, session factories and the bounded way into the database for async code.

Async code (the API's routes, the scheduler) never holds a session across an ``await``: it hands
a unit of work to ``SessionRunner``, which runs it in one short session on a worker thread. At
most ``limit`` units run at once and the engine's pool has a connection for each, so no thread
ever waits for a connection while holding one, and a burst of requests queues on the event loop
(cheap) instead of in threads that hold pooled connections (the convoy that wedged the service).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import anyio
from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from foldwise.service.metrics import DB_COMMITS

T = TypeVar("T")


def make_engine(url: str, **kwargs: Any) -> Engine:
    """Create an engine; SQLite gets WAL, a busy timeout and enforced foreign keys."""
    if make_url(url).get_backend_name() != "sqlite":
        return create_engine(url, pool_pre_ping=True, **kwargs)
    engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30}, **kwargs)
    event.listen(engine, "connect", _configure_sqlite)
    return engine


def _configure_sqlite(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


def make_session_factory(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)


class SessionRunner:
    """Runs units of work ``work(session)`` in worker threads, each in its own short session,
    on its own engine whose pool holds a connection for each of the ``limit`` at once.

    ``read`` closes the session without committing; ``write`` commits when ``work`` returns and
    rolls back when it raises.
    """

    def __init__(self, url: str, limit: int, *, lane: str = "api") -> None:
        self.engine = make_engine(url, pool_size=limit, max_overflow=0, pool_timeout=30)
        self.sessions = make_session_factory(self.engine)
        self.limiter = anyio.CapacityLimiter(limit)
        self.lane = lane
        """Whose work this is (``api``, ``scheduler``, ``lease``, ``reports``): the label of
        its commits in ``foldwise_db_commits_total``."""

    async def read(self, work: Callable[[Session], T]) -> T:
        return await anyio.to_thread.run_sync(self._read, work, limiter=self.limiter)

    async def write(self, work: Callable[[Session], T]) -> T:
        return await anyio.to_thread.run_sync(self._write, work, limiter=self.limiter)

    async def connect(self, work: Callable[[Connection], T]) -> T:
        """Run ``work`` on a bare connection (no ORM session: a third of the cost for a small
        Core query); ``Session(bind=connection)`` reads more in the same transaction."""
        return await anyio.to_thread.run_sync(self._connect, work, limiter=self.limiter)

    def _read(self, work: Callable[[Session], T]) -> T:
        with self.sessions() as session:
            return work(session)

    def _write(self, work: Callable[[Session], T]) -> T:
        with self.sessions.begin() as session:
            result = work(session)
        DB_COMMITS.labels(self.lane).inc()
        return result

    def _connect(self, work: Callable[[Connection], T]) -> T:
        with self.engine.connect() as connection:
            return work(connection)
