"""Warm starts: earlier studies' finished trials checked and copied at submit, and told first to
the optimizer the scheduler builds, the GP then starting where the earlier study did well."""

from __future__ import annotations

import asyncio
import math
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from foldwise.schemas import TrialStatus
from foldwise.space import contains
from foldwise.spec import StudySpec
from service.db import studies as study_repo
from service.db import trials as trial_repo
from service.db import warm_start as warm_repo
from service.db.engine import SessionRunner
from service.db.warm_start import Outcome
from service.scheduler.store import SchedulerStore
from service.study_optimizer import build_optimizer
from service.warm_start import within_limit
from tests.service.study_specs import study_spec

SQUARE = {
    "x": {"type": "float", "low": 0.0, "high": 1.0},
    "y": {"type": "float", "low": 0.0, "high": 1.0},
}
OPTIMUM = (0.8, 0.2)
START = datetime(2026, 11, 1, tzinfo=UTC)


def _bowl(params: dict[str, Any]) -> float:
    return (params["x"] - OPTIMUM[0]) ** 2 + (params["y"] - OPTIMUM[1]) ** 2


def _study(api: TestClient, **overrides: Any) -> dict[str, Any]:
    response = api.post("/studies", json=study_spec(**overrides))
    assert response.status_code == 201, response.text
    return response.json()


def _finish(
    api: TestClient, study_id: int, trials: list[tuple[dict, TrialStatus, float | None]]
) -> None:
    """Trials as the scheduler leaves them, finishing one second apart in this order."""
    with api.app.state.sessions.begin() as session:
        first = trial_repo.next_trial_number(session, study_id)
        for offset, (params, status, value) in enumerate(trials):
            trial = trial_repo.create_trial(session, study_id, params, number=first + offset)
            if status is TrialStatus.RUNNING:
                continue
            folds = 1 if status is TrialStatus.PRUNED else 3
            trial_repo.finish_trial(
                session,
                trial,
                status,
                value=value,
                std_error=None if value is None else 0.01,
                value_folds=None if value is None else folds,
                error="boom" if status is TrialStatus.FAILED else None,
            )
            trial.finished_at = START + timedelta(seconds=first + offset)
        study_repo.touch_study(session, study_id)


def _bowl_study(api: TestClient, count: int = 30, seed: int = 0) -> int:
    """A finished study of ``count`` random points of a bowl whose bottom is at OPTIMUM."""
    study_id = _study(api, space=SQUARE)["id"]
    rng = np.random.default_rng(seed)
    points = [{"x": float(x), "y": float(y)} for x, y in rng.uniform(size=(count, 2))]
    _finish(api, study_id, [(p, TrialStatus.COMPLETED, _bowl(p)) for p in points])
    return study_id


def _prior(db: SessionRunner, study: dict[str, Any]):
    """The optimizer the scheduler builds for ``study``, told what it is told at start."""
    store = SchedulerStore(db)
    warm = asyncio.run(store.warm_start(study["id"]))
    history, _ = asyncio.run(store.history(study["id"]))
    spec = StudySpec.model_validate(study["spec"])
    optimizer = build_optimizer(spec, warm_observations=len(warm))
    optimizer.update([*warm, *history], [])
    return optimizer, warm


def _refusal(response) -> dict[str, Any]:
    assert response.status_code == 422, response.text
    [error] = response.json()["detail"]
    return error


def test_named_studies_must_exist_and_optimise_the_same_objective(api: TestClient) -> None:
    source = _bowl_study(api, count=3)
    gone = _study(api)["id"]
    assert api.delete(f"/studies/{gone}").status_code == 202
    accuracy = _study(api, objective={"metric": "val_accuracy", "direction": "maximize"})["id"]
    upward = _study(api, objective={"metric": "val_loss", "direction": "maximize"})["id"]
    before = api.get("/studies").json()["count"]
    for named, fragment in [
        (999, "study 999 does not exist"),
        (gone, f"study {gone} does not exist"),
        (accuracy, f"study {accuracy} optimises val_accuracy (maximize), this study val_loss"),
        (upward, f"study {upward} optimises val_loss (maximize), this study val_loss (minimize)"),
    ]:
        error = _refusal(
            api.post("/studies", json=study_spec(warm_start={"studies": [source, named]}))
        )
        assert error["loc"] == ["body", "warm_start", "studies", 1] and fragment in error["msg"]
        assert error["input"] == named
    error = _refusal(api.post("/studies", json=study_spec(warm_start={"studies": [3, 3]})))
    assert error["loc"] == ["body", "warm_start", "studies"] and "3" in error["msg"]
    assert api.get("/studies").json()["count"] == before  # nothing was stored


