"""The artifact routes: a trial's timeline and its folds' models, on stored rows and files."""

from __future__ import annotations

import io
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from fastapi.testclient import TestClient

from foldwise.schemas import FoldStatus, TrialStatus
from foldwise.service.artifact_store import artifact_store, fold_model_key
from foldwise.service.db import fold_runs as fold_repo
from foldwise.service.db import trials as trial_repo
from foldwise.service.scheduler.fold_task import fold_job
from foldwise.service.scheduler.store import TrialHandle
from foldwise.spec import StudySpec
from foldwise.trainers.report import ArtifactKind, EpochReport
from tests.service.conftest import signed_in_client
from tests.service.study_specs import study_spec


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
                    "val_loss": value,
                    "epoch_start": time.time() + epoch,
                    "train_seconds": 0.3,
                    "val_seconds": 0.1,
                    "epoch_seconds": 0.4,
                }
                fold_repo.record_epoch(session, run.id, EpochReport(epoch, metrics))
            fold_repo.record_artifact(session, run.id, ArtifactKind.MODEL, 2)
            fold_repo.finish_fold_run(session, run.id, FoldStatus.COMPLETED, value=value)
        trial_repo.finish_trial(session, trial, TrialStatus.COMPLETED, value=value)


def _save_model(client: TestClient, study_id: int, number: int, fold: int) -> None:
    store = artifact_store(client.app.state.settings.artifact_dir)
    model = {"fold": fold, "trial": number, "state_dict": {"w": torch.ones(2)}}
    buffer = io.BytesIO()
    torch.save(model, buffer)
    store.write(fold_model_key(study_id, number, fold), buffer.getvalue())


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


def test_models_in_a_remote_store_stream_out(database_url: str) -> None:
    """An fsspec URL as the artifact store (memory:// here, s3:// in production): a model
    stored there downloads the same as from a local directory."""
    location = f"memory://foldwise-{uuid.uuid4().hex}"
    with signed_in_client(database_url, artifact_dir=location) as client:
        study_id = client.post("/studies", json=study_spec()).json()["id"]
        _add_trial(client, study_id, 0, 0.4)
        _save_model(client, study_id, 0, 1)
        response = client.get(f"/studies/{study_id}/trials/0/folds/1/model")
        assert response.status_code == 200
        assert "study" in response.headers["content-disposition"]
        assert torch.load(io.BytesIO(response.content))["fold"] == 1
        assert client.get(f"/studies/{study_id}/trials/0/folds/0/model").status_code == 404


def test_a_study_without_completed_trials_has_no_best_model(api: TestClient) -> None:
    study_id = api.post("/studies", json=study_spec()).json()["id"]
    response = api.get(f"/studies/{study_id}/best/folds/0/model")
    assert response.status_code == 404 and "no completed trial" in response.json()["detail"]


def test_a_study_without_a_single_best_trial_says_why_it_has_no_best_model(
    api: TestClient,
) -> None:
    """Completed trials, but no best: a study of several objectives has a front instead, and
    one whose only trial breaks its constraint has no feasible trial."""
    objectives = [
        {"metric": "val_loss", "direction": "minimize"},
        {"metric": "n_params", "direction": "minimize"},
    ]
    limit = [{"metric": "n_params", "op": "<=", "value": 10}]
    answers = {}
    for name, spec in (
        ("pareto", study_spec(objectives=objectives)),
        ("limited", study_spec(constraints=limit)),
    ):
        study_id = api.post("/studies", json=spec).raise_for_status().json()["id"]
        _add_trial(api, study_id, 0, 0.4)
        with api.app.state.sessions.begin() as session:
            trial_repo.get_trial(session, study_id, 0, with_folds=False).feasible = False
        answers[name] = study_id, api.get(f"/studies/{study_id}/best/folds/0/model")
    pareto_id, pareto = answers["pareto"]
    assert pareto.status_code == 404
    assert pareto.json()["detail"] == (
        f"study {pareto_id} has 2 objectives and so no single best trial: name a trial of its "
        f"Pareto front (GET /studies/{pareto_id}/pareto)"
    )
    limited_id, limited = answers["limited"]
    assert limited.status_code == 404
    assert limited.json()["detail"] == (
        f"study {limited_id} has no completed trial that meets its constraints"
    )


