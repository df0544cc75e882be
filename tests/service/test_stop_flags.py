"""Stop requests reach the study runners through one read of every active study's flag."""

from __future__ import annotations

import asyncio
import threading

from foldwise.schemas import FoldStatus, StudyStatus, TrialStatus
from foldwise.service.db import fold_runs as fold_repo
from foldwise.service.db import studies as study_repo
from foldwise.service.db import trials as trial_repo
from foldwise.service.db.engine import SessionRunner
from foldwise.service.db.models import StudyRow
from foldwise.service.scheduler import stop_flags
from foldwise.service.scheduler.stop_flags import StopFlags
from foldwise.service.scheduler.store import SchedulerStore
from foldwise.spec import StudySpec
from tests.service.study_specs import study_spec


def _new_study(db: SessionRunner, status: StudyStatus = StudyStatus.RUNNING) -> int:
    def work(session) -> int:
        study = study_repo.create_study(session, StudySpec.model_validate(study_spec()))
        study.status = status
        session.flush()
        return study.id

    return asyncio.run(db.write(work))


def _ask_stop(db: SessionRunner, study_id: int) -> None:
    def work(session) -> None:
        session.get(StudyRow, study_id).stop_requested = True

    asyncio.run(db.write(work))


class CountingReads(SessionRunner):
    reads = 0

    def _read(self, work):
        self.reads += 1
        return super()._read(work)


def test_studies_that_ask_at_once_share_one_read_and_a_forgotten_read_is_read_again(
    db: SessionRunner, monkeypatch
) -> None:
    monkeypatch.setattr(stop_flags, "MAX_AGE_S", 60.0)  # no read goes old on a slow machine
    counting = CountingReads(db.engine.url.render_as_string(hide_password=False), limit=2)
    ids = [_new_study(db) for _ in range(20)]
    flags = StopFlags(counting)

    async def everyone_asks() -> list[bool]:
        return await asyncio.gather(*(flags.requested(i) for i in ids))

    assert asyncio.run(everyone_asks()) == [False] * 20
    assert counting.reads == 1
    _ask_stop(db, ids[3])
    flags.forget()  # what the scheduler does when its API took a request
    assert asyncio.run(flags.requested(ids[3])) is True
    assert asyncio.run(flags.requested(ids[4])) is False
    assert counting.reads == 2
    counting.engine.dispose()


def test_a_study_gone_is_asked_to_stop_and_one_not_active_when_read_is_read_on_its_own(
    db: SessionRunner,
) -> None:
    flags = StopFlags(db)
    assert asyncio.run(flags.requested(10**6)) is True  # deleted (or never there)
    queued_later = _new_study(db, StudyStatus.QUEUED)
    assert asyncio.run(flags.requested(queued_later)) is False
    _ask_stop(db, queued_later)
    assert asyncio.run(flags.requested(queued_later)) is True
    ended = _new_study(db, StudyStatus.COMPLETED)
    assert asyncio.run(flags.requested(ended)) is False  # not active: its own row answers


class FailingSharedRead(SessionRunner):
    def _read(self, work):
        if work is stop_flags._active_stop_flags:
            raise OSError("connection reset")
        return super()._read(work)


def test_a_failed_read_of_every_flag_falls_back_to_the_studys_own_row(db: SessionRunner) -> None:
    failing = FailingSharedRead(db.engine.url.render_as_string(hide_password=False), limit=2)
    running, stopped = _new_study(db), _new_study(db)
    _ask_stop(db, stopped)
    flags = StopFlags(failing)
    assert asyncio.run(flags.requested(running)) is False  # one error fails no study
    assert asyncio.run(flags.requested(stopped)) is True
    failing.engine.dispose()


class FirstSharedReadWaits(SessionRunner):
    """The first read of every flag answers only at ``release`` (a read slow to come back)."""

    def __init__(self, url: str) -> None:
        super().__init__(url, limit=2)
        self.release = threading.Event()
        self.shared_reads = 0

    def _read(self, work):
        result = super()._read(work)
        if work is stop_flags._active_stop_flags:
            self.shared_reads += 1
            if self.shared_reads == 1:  # read, then slow to answer
                self.release.wait(timeout=30)
        return result


def test_a_stop_asked_while_a_read_is_under_way_is_read_anew_and_the_late_read_does_not_hide_it(
    db: SessionRunner, monkeypatch
) -> None:
    monkeypatch.setattr(stop_flags, "MAX_AGE_S", 60.0)
    slow = FirstSharedReadWaits(db.engine.url.render_as_string(hide_password=False))
    study = _new_study(db)
    flags = StopFlags(slow)

    async def scenario() -> tuple[bool, bool, bool]:
        before = asyncio.create_task(flags.requested(study))  # its read is under way
        while slow.shared_reads == 0:
            await asyncio.sleep(0.01)
        await slow.write(lambda s: setattr(s.get(StudyRow, study), "stop_requested", True))
        flags.forget()  # the API took the stop
        after = await flags.requested(study)  # a new read, not the one under way
        slow.release.set()
        return await before, after, await flags.requested(study)

    before, after, later = asyncio.run(scenario())
    # the read under way answers last and is not used: the first ask too gets the newer one
    assert (before, after, later) == (True, True, True)
    assert slow.shared_reads == 2
    slow.engine.dispose()


def test_a_study_asked_to_stop_while_its_service_was_dead_keeps_its_folds_lost(
    db: SessionRunner,
) -> None:
    """Killed mid-fold, then asked to stop before a service ran it again: the next scheduler
    records the running fold as lost with the service (not as cancelled by the stop), then
    stops the study and closes its trial."""
    study_id = _new_study(db)

    def start_fold(session) -> None:
        trial = trial_repo.create_trial(session, study_id, {"lr": 0.01}, number=0)
        fold_repo.start_fold_run(session, trial.id, 0)

    asyncio.run(db.write(start_fold))
    _ask_stop(db, study_id)
    assert asyncio.run(SchedulerStore(db).begin_study(study_id)) is None

    def read(session):
        trial = trial_repo.get_trial(session, study_id, 0)
        return session.get(StudyRow, study_id).status, trial.status, trial.fold_runs[0]

    study, trial, fold = asyncio.run(db.read(read))
    assert study is StudyStatus.STOPPED and trial is not TrialStatus.RUNNING
    assert (fold.status, fold.error) == (FoldStatus.LOST, fold_repo.SERVICE_STOPPED)
