"""The optimizer's history is read in finishing order, the same on every backend, even for a
finished row without a finish time (SQLite and PostgreSQL sort NULL at opposite ends)."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import update

from foldwise.schemas import TrialStatus
from foldwise.service.db import studies as study_repo
from foldwise.service.db import trials as trial_repo
from foldwise.service.db.engine import SessionRunner
from foldwise.service.db.models import TrialRow, utcnow
from foldwise.spec import StudySpec
from tests.service.study_specs import study_spec

PARAMS = {"lr": 0.01, "depth": 2, "width_1": 32, "width_2": 64, "act": "relu"}


def _three_finished(db: SessionRunner) -> int:
    """Trial 0 finished last, trial 1 first, trial 2 with no finish time."""

    def work(session) -> int:
        study_id = study_repo.create_study(session, StudySpec.model_validate(study_spec())).id
        trials = [trial_repo.create_trial(session, study_id, PARAMS, number=n) for n in range(3)]
        for trial in trials:
            trial_repo.finish_trial(session, trial, TrialStatus.COMPLETED, value=0.5)
        now = utcnow()
        trials[0].finished_at = now + timedelta(seconds=2)
        trials[1].finished_at = now + timedelta(seconds=1)
        session.flush()
        session.execute(
            update(TrialRow).where(TrialRow.id == trials[2].id).values(finished_at=None)
        )
        return study_id

    return db._write(work)


def test_history_and_latest_agree_on_a_missing_finish_time(db: SessionRunner) -> None:
    study_id = _three_finished(db)
    history = db._read(lambda s: [t.number for t in trial_repo.finished_trials(s, study_id)])
    latest = db._read(lambda s: [t.number for t in trial_repo.last_finished(s, study_id, 3)])
    assert history == [2, 1, 0]
    assert latest == [0, 1, 2]
