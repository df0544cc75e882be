"""The scheduler's lease on each backend: one holder at a time, taken over only once expired,
and a holder that lost it has its writes refused."""

from __future__ import annotations

import asyncio
import time

import pytest

from foldwise.service.db import leases
from foldwise.service.db.engine import SessionRunner
from foldwise.service.scheduler.lease import LeaseLost, SchedulerLease
from tests.databases import bring_to_head

NAME = "scheduler"


def _write(db: SessionRunner, work):
    return db._write(work)


def _take(db: SessionRunner, holder: str, ttl_ms: int) -> int | None:
    def work(session):
        leases.ensure_lease(session, NAME)
        return leases.take_lease(session, NAME, holder, ttl_ms)

    return _write(db, work)


def test_one_holder_until_the_lease_expires(db: SessionRunner) -> None:
    assert _take(db, "a", 300) == 1
    assert _take(db, "b", 300) is None  # held by a
    assert _write(db, lambda s: leases.renew_lease(s, NAME, "a", 1, 300))
    assert not _write(db, lambda s: leases.renew_lease(s, NAME, "b", 1, 300))
    assert _write(db, lambda s: leases.fence(s, NAME, "a", 1))
    holder, epoch, left_ms = db._read(lambda s: leases.lease_holder(s, NAME))
    assert (holder, epoch) == ("a", 1) and 0 < left_ms <= 300

    time.sleep(0.4)  # a stops renewing: the lease expires, b takes it with the next epoch
    assert _take(db, "b", 300) == 2
    assert not _write(db, lambda s: leases.renew_lease(s, NAME, "a", 1, 300))
    assert not _write(db, lambda s: leases.fence(s, NAME, "a", 1))
    assert _write(db, lambda s: leases.fence(s, NAME, "b", 2))


def test_a_released_lease_is_taken_at_once(db: SessionRunner) -> None:
    assert _take(db, "a", 60_000) == 1
    assert not _write(db, lambda s: leases.release_lease(s, NAME, "b", 1))  # not b's to give
    assert _take(db, "b", 60_000) is None
    assert _write(db, lambda s: leases.release_lease(s, NAME, "a", 1))
    assert _take(db, "b", 60_000) == 2


def test_an_instance_that_lost_the_lease_cannot_write(database_url: str) -> None:
    bring_to_head(database_url)

    async def scenario() -> None:
        first = SchedulerLease(SessionRunner(database_url, 1), ttl_seconds=0.3, holder="first")
        second = SchedulerLease(SessionRunner(database_url, 1), ttl_seconds=0.3, holder="second")
        try:
            assert await first.hold()
            assert not await second.hold()
            assert (await second.describe())["holder"] == "first"
            await asyncio.sleep(0.5)  # first pauses past its expiry: second takes over
            assert await second.hold()
            with pytest.raises(LeaseLost):
                first.db._write(first.fence)
            assert first.epoch is None  # it knows, and stops scheduling at once
            assert not await first.hold()  # the lease is second's: not taken back
            second.db._write(second.fence)  # the holder's writes go through
            await second.release()
            assert await first.hold()
        finally:
            for lease in (first, second):
                lease.db.engine.dispose()

    asyncio.run(scenario())
