"""Whether studies were asked to stop, read for every active study in one query.

Each study's loop asks at every turn (a stop or delete request may come through any instance's
API, so the database is where it is seen). With hundreds of studies queued, one read per study
per turn was most of what the service did; now the runners that ask within ``MAX_AGE_S`` of one
read share it. ``forget`` makes the next ask read again: the scheduler calls it when this
instance's API took a request, so a stop it took is seen at once.
"""

from __future__ import annotations

import asyncio
import logging
import time

from sqlalchemy import select
from sqlalchemy.orm import Session

from foldwise.service.db.engine import SessionRunner
from foldwise.service.db.models import StudyRow
from foldwise.service.db.studies import ACTIVE

log = logging.getLogger(__name__)

MAX_AGE_S = 0.25
"""How old a read of the flags may be for a runner that asks (a fraction of a poll)."""


class StopFlags:
    """The stop flags of the active studies, read at most every ``MAX_AGE_S`` for them all."""

    def __init__(self, db: SessionRunner) -> None:
        self._db = db
        self._flags: dict[int, bool] = {}
        self._read_at = -float("inf")  # when the query of ``_flags`` started
        self._generation = 0  # counts ``forget`` calls
        self._read_generation = -1  # the generation ``_flags`` was read in
        self._reading: asyncio.Task[None] | None = None
        self._reading_generation = -1

    def forget(self) -> None:
        """Whatever was read so far may be old: the next ask reads again."""
        self._generation += 1

    async def requested(self, study_id: int) -> bool:
        """Whether the study was asked to stop, or is gone. A failed read of them all falls
        back to the study's own row: one error fails one study, as it did before."""
        flags: dict[int, bool] = {}
        try:
            if not self._fresh():
                await self._read()
            flags = self._flags
        except Exception as exc:
            log.warning("could not read the studies' stop flags: %s", exc)
        if study_id in flags:
            return flags[study_id]
        # not active when read (gone, or queued since), or not read: its own row says
        return await self._db.read(lambda session: _stop_flag(session, study_id))

    async def _read(self) -> None:
        """Read the flags, or wait for the read under way: the runners that ask at once share
        one query (shielded: a runner cancelled meanwhile does not cancel it for the others)."""
        loop = asyncio.get_running_loop()
        task = self._reading
        stale = self._reading_generation != self._generation  # under way since before a forget
        if task is None or task.done() or task.get_loop() is not loop or stale:
            self._reading_generation = self._generation
            task = self._reading = loop.create_task(self._query(), name="stop-flags")
            task.add_done_callback(_retrieved)
        await asyncio.shield(task)

    async def _query(self) -> None:
        started, generation = time.monotonic(), self._generation
        flags = await self._db.read(_active_stop_flags)
        if started >= self._read_at:  # a slower, older read does not undo a newer one
            self._flags, self._read_at, self._read_generation = flags, started, generation

    def _fresh(self) -> bool:
        young = time.monotonic() - self._read_at < MAX_AGE_S
        return young and self._read_generation == self._generation


def _retrieved(task: asyncio.Task[None]) -> None:
    """A failed read is seen even when every runner that waited for it was cancelled."""
    if not task.cancelled():
        task.exception()


def _active_stop_flags(session: Session) -> dict[int, bool]:
    query = select(StudyRow.id, StudyRow.stop_requested).where(StudyRow.status.in_(ACTIVE))
    return {study_id: bool(flag) for study_id, flag in session.execute(query)}


def _stop_flag(session: Session, study_id: int) -> bool:
    study = session.get(StudyRow, study_id)
    return study is None or study.stop_requested