def test_finished_trials_that_fit_are_copied_and_are_not_trials(api: TestClient) -> None:
    wide = {**SQUARE, "act": {"type": "categorical", "choices": ["relu", "tanh"]}}
    first = _study(api, space=wide)["id"]
    second = _study(api, space=SQUARE)["id"]
    _finish(
        api,
        first,
        [
            ({"x": 0.1, "y": 0.5, "act": "relu"}, TrialStatus.COMPLETED, 0.3),
            ({"x": 0.7, "y": 0.5, "act": "tanh"}, TrialStatus.PRUNED, 0.9),
            ({"x": 0.9, "y": 0.5, "act": "tanh"}, TrialStatus.FAILED, None),
            ({"x": 0.8, "y": 0.5, "act": "relu"}, TrialStatus.RUNNING, None),
        ],
    )
    _finish(
        api,
        second,
        [
            ({"x": 0.6, "y": 0.5}, TrialStatus.COMPLETED, 0.2),
            ({"x": 0.6, "y": 0.95}, TrialStatus.COMPLETED, 0.4),  # outside the new y range
        ],
    )
    space = {  # x narrower, y narrower, and `depth` only active when x > 0.75
        "x": {"type": "float", "low": 0.5, "high": 1.0},
        "y": {"type": "float", "low": 0.0, "high": 0.9},
        "depth": {"type": "int", "low": 1, "high": 3, "when": {"x": {"gt": 0.75}}},
    }
    study = _study(api, space=space, warm_start={"studies": [second, first]})
    assert study["warm_start"] == {"studies": [second, first], "observations": 2, "skipped": 3}
    assert study["spec"]["warm_start"] == {"studies": [second, first]}
    assert study["progress"]["finished"] == 0 and study["best_trial"] is None
    read = api.get(f"/studies/{study['id']}").json()
    assert read["warm_start"] == study["warm_start"]
    assert api.get(f"/studies/{study['id']}/trials").json() == {"data": [], "count": 0}
    assert api.get(f"/studies/{study['id']}/trials.csv").text.count("\n") == 1
    with api.app.state.sessions() as session:
        kept = warm_repo.observations(session, study["id"])
    # in the order named, each in the order it finished; act dropped; x=0.9 needs depth
    assert kept == [
        Outcome(second, 0, TrialStatus.COMPLETED, {"x": 0.6, "y": 0.5}, 0.2, 0.01, 3),
        Outcome(first, 1, TrialStatus.PRUNED, {"x": 0.7, "y": 0.5}, 0.9, 0.01, 1),
    ]
    plain = _study(api)
    assert plain["warm_start"] is None and plain["spec"]["warm_start"] is None


def test_the_copy_outlives_the_study_it_came_from(api: TestClient, db: SessionRunner) -> None:
    source = _bowl_study(api, count=5)
    study = _study(api, space=SQUARE, warm_start={"studies": [source]})
    with api.app.state.sessions.begin() as session:  # what the scheduler does on DELETE
        study_repo.delete_study(session, study_repo.get_study(session, source))
    assert api.get(f"/studies/{source}").status_code == 404
    _optimizer, warm = _prior(db, study)
    assert len(warm) == 5 and all(o.ok for o in warm)
    assert api.get(f"/studies/{study['id']}").json()["warm_start"]["observations"] == 5
    refused = api.post("/studies", json=study_spec(space=SQUARE, warm_start={"studies": [source]}))
    assert f"study {source} does not exist" in _refusal(refused)["msg"]


def test_the_gp_starts_near_the_earlier_studys_best(api: TestClient, db: SessionRunner) -> None:
    source = _bowl_study(api, count=30)
    gp = {"name": "gp", "seed": 4}
    study = _study(api, space=SQUARE, optimizer=gp, warm_start={"studies": [source]})
    optimizer, warm = _prior(db, study)
    assert len(warm) == 30 and optimizer.budget == 30 + study["spec"]["budget"]["trials"]
    [first] = optimizer.suggest(1)  # 30 observations: past the initial design at once
    assert math.dist((first["x"], first["y"]), OPTIMUM) < 0.1, first
    best = min(warm, key=lambda o: o.value).params
    assert math.dist((first["x"], first["y"]), (best["x"], best["y"])) < 0.2
    again, _ = _prior(db, study)  # a restarted service suggests the same
    assert again.suggest(1) == [first]


@pytest.mark.parametrize("name", ["random", "evolution", "nas_evolution", "gp"])
def test_every_optimizer_takes_prior_observations(
    api: TestClient, db: SessionRunner, name: str
) -> None:
    source = _bowl_study(api, count=24)
    _finish(
        api,
        source,
        [
            ({"x": 0.5, "y": 0.5}, TrialStatus.FAILED, None),
            ({"x": 0.4, "y": 0.4}, TrialStatus.PRUNED, 0.7),
        ],
    )
    spec = {"optimizer": {"name": name, "seed": 1}, "warm_start": {"studies": [source]}}
    study = _study(api, space=SQUARE, **spec)
    optimizer, warm = _prior(db, study)
    assert len(warm) == 26 and sum(o.failed for o in warm) == 1 and sum(o.pruned for o in warm)
    batch = optimizer.suggest(4)
    space = StudySpec.model_validate(study["spec"]).space
    assert len(batch) == 4 and all(contains(space, config) for config in batch)
    assert not {tuple(c.values()) for c in batch} & {tuple(o.params.values()) for o in warm}


def test_past_the_limit_the_best_half_and_the_latest_rest_are_kept() -> None:
    values = [0.5, None, 0.1, 0.9, 0.3, 0.8, 0.7, 0.6]  # None: failed
    outcomes = [
        Outcome(1, n, TrialStatus.FAILED if v is None else TrialStatus.COMPLETED, {}, v, None, 3)
        for n, v in enumerate(values)
    ]
    kept = within_limit(outcomes, 4, maximize=False)
    assert [o.number for o in kept] == [2, 4, 6, 7]  # best two (0.1, 0.3), then the latest
    kept = within_limit(outcomes, 4, maximize=True)
    assert [o.number for o in kept] == [3, 5, 6, 7]  # best two (0.9, 0.8), then the latest
    assert within_limit(outcomes, 8, maximize=False) == outcomes
