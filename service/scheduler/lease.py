"""One scheduler per database: the instance that holds the lease schedules, the others serve
the API and wait to take over.

The holder renews the lease every third of its time. When the holder dies the lease expires
and another instance takes it, with the next epoch, within the lease time (plus a poll); it
then reclaims what the dead one left running (``SchedulerStore.begin_study``). Every write the
scheduler makes first fences itself against the lease (``fence``): an instance that lost the
lease (paused past its expiry, say) has its late writes refused with ``LeaseLost``.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import time
from typing import Any

from sqlalchemy.orm import Session

from foldwise.service.db import leases as lease_repo
from foldwise.service.db.engine import SessionRunner

log = logging.getLogger(__name__)

NAME = "scheduler"


class LeaseLost(Exception):
    """This instance no longer holds the scheduler's lease: it must not write."""


def instance_name() -> str:
    """Who holds a lease: host, process and a random tag (a restarted process differs)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


class SchedulerLease:
    def __init__(self, db: SessionRunner, *, ttl_seconds: float, holder: str | None = None):
        self.db = db
        self.holder = holder or instance_name()
        self.ttl_seconds = ttl_seconds
        self.epoch: int | None = None
        self._renewed_at = 0.0

    @property
    def ttl_ms(self) -> int:
        return int(self.ttl_seconds * 1000)

    async def hold(self) -> bool:
        """Take the lease if it is free, renew it once a third of its time has gone; whether
        this instance holds it now."""
        now = time.monotonic()
        if self.epoch is None:
            self.epoch = await self.db.write(self._take)
            if self.epoch is not None:
                self._renewed_at = now
                log.info("%s holds the scheduler lease (epoch %d)", self.holder, self.epoch)
            return self.epoch is not None
        if now - self._renewed_at < self.ttl_seconds / 3:
            return True
        try:
            renewed = await self.db.write(self._renew)
        except Exception as exc:  # the database did not answer: hold on while the lease lasts
            log.warning("could not renew the scheduler lease: %s", exc)
            renewed = now - self._renewed_at < self.ttl_seconds
        if renewed:
            self._renewed_at = now
            return True
        log.warning("%s lost the scheduler lease (epoch %d)", self.holder, self.epoch)
        self.epoch = None
        return False

    def fence(self, session: Session) -> None:
        """In a scheduler write's transaction, first: ``LeaseLost`` unless this instance
        still holds the lease (and then nobody takes it before the transaction ends)."""
        epoch = self.epoch
        if epoch is None or not lease_repo.fence(session, NAME, self.holder, epoch):
            if self.epoch == epoch:  # known lost now: the loop stops scheduling at once
                self.epoch = None
            raise LeaseLost(f"{self.holder} no longer holds the scheduler lease")

    async def release(self) -> None:
        """Give the lease up now (a clean shutdown), so another instance need not wait."""
        epoch, self.epoch = self.epoch, None
        if epoch is not None:
            await self.db.write(lambda s: lease_repo.release_lease(s, NAME, self.holder, epoch))

    async def describe(self) -> dict[str, Any]:
        """Whether this instance schedules, and who does (for /health)."""
        current = await self.db.read(lambda s: lease_repo.lease_holder(s, NAME))
        holder, epoch, left_ms = current if current else ("", 0, 0)
        return {
            "leader": self.epoch is not None,
            "holder": holder if left_ms > 0 else None,
            "epoch": epoch,
            "lease_seconds": self.ttl_seconds,
        }

    def _take(self, session: Session) -> int | None:
        lease_repo.ensure_lease(session, NAME)
        return lease_repo.take_lease(session, NAME, self.holder, self.ttl_ms)

    def _renew(self, session: Session) -> bool:
        assert self.epoch is not None
        return lease_repo.renew_lease(session, NAME, self.holder, self.epoch, self.ttl_ms)