def test_fold_jobs_keep_artifacts_under_their_key_and_retries_resume() -> None:
    spec = StudySpec.model_validate(study_spec(early_stopping={"patience": 2, "rule": "smoothed"}))
    trial = TrialHandle(id=5, number=3, params={"lr": 0.1})
    first = fold_job(spec, 7, trial, 1, attempt=0, keep_artifacts=True)
    retry = fold_job(spec, 7, trial, 1, attempt=1, keep_artifacts=True)
    assert first.artifact_key == retry.artifact_key == "study-7/trial-3/fold-1"
    assert not first.resume and retry.resume
    assert first.trainer.checkpoint_every == 1 and first.early_stopping.rule == "smoothed"
    assert not fold_job(spec, 7, trial, 1).keeps_artifacts


def test_a_trial_that_searches_trainer_settings_gets_them_in_its_fold_jobs() -> None:
    spec = StudySpec.model_validate(
        study_spec(
            space={
                "lr": {"type": "float", "low": 0.01, "high": 0.1},
                "batch_size": {"type": "categorical", "choices": [16, 32]},
                "epochs": {"type": "int", "low": 1, "high": 3},
            }
        )
    )
    trial = TrialHandle(id=5, number=3, params={"lr": 0.1, "batch_size": 16, "epochs": 2})
    job = fold_job(spec, 7, trial, 0)
    assert (job.batch_size, job.epochs) == (16, 2) and spec.trainer.batch_size != 16
    assert job.params == trial.params  # shown in the trial, and the task sees them too


def test_a_model_download_takes_a_byte_range_and_answers_a_bad_one_in_json(
    api: TestClient,
) -> None:
    study_id = api.post("/studies", json=study_spec()).json()["id"]
    _add_trial(api, study_id, 0, 0.5)
    _save_model(api, study_id, 0, 1)
    url = f"/studies/{study_id}/trials/0/folds/1/model"
    whole = api.get(url).content
    part = api.get(url, headers={"Range": "bytes=0-9"})
    assert part.status_code == 206 and part.content == whole[:10]
    assert part.headers["content-range"] == f"bytes 0-9/{len(whole)}"
    for asked, code, says in [
        ("bytes=zz", 400, "Bad Request: Range header: range must be requested"),
        ("bytes=5-1", 400, "Bad Request: Range header: start must be less than end"),
        ("items=0-1", 400, "Bad Request: Only support bytes range"),
        (
            f"bytes={len(whole) + 5}-",
            416,
            "Requested Range Not Satisfiable: the Range asked for lies past",
        ),
    ]:
        response = api.get(url, headers={"Range": asked})
        assert response.status_code == code, asked
        assert response.headers["content-type"] == "application/json"
        assert response.json()["detail"].startswith(says), response.json()
        head = api.head(url, headers={"Range": asked})  # the same answer, without the body
        assert (head.status_code, head.content) == (code, b"")
        assert head.headers["content-length"] == response.headers["content-length"]
    unsatisfiable = api.get(url, headers={"Range": f"bytes={len(whole) + 5}-"})
    assert unsatisfiable.headers["content-range"] == f"bytes */{len(whole)}"
    spec = api.get("/openapi.json").json()["paths"][
        "/studies/{study_id}/trials/{number}/folds/{fold}/model"
    ]
    assert {"206", "400", "416"} <= set(spec["get"]["responses"])
    several = api.get(url, headers={"Range": "bytes=0-1, 5-6"})
    assert several.status_code == 206
    kind = several.headers["content-type"].split(";")[0]
    assert kind in spec["get"]["responses"]["206"]["content"]
