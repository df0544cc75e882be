"""Small studies written straight into the dashboard's database, shaped for one browser test:
a diverged trial among good ones, negative values, many parameters, trials with no epochs."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from foldwise.schemas import FoldStatus, StudyStatus, TrialStatus
from foldwise.service.db import fold_runs as fold_repo
from foldwise.service.db import studies as study_repo
from foldwise.service.db import trials as trial_repo
from foldwise.spec import StudySpec
from foldwise.trainers.report import EpochReport
from tests.service.dashboard.conftest import Dashboard
from tests.service.study_specs import study_spec

SPACE = {
    "lr": {"type": "float", "low": 1e-4, "high": 0.3, "log": True},
    "depth": {"type": "int", "low": 1, "high": 3},
    "act": {"type": "categorical", "choices": ["relu", "tanh", "gelu"]},
}
# Good trials near 0.1 and one that diverged: the case that squashed the history.
GOOD = [0.31, 0.24, 0.2, 0.17, 0.15, 0.14, 0.13, 0.125, 0.12, 0.115, 0.11, 0.105]
DIVERGED = 1.88
DIVERGED_AT = 5  # its trial number
WITH_DIVERGED = [*GOOD[:DIVERGED_AT], DIVERGED, *GOOD[DIVERGED_AT:]]


def params_of(space: dict[str, Any], number: int) -> dict[str, Any]:
    """Parameters that differ from trial to trial, inside the space."""
    frac = (number * 0.37) % 1
    params: dict[str, Any] = {}
    for name, p in space.items():
        if p["type"] == "categorical":
            params[name] = p["choices"][number % len(p["choices"])]
        elif p["type"] == "int":
            params[name] = p["low"] + number % (p["high"] - p["low"] + 1)
        elif p.get("log"):
            params[name] = math.exp(math.log(p["low"]) + frac * math.log(p["high"] / p["low"]))
        else:
            params[name] = p["low"] + frac * (p["high"] - p["low"])
    return params


def add_study(
    dashboard: Dashboard,
    values: Sequence[float],
    *,
    space: dict[str, Any] = SPACE,
    direction: str = "minimize",
    running: int = 0,
) -> int:
    """A running study whose trials 0, 1, … completed with ``values`` (one fold run each, two
    epochs of ``val_loss``), then ``running`` trials whose single fold has reported nothing."""
    spec = study_spec(
        name=f"made-{direction}",
        space=space,
        objective={"metric": "val_loss", "direction": direction},
        budget={"trials": len(values) + running + 10},
        parallel={"trial_groups": max(running, 1), "folds": 2, "workers_per_fold": 1},
    )
    with dashboard.app.state.sessions.begin() as session:
        study = study_repo.create_study(session, StudySpec.model_validate(spec))
        study_repo.mark_study(session, study, StudyStatus.RUNNING)
        for number, value in enumerate(values):
            trial = trial_repo.create_trial(
                session, study.id, params_of(space, number), number=number
            )
            run = fold_repo.start_fold_run(session, trial.id, 0)
            for epoch in (1, 2):
                fold_repo.record_epoch(
                    session, run.id, EpochReport(epoch, {"val_loss": value + 0.5 / epoch})
                )
            fold_repo.finish_fold_run(session, run.id, FoldStatus.COMPLETED, value=value)
            trial_repo.finish_trial(
                session, trial, TrialStatus.COMPLETED, value=value, std_error=0.01, value_folds=2
            )
        for number in range(len(values), len(values) + running):
            trial = trial_repo.create_trial(
                session, study.id, params_of(space, number), number=number
            )
            fold_repo.start_fold_run(session, trial.id, 0)
        study_repo.touch_study(session, study.id)
        return study.id


def add_failed_trial(
    dashboard: Dashboard, study_id: int, number: int, *, error: str, traceback: str | None = None
) -> None:
    """A trial whose one fold failed before its first epoch, with ``error`` (and
    ``traceback``) stored exactly as given."""
    with dashboard.app.state.sessions.begin() as session:
        study = study_repo.get_study(session, study_id)
        params = params_of(study.spec.resolved()["space"], number)
        trial = trial_repo.create_trial(session, study_id, params, number=number)
        run = fold_repo.start_fold_run(session, trial.id, 0)
        fold_repo.finish_fold_run(
            session, run.id, FoldStatus.FAILED, error=error, traceback=traceback
        )
        trial_repo.finish_trial(session, trial, TrialStatus.FAILED, error=f"fold 0: {error}")
        study_repo.touch_study(session, study_id)
