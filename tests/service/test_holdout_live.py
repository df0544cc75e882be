"""A study's score on the task's test data, through a live service: the ensemble of the best
trial's fold models and a refit, equal to an independent computation from the downloaded
models; a refit the service was killed in resumes from its checkpoint; data that cannot be split
as the study asks ends the study at once, saying why."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from sqlalchemy import select

from foldwise.schemas import FoldStatus, JobStatus, StudyStatus, TrialStatus
from foldwise.service.db.engine import make_engine, make_session_factory
from foldwise.service.db.models import FoldRunRow, RefitRow
from foldwise.trainers import load_model
from foldwise.trainers.builtin import digits_mlp
from tests.live_service import LiveService
from tests.service.study_specs import study_spec

pytestmark = pytest.mark.slow

OPTIONS = {"test_fraction": 0.25}


@pytest.fixture(scope="module")
def service(shared_service: LiveService) -> LiveService:
    return shared_service


def _spec(**overrides: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "budget": {"trials": 3},
        # random search's first three for seed 5 have learning rates (0.06, 0.05, 0.0007)
        # that train digits in four epochs
        "optimizer": {"name": "random", "seed": 5},
        "parallel": {"trial_groups": 1, "folds": 3, "workers_per_fold": 1},
        "resources": {"cpus_per_worker": 0.5},
        "trainer": {"task": "digits_mlp", "epochs": 4, "batch_size": 64, "options": OPTIONS},
        "holdout": {"score": "both"},
    }
    return study_spec(**{**fields, **overrides})


def _predictions(path: Path, X: np.ndarray) -> np.ndarray:
    """Class probabilities of the model file at ``path``, rebuilt by the public loader."""
    model = load_model(path)
    with torch.no_grad():
        return torch.softmax(model(torch.as_tensor(X)), dim=1).numpy()


def _metrics(probabilities: np.ndarray, y: np.ndarray) -> dict[str, float]:
    chosen = probabilities[np.arange(len(y)), y]
    return {
        "loss": float(-np.mean(np.log(np.clip(chosen, 1e-12, None)))),
        "accuracy": float(np.mean(probabilities.argmax(axis=1) == y)),
    }


def test_the_best_trial_is_scored_on_the_test_data_as_the_models_say(
    service: LiveService, tmp_path: Path
) -> None:
    with service.sdk() as client:
        study = client.create_study(_spec()).wait(timeout=600, poll=1)
        assert study.status is StudyStatus.COMPLETED, study.data.error
        holdout = study.wait_for_holdout(timeout=600, poll=1)
        best = study.best_trial
        assert best is not None and holdout.trial == best.number
        paths = best.download_models(tmp_path)
        [refit] = study.refits()
    folds = sorted(p for p in paths if "-fold" in p.name)
    assert [p.name for p in folds] == [
        f"study{study.id}-trial{best.number}-fold{k}-model.pt" for k in range(3)
    ]
    X, y = digits_mlp.load_test_data(OPTIONS)
    members = [_predictions(p, X) for p in folds]
    ensemble = _metrics(np.mean(members, axis=0), y)
    assert holdout.ensemble is not None and holdout.refit is not None
    for name, value in ensemble.items():
        assert holdout.ensemble[name] == pytest.approx(value, abs=1e-5)
    # each fold model alone, as the CV value rests on them: their mean score
    assert holdout.folds is not None
    for name in ("loss", "accuracy"):
        alone = np.mean([_metrics(m, y)[name] for m in members])
        assert holdout.folds[name] == pytest.approx(alone, abs=1e-5)
    [refit_path] = [p for p in paths if "-refit" in p.name]
    assert refit_path.name == f"study{study.id}-trial{best.number}-refit{refit.number}-model.pt"
    for name, value in _metrics(_predictions(refit_path, X), y).items():
        assert holdout.refit[name] == pytest.approx(value, abs=1e-5)
    saved = torch.load(refit_path, weights_only=False)
    assert saved["refit"] is True and saved["params"] == best.params
    assert saved["epoch"] == refit.epochs == len(refit.curve)  # the last epoch's model
    assert saved["trainer"]["options"] == OPTIONS and saved["module"].startswith(
        "foldwise.trainers."
    )
    assert refit.trial == best.number and refit.test_metrics == holdout.refit
    objective = holdout.objective
    assert objective is not None and (objective.metric, objective.test_metric) == (
        "val_loss",
        "loss",
    )
    assert objective.cv == pytest.approx(best.value)
    assert objective.ensemble == holdout.ensemble["loss"]
    assert objective.folds == holdout.folds["loss"]
    assert holdout.ensemble["accuracy"] > 0.8  # an MLP on digits, four epochs


def test_an_own_loop_of_repeated_folds_is_scored_as_the_built_in_loop_is(
    service: LiveService,
) -> None:
    spec = _spec(
        budget={"trials": 2},
        objective={"metric": "val_accuracy", "direction": "maximize"},
        space={"lr": {"type": "float", "low": 0.01, "high": 0.05, "log": True}},
        trainer={"task": "tests.user_tasks.own_loop", "epochs": 3, "batch_size": 32},
        cv={"repeats": 2},
        racing={"rule": "forgiving"},
    )
    with service.sdk() as client:
        study = client.create_study(spec).wait(timeout=600, poll=1)
        assert study.status is StudyStatus.COMPLETED, study.data.error
        holdout = study.wait_for_holdout(timeout=600, poll=1)
        best = study.trial(holdout.trial)
        [refit] = study.refits()
    assert sorted({f.fold for f in best.folds}) == list(range(6))  # 3 folds of 2 repeats
    assert best.value_folds == 6 and study.data.spec.cv.scheme == "stratified"
    objective = holdout.objective
    assert objective is not None and objective.test_metric == "accuracy"
    assert objective.ensemble == holdout.ensemble["accuracy"] > 0.8
    assert objective.refit == holdout.refit["accuracy"] > 0.8
    assert [e.epoch for e in refit.curve] == list(range(1, refit.epochs + 1))
    assert refit.test_metrics == holdout.refit and refit.error is None


def test_a_stopped_study_is_scored_on_request_and_a_running_one_refused(
    service: LiveService,
) -> None:
    spec = _spec(budget={"trials": 40}, holdout=None)
    spec["trainer"]["epochs"] = 2
    with service.sdk() as client:
        study = client.create_study(spec)
        with service.http() as http:
            while not study.refresh().data.progress.completed:
                time.sleep(0.5)
            response = http.post(f"/studies/{study.id}/holdout", json={})
            assert response.status_code == 409, response.text
            assert "ask once it has ended" in response.json()["detail"]
        study.stop()
        assert study.status is StudyStatus.STOPPED and study.data.holdout is None
        holdout = study.holdout(score="ensemble", timeout=300, poll=0.5)
        assert holdout.status is JobStatus.COMPLETED and holdout.refit is None
        assert holdout.ensemble is not None and set(holdout.ensemble) >= {"loss", "accuracy"}
        assert study.refits() == []
        # refits asked for at once take numbers one after another, none refused
        with ThreadPoolExecutor(8) as pool:
            asked = list(pool.map(lambda _: _ask_refit(service, study.id), range(8)))
        assert sorted(asked) == list(range(1, 9))
        cut_short = [t.number for t in study.trials() if t.status is TrialStatus.FAILED]
        refusals = [(10_000, 404, f"study {study.id} has no trial 10000")]
        why = "only a completed trial has a model of every fold"
        refusals += [(n, 409, why) for n in cut_short]
        with service.http() as http:
            for trial, code, said in refusals:
                response = http.post(f"/studies/{study.id}/holdout", json={"trial": trial})
                assert response.status_code == code, response.text
                assert said in response.json()["detail"]


def _ask_refit(service: LiveService, study_id: int) -> int:
    with service.http() as http:
        response = http.post(f"/studies/{study_id}/refits", json={"epochs": 1})
    assert response.status_code == 202, response.text
    return response.json()["number"]


def test_data_that_cannot_be_split_ends_the_study_at_once_saying_why(
    service: LiveService,
) -> None:
    spec = _spec(cv={"scheme": "group"}, holdout=None, budget={"trials": 10})
    spec["parallel"]["trial_groups"] = 2
    with service.sdk() as client:
        study = client.create_study(spec).wait(timeout=300, poll=0.5)
        trials = study.trials()
    assert study.status is StudyStatus.FAILED
    assert study.data.error == (
        "cv.scheme group needs the task's groups: give load_groups(options)"
    )
    assert len(trials) <= 2  # the trials in flight, not one after another
    assert all(t.status is TrialStatus.FAILED for t in trials)


def _refit_rows(url: str) -> list[tuple[JobStatus, FoldStatus, int, int | None]]:
    """(refit status, run status, attempt, last checkpoint) of each attempt of each refit."""
    engine = make_engine(url)
    try:
        with make_session_factory(engine)() as session:
            query = (
                select(
                    RefitRow.status,
                    FoldRunRow.status,
                    FoldRunRow.attempt,
                    FoldRunRow.checkpoint_epoch,
                )
                .join(FoldRunRow, FoldRunRow.refit_id == RefitRow.id)
                .order_by(FoldRunRow.attempt)
            )
            return [tuple(row) for row in session.execute(query)]
    finally:
        engine.dispose()


def test_a_refit_cut_short_by_a_restart_resumes_from_its_checkpoint(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'refit.db'}"
    # random search's first for seed 8 (lr 0.0014) trains steadily over the refit's 40 epochs
    spec = _spec(holdout=None, budget={"trials": 1}, optimizer={"name": "random", "seed": 8})
    first = LiveService(url, tmp_path / "first.log").start()
    try:
        with first.sdk() as client:
            study = client.create_study(spec).wait(timeout=300, poll=0.5)
            refit = client.request_refit(study.id, epochs=40)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:  # until it has a checkpoint to resume from
            rows = _refit_rows(url)
            if rows and (rows[0][3] or 0) >= 2:
                break
            time.sleep(0.2)
    finally:
        first.kill()
    [(status, run_status, attempt, checkpoint)] = _refit_rows(url)
    assert (status, run_status, attempt) == (JobStatus.RUNNING, FoldStatus.RUNNING, 0)
    assert checkpoint and checkpoint < 40
    second = LiveService(url, tmp_path / "second.log").start()
    try:
        with second.sdk() as client:
            deadline = time.monotonic() + 300
            while not (done := client.fetch_refit(study.id, refit.number)).status.finished:
                assert time.monotonic() < deadline, done
                time.sleep(0.5)
    finally:
        second.stop()
    assert done.status is JobStatus.COMPLETED and done.attempt == 1, done.error
    # the attempt the kill cut short is lost, as a fold's would be; the next one completed
    assert [row[1:3] for row in _refit_rows(url)] == [
        (FoldStatus.LOST, 0),
        (FoldStatus.COMPLETED, 1),
    ]
    assert done.model_saved and len(done.curve) == 40
    restored = [e.epoch for e in done.curve if e.restored]
    # resumed, not trained again: from the checkpoint the row names, or a newer one whose file
    # was kept just before the kill and whose row was not yet written
    assert restored == list(range(1, len(restored) + 1)) and checkpoint <= len(restored) < 40
    # chance is 0.1; this trial's MLP (16 units, lr 2e-4) reaches 0.72-0.86 in 40 epochs
    assert done.test_metrics is not None and done.test_metrics["accuracy"] > 0.6
