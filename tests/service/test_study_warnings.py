"""A study's warnings are kept once per distinct message, naming the trials that said it, on
both backends."""

from __future__ import annotations

from foldwise.service.db import study_warnings as warning_repo
from foldwise.service.db.engine import SessionRunner
from foldwise.service.db.models import StudyRow
from foldwise.service.db.studies import create_study
from foldwise.spec import StudySpec
from tests.service.study_specs import study_spec


def test_a_warning_is_kept_once_with_every_trial_that_said_it(db: SessionRunner) -> None:
    spec = StudySpec.model_validate(study_spec())
    study_id = db._write(lambda s: create_study(s, spec).id)

    def said(kind: str, message: str, trial: int | None) -> bool:
        return db._write(lambda s: warning_repo.record_warning(s, study_id, kind, message, trial))

    for trial in (4, 1, 4, None):
        assert said("partial_metric", "val_f1 differs", trial)
    assert said("task", "val_f1 differs", 2)  # another kind: another warning
    warnings = db._read(lambda s: s.get(StudyRow, study_id).warnings)
    assert [(w["kind"], w["trials"], w["runs"]) for w in warnings] == [
        ("partial_metric", [1, 4], 4),
        ("task", [2], 1),
    ]
    assert warnings[0]["first_seen"] <= warnings[0]["last_seen"]
    for n in range(warning_repo.MAX_WARNINGS - 2):
        assert said("task", f"message {n}", 0)
    assert not said("task", "one too many", 0)  # a study keeps at most MAX_WARNINGS
    assert said("task", "message 0", 5)  # one it keeps still counts
    assert not db._write(lambda s: warning_repo.record_warning(s, 10**6, "task", "gone", 0))
