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
from sqlalchemy import select

from foldwise.schemas import TrialStatus
from foldwise.service.db import studies as study_repo
from foldwise.service.db import trials as trial_repo
from foldwise.service.db import warm_start as warm_repo
from foldwise.service.db.engine import SessionRunner
from foldwise.service.db.models import TrialRow
from foldwise.service.db.trials import STOPPED_ERROR
from foldwise.service.db.warm_start import Outcome
from foldwise.service.scheduler.store import SchedulerStore
from foldwise.service.study_optimizer import build_optimizer
from foldwise.service.warm_start import plan_warm_start
from foldwise.space import contains, project
from foldwise.spec import StudySpec
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
    pareto = _study(
        api,
        objective={"metric": "val_accuracy", "direction": "maximize"},
        objectives=[
            {"metric": "val_accuracy", "direction": "maximize"},
            {"metric": "n_params", "direction": "minimize"},
        ],
    )["id"]
    before = api.get("/studies").json()["count"]
    for named, fragment in [
        (999, "study 999 does not exist"),
        (gone, f"study {gone} does not exist"),
        (accuracy, f"study {accuracy} optimises val_accuracy (maximize), this study val_loss"),
        (upward, f"study {upward} optimises val_loss (maximize), this study val_loss (minimize)"),
        (pareto, f"study {pareto} optimises val_accuracy (maximize) first of its 2 objectives"),
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


def _timed(
    api: TestClient, study_id: int, trials: list[tuple[dict, TrialStatus, float | None, int]]
) -> None:
    """Finished trials of ``study_id``, each finishing at START plus its given seconds."""
    with api.app.state.sessions.begin() as session:
        first = trial_repo.next_trial_number(session, study_id)
        for offset, (params, status, value, seconds) in enumerate(trials):
            trial = trial_repo.create_trial(session, study_id, params, number=first + offset)
            trial_repo.finish_trial(session, trial, status, value=value, value_folds=3)
            trial.finished_at = START + timedelta(seconds=seconds)
        study_repo.touch_study(session, study_id)


def _by_the_rule(api: TestClient, spec: StudySpec, limit: int) -> list[Outcome]:
    """What docs/api.md says a warm start keeps, worked out from every finished trial."""
    sources = spec.warm_start.studies
    with api.app.state.sessions() as session:
        query = select(TrialRow).where(
            TrialRow.study_id.in_(sources), TrialRow.status.in_(trial_repo.FINISHED)
        )
        trials = session.scalars(query).all()
    fit = [(t, p) for t in trials if (p := project(spec.space, t.params)) is not None]
    if len(fit) > limit:
        sign = -1.0 if spec.objective.direction.value == "maximize" else 1.0
        usable = [f for f in fit if f[0].status != TrialStatus.FAILED and f[0].value is not None]
        usable.sort(
            key=lambda f: (sign * f[0].value, f[0].finished_at, f[0].study_id, f[0].number)
        )
        best = usable[: limit // 2]
        rest = [f for f in fit if f not in best]
        rest.sort(key=lambda f: (f[0].finished_at, f[0].study_id, f[0].number), reverse=True)
        fit = best + rest[: limit - len(best)]
    fit.sort(key=lambda f: (sources.index(f[0].study_id), f[0].finished_at, f[0].number))
    return [
        Outcome(t.study_id, t.number, t.status, p, t.value, t.std_error, t.value_folds)
        for t, p in fit
    ]


def _plan(api: TestClient, spec: StudySpec, limit: int) -> tuple[list[Outcome], list[int]]:
    """What ``plan_warm_start`` keeps at ``limit``, and the rows each of its queries fetched."""
    fetched: list[int] = []
    with api.app.state.sessions() as session:
        execute = session.execute

        def counting(*args: Any, **kwargs: Any) -> Any:
            frozen = execute(*args, **kwargs).freeze()
            fetched.append(len(frozen.data))
            return frozen()

        session.execute = counting  # type: ignore[method-assign]
        plan = plan_warm_start(session, spec, limit=limit)
    assert plan is not None
    return plan.kept, fetched


def test_past_the_limit_the_best_half_and_the_most_recent_rest_are_kept(
    api: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = _study(api, space=SQUARE)["id"], _study(api, space=SQUARE)["id"]
    p = {"x": 0.5, "y": 0.5}
    done, failed = TrialStatus.COMPLETED, TrialStatus.FAILED
    _timed(api, first, [(p, done, 0.5, 10), (p, failed, None, 11), (p, done, 0.1, 12)])
    _timed(api, first, [(p, done, 0.9, 13), (p, done, 0.8, 14)])
    _timed(api, second, [(p, done, 0.3, 1), (p, done, 0.7, 2), (p, done, 0.6, 3)])
    monkeypatch.setattr("foldwise.service.warm_start.MAX_WARM_START_OBSERVATIONS", 4)
    spec = {"space": SQUARE, "warm_start": {"studies": [first, second]}}
    study = _study(api, **spec)
    assert study["warm_start"] == {"studies": [first, second], "observations": 4, "skipped": 4}
    with api.app.state.sessions() as session:
        kept = warm_repo.observations(session, study["id"])
    # the best two (0.1, 0.3), then the most recently finished (0.8 at 14 s, 0.9 at 13 s),
    # though the study named last is the other; kept in the order named
    numbers = [(o.study_id, o.number) for o in kept]
    assert numbers == [(first, 2), (first, 3), (first, 4), (second, 0)]
    everything, _fetched = _plan(api, StudySpec.model_validate(study_spec(**spec)), 8)
    numbers = [(o.study_id, o.number) for o in everything]
    assert numbers == [*((first, n) for n in range(5)), *((second, n) for n in range(3))]


@pytest.mark.parametrize("maximize", [False, True])
def test_the_bounded_reads_keep_what_the_rule_says(api: TestClient, maximize: bool) -> None:
    """Two studies whose trials finish interleaved (some at the same second), with failures,
    equal values and trials outside the new space, against the rule worked out from all."""
    direction = "maximize" if maximize else "minimize"
    objective = {"metric": "val_loss", "direction": direction}
    sources = [_study(api, space=SQUARE, objective=objective)["id"] for _ in range(2)]
    rng = np.random.default_rng(7)
    for index, source in enumerate(sources):
        trials = []
        for n in range(40):
            params = {"x": float(rng.uniform()), "y": float(rng.uniform())}
            status = [TrialStatus.COMPLETED, TrialStatus.PRUNED, TrialStatus.FAILED][n % 5 % 3]
            value = None if status is TrialStatus.FAILED else float(rng.integers(0, 12)) / 4
            trials.append((params, status, value, 2 * n + index * (n % 2)))
        _timed(api, source, trials)
    narrow = {"x": {"type": "float", "low": 0.3, "high": 1.0}, "y": SQUARE["y"]}
    spec = StudySpec.model_validate(
        study_spec(space=narrow, objective=objective, warm_start={"studies": sources})
    )
    for limit in (1, 2, 5, 9, 30, 55, 200):
        kept, _fetched = _plan(api, spec, limit)
        assert kept == _by_the_rule(api, spec, limit), limit
        assert len(kept) == min(limit, len(_by_the_rule(api, spec, 10_000)))


def test_a_large_source_is_read_only_as_far_as_the_limit_needs(api: TestClient) -> None:
    source = _bowl_study(api, count=300)
    spec = StudySpec.model_validate(study_spec(space=SQUARE, warm_start={"studies": [source]}))
    kept, fetched = _plan(api, spec, 10)
    assert kept == _by_the_rule(api, spec, 10) and len(kept) == 10
    # the source study, the 11 latest, the 5 best, the count: not the 300 trials
    assert sum(fetched) <= 1 + 11 + 5 + 1, fetched
    everything, fetched = _plan(api, spec, 300)
    assert everything == _by_the_rule(api, spec, 300) and len(everything) == 300
    assert sum(fetched) <= 1 + 300 + 1, fetched


def test_trials_a_stop_cut_short_are_not_taken_as_failures(api: TestClient) -> None:
    # a stop says nothing about the parameters: copied as failures, they steered away from there
    source = _study(api, space=SQUARE)["id"]
    _finish(
        api,
        source,
        [
            ({"x": 0.1, "y": 0.5}, TrialStatus.COMPLETED, 0.3),
            ({"x": 0.9, "y": 0.5}, TrialStatus.FAILED, None),
        ],
    )
    with api.app.state.sessions.begin() as session:  # what the scheduler's stop leaves
        trial = trial_repo.create_trial(session, source, {"x": 0.5, "y": 0.5}, number=2)
        trial_repo.finish_trial(session, trial, TrialStatus.FAILED, error=STOPPED_ERROR)
        study_repo.touch_study(session, source)
    study = _study(api, space=SQUARE, warm_start={"studies": [source]})
    assert study["warm_start"] == {"studies": [source], "observations": 2, "skipped": 0}
    with api.app.state.sessions() as session:
        kept = warm_repo.observations(session, study["id"])
    assert [(o.number, o.status) for o in kept] == [
        (0, TrialStatus.COMPLETED),
        (1, TrialStatus.FAILED),
    ]


def test_trials_of_a_study_stopped_while_no_scheduler_ran_it_are_not_taken_either(
    api: TestClient, db: SessionRunner
) -> None:
    # stopped while the service was down: the next scheduler closes its open trials at start
    source = _study(api, space=SQUARE)["id"]
    _finish(api, source, [({"x": 0.1, "y": 0.5}, TrialStatus.COMPLETED, 0.3)])
    with api.app.state.sessions.begin() as session:
        trial_repo.create_trial(session, source, {"x": 0.5, "y": 0.5}, number=1)
    assert api.post(f"/studies/{source}/stop").status_code == 202
    assert asyncio.run(SchedulerStore(db).begin_study(source)) is None
    with api.app.state.sessions() as session:
        closed = trial_repo.get_trial(session, source, 1)
        assert (closed.status, closed.error) == (TrialStatus.FAILED, STOPPED_ERROR)
    study = _study(api, space=SQUARE, warm_start={"studies": [source]})
    assert study["warm_start"] == {"studies": [source], "observations": 1, "skipped": 0}
