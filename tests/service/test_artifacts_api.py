"""The artifact routes: a trial's timeline and its folds' models, on stored rows and files."""

from __future__ import annotations

import io
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from fastapi.testclient import TestClient

from foldwise.schemas import FoldStatus, TrialStatus
from foldwise.spec import StudySpec
from service.db import fold_runs as fold_repo
from service.db import trials as trial_repo
from service.scheduler.fold_task import fold_job
from service.scheduler.store import TrialHandle
from tests.service.conftest import signed_in_client
from tests.service.study_specs import study_spec
from trainers.checkpoint import MODEL_FILE, fold_artifact_dir


@pytest.fixture
def api(database_url: str, tmp_path: Path) -> Iterator[TestClient]:
    with signed_in_client(database_url, artifact_dir=tmp_path / "artifacts") as client:
        yield client


def _add_trial(client: TestClient, study_id: int, number: int, value: float) -> None:
    """A completed trial of two folds, each with two timed epochs."""
    with client.app.state.sessions.begin() as session:
        trial = trial_repo.create_trial(session, study_id, {"lr": 0.1}, number=number)
        for fold in range(2):
            run = fold_repo.start_fold_run(session, trial.id, fold)
            for epoch in (1, 2):
                metrics = {
                    "epoch": float(epoch),
                    "val_loss": value,
                    "epoch_start": time.time() + epoch,
                    "train_seconds": 0.3,
                    "val_seconds": 0.1,
                    "epoch_seconds": 0.4,
                    **({"model_saved": 1.0} if epoch == 2 else {}),
                }
                fold_repo.record_epoch(session, run.id, epoch, metrics)
            fold_repo.finish_fold_run(session, run.id, FoldStatus.COMPLETED, value=value)
        trial_repo.finish_trial(session, trial, TrialStatus.COMPLETED, value=value)


def _save_model(client: TestClient, study_id: int, number: int, fold: int) -> None:
    root = client.app.state.settings.artifact_dir
    path = fold_artifact_dir(root, study_id, number, fold) / MODEL_FILE
    path.parent.mkdir(parents=True)
    torch.save({"fold": fold, "trial": number, "state_dict": {"w": torch.ones(2)}}, path)


def test_timeline_is_a_downloadable_trace(api: TestClient) -> None:
    study_id = api.post("/studies", json=study_spec()).json()["id"]
    _add_trial(api, study_id, 0, 0.5)
    response = api.get(f"/studies/{study_id}/trials/0/timeline")
    assert response.status_code == 200
    assert "attachment" in response.headers["content-disposition"]
    events = response.json()["traceEvents"]
    assert {e["cat"] for e in events if e["ph"] == "X"} == {"fold", "epoch", "train", "validation"}
    assert len([e for e in events if e.get("cat") == "epoch"]) == 4
    trial = api.get(f"/studies/{study_id}/trials/0").json()
    assert trial["has_timeline"] and trial["has_models"]
    assert all(f["model_saved"] for f in trial["folds"])
    assert api.get(f"/studies/{study_id}/trials/9/timeline").status_code == 404
    assert api.get("/studies/999/trials/0/timeline").status_code == 404


def test_fold_models_and_the_best_trials_models_download(api: TestClient) -> None:
    study_id = api.post("/studies", json=study_spec()).json()["id"]
    _add_trial(api, study_id, 0, 0.9)
    _add_trial(api, study_id, 1, 0.2)  # the best: val_loss is minimised
    for number in (0, 1):
        _save_model(api, study_id, number, 0)
    response = api.get(f"/studies/{study_id}/best/folds/0/model")
    assert response.status_code == 200
    assert torch.load(io.BytesIO(response.content))["trial"] == 1
    direct = api.get(f"/studies/{study_id}/trials/0/folds/0/model")
    assert torch.load(io.BytesIO(direct.content))["trial"] == 0
    missing = api.get(f"/studies/{study_id}/best/folds/1/model")
    assert missing.status_code == 404 and "no saved model" in missing.json()["detail"]


def test_a_study_without_completed_trials_has_no_best_model(api: TestClient) -> None:
    study_id = api.post("/studies", json=study_spec()).json()["id"]
    response = api.get(f"/studies/{study_id}/best/folds/0/model")
    assert response.status_code == 404 and "no completed trial" in response.json()["detail"]


def test_fold_jobs_checkpoint_under_the_artifact_dir_and_retries_resume(tmp_path: Path) -> None:
    spec = StudySpec.model_validate(study_spec(early_stopping={"patience": 2, "rule": "smoothed"}))
    trial = TrialHandle(id=5, number=3, params={"lr": 0.1})
    relative = Path(os.path.relpath(tmp_path))
    first = fold_job(spec, 7, trial, 1, attempt=0, artifact_dir=relative)
    retry = fold_job(spec, 7, trial, 1, attempt=1, artifact_dir=relative)
    expected = fold_artifact_dir(tmp_path.resolve(), 7, 3, 1)
    assert first.checkpoint_dir == retry.checkpoint_dir == str(expected)  # absolute for workers
    assert not first.resume and retry.resume
    assert first.checkpoint_every == 1 and first.stopping_rule == "smoothed"
    assert fold_job(spec, 7, trial, 1).checkpoint_dir is None
