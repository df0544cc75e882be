"""The scheduler's lease: one row per lease name, taken and renewed by compare-and-swap updates
against the database's own clock, so the service instances' clocks never matter."""

from __future__ import annotations

from sqlalchemy import BigInteger, Integer, bindparam, cast, func, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from foldwise.service.db.models import SchedulerLeaseRow, utcnow


def db_now_ms(session: Session) -> ColumnElement[int]:
    """The database's current time in milliseconds since the epoch, as an SQL expression."""
    if session.get_bind().dialect.name == "sqlite":
        return cast((func.julianday("now") - 2440587.5) * 86_400_000.0, Integer)
    return cast(func.extract("epoch", func.clock_timestamp()) * 1000, BigInteger)


def ensure_lease(session: Session, name: str) -> None:
    """Create the lease's row, free, unless it exists (in a savepoint: a racing instance may
    create it first)."""
    if session.get(SchedulerLeaseRow, name) is not None:
        return
    try:
        with session.begin_nested():
            session.execute(
                insert(SchedulerLeaseRow).values(
                    name=name, holder="", epoch=0, expires_ms=0, acquired_at=utcnow()
                )
            )
    except IntegrityError:
        pass


def take_lease(session: Session, name: str, holder: str, ttl_ms: int) -> int | None:
    """Take the lease if it has expired: its new epoch, else None."""
    now = db_now_ms(session)
    result = session.execute(
        update(SchedulerLeaseRow)
        .where(SchedulerLeaseRow.name == name, SchedulerLeaseRow.expires_ms < now)
        .values(
            holder=holder,
            epoch=SchedulerLeaseRow.epoch + 1,
            expires_ms=now + ttl_ms,
            acquired_at=utcnow(),
        )
        .execution_options(synchronize_session=False)
    )
    if result.rowcount != 1:
        return None
    return session.scalar(select(SchedulerLeaseRow.epoch).where(SchedulerLeaseRow.name == name))


def renew_lease(session: Session, name: str, holder: str, epoch: int, ttl_ms: int) -> bool:
    """Push the lease's expiry on, if ``holder`` still holds it at ``epoch``."""
    return _update_held(session, name, holder, epoch, {"expires_ms": db_now_ms(session) + ttl_ms})


def release_lease(session: Session, name: str, holder: str, epoch: int) -> bool:
    """Let the lease expire now, so another instance takes it at once."""
    return _update_held(session, name, holder, epoch, {"expires_ms": 0})


_LEASES = SchedulerLeaseRow.__table__.c
_HELD = (
    _LEASES.name == bindparam("lease_name"),
    _LEASES.holder == bindparam("lease_holder"),
    _LEASES.epoch == bindparam("lease_epoch"),
)
_SHARE_HELD = select(_LEASES.epoch).where(*_HELD).with_for_update(read=True)
_LOCK_HELD = (
    update(SchedulerLeaseRow.__table__).where(*_HELD).values(epoch=bindparam("lease_epoch"))
)
"""The fence's statements, built once: every scheduler transaction runs one."""


def fence(session: Session, name: str, holder: str, epoch: int) -> bool:
    """Whether ``holder`` still holds the lease at ``epoch``, checked so that no change of hands
    can happen between this check and the commit of the caller's transaction. PostgreSQL:
    a share lock on the row (``FOR SHARE``), which a take-over's update waits for, while the
    scheduler's transactions never wait for one another. SQLite: an update of the row, which
    takes the database's one write lock at once (its writers take turns anyway)."""
    connection = session.connection()
    held = {"lease_name": name, "lease_holder": holder, "lease_epoch": epoch}
    if connection.dialect.name == "sqlite":
        return connection.execute(_LOCK_HELD, held).rowcount == 1
    return connection.execute(_SHARE_HELD, held).first() is not None


def lease_holder(session: Session, name: str) -> tuple[str, int, int] | None:
    """(holder, epoch, milliseconds left) of the lease, or None when it was never taken."""
    query = select(
        SchedulerLeaseRow.holder,
        SchedulerLeaseRow.epoch,
        SchedulerLeaseRow.expires_ms - db_now_ms(session),
    ).where(SchedulerLeaseRow.name == name)
    row = session.execute(query).first()
    return None if row is None else (row[0], int(row[1]), int(row[2]))


def _update_held(
    session: Session, name: str, holder: str, epoch: int, values: dict[str, object]
) -> bool:
    result = session.execute(
        update(SchedulerLeaseRow)
        .where(
            SchedulerLeaseRow.name == name,
            SchedulerLeaseRow.holder == holder,
            SchedulerLeaseRow.epoch == epoch,
        )
        .values(values)
        .execution_options(synchronize_session=False)
    )
    return result.rowcount == 1
