"""New trials, as the scheduler creates them: numbered on from the study's last, one study's
numbers apart from another's, their parameters stored as given."""

from __future__ import annotations

from foldwise.schemas import TrialStatus
from foldwise.service.db import studies as study_repo
from foldwise.service.db import trials as trial_repo
from foldwise.service.db.engine import SessionRunner
from foldwise.spec import StudySpec
from tests.service.study_specs import study_spec

PARAMS = {"lr": 0.01, "depth": 2, "width_1": 32, "width_2": 64, "act": "relu"}


def test_trials_are_numbered_on_from_the_studys_last_and_stored_running(db: SessionRunner) -> None:
    def work(session) -> tuple[list, list, list]:
        spec = StudySpec.model_validate(study_spec())
        first, other = (study_repo.create_study(session, spec).id for _ in range(2))
        trial_repo.create_trial(session, first, PARAMS, number=0)
        batch = [dict(PARAMS, lr=lr) for lr in (0.02, 0.03)]
        made = trial_repo.create_trials(session, first, batch)
        elsewhere = trial_repo.create_trials(session, other, [PARAMS])
        assert trial_repo.create_trials(session, first, []) == []
        stored = [
            (t.number, t.status, t.params, t.started_at is not None)
            for t in trial_repo.unfinished_trials(session, first)
        ]
        return made, elsewhere, stored

    made, elsewhere, stored = db._write(work)
    assert [number for _id, number in made] == [1, 2]
    assert len({trial_id for trial_id, _ in made}) == 2
    assert [number for _id, number in elsewhere] == [0]
    assert stored == [
        (0, TrialStatus.RUNNING, PARAMS, True),
        (1, TrialStatus.RUNNING, dict(PARAMS, lr=0.02), True),
        (2, TrialStatus.RUNNING, dict(PARAMS, lr=0.03), True),
    ]
