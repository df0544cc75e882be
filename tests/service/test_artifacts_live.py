"""End to end: a fold whose worker dies is retried from its checkpoint, not from epoch 0, and
the trial's models and timeline download through the API of a real service."""

from __future__ import annotations

import io

import httpx
import pytest
import torch

from foldwise.schemas import FoldStatus, StudyStatus, TrialStatus
from foldwise.trainers.task import resolve_task
from tests.live_service import LiveService
from tests.service.study_specs import study_spec

pytestmark = pytest.mark.slow


def test_a_retried_fold_resumes_from_its_checkpoint(shared_service: LiveService) -> None:
    live = shared_service
    spec = study_spec(
        space={"mode": {"type": "categorical", "choices": ["crash_once"]}},
        optimizer={"name": "random", "seed": 1},
        budget={"trials": 1},
        parallel={"trial_groups": 1, "folds": 2, "workers_per_fold": 2},
        resources={"cpus_per_worker": 0.5},
        trainer={
            "task": "tests.user_tasks.tiny:task",
            "epochs": 4,
            "batch_size": 32,
            "retries": 1,
            "checkpoint_every": 1,
        },
    )
    with live.sdk() as client:
        study = client.create_study(spec).wait(timeout=600, poll=1)
        trial = study.trial(0)
    base = f"{live.url}/studies/{study.id}"
    models = [
        httpx.get(f"{base}/best/folds/{k}/model", headers=live.headers, timeout=30) for k in (0, 1)
    ]
    timeline = httpx.get(f"{base}/trials/0/timeline", headers=live.headers, timeout=30)
    assert study.status is StudyStatus.COMPLETED and trial.status is TrialStatus.COMPLETED
    for fold in (0, 1):
        runs = {f.attempt: f for f in trial.folds if f.fold == fold}
        assert runs[0].status is FoldStatus.FAILED and runs[0].checkpoint_epoch == 2
        retry = runs[1]
        assert retry.status is FoldStatus.COMPLETED and retry.resumed_epochs == 2
        trained = [e.epoch for e in retry.epochs if not e.restored]
        assert trained == [3, 4]  # not from epoch 0
        assert retry.model_saved and "rss_mb" in retry.epochs[-1].metrics
    for fold, response in enumerate(models):
        assert response.status_code == 200
        saved = torch.load(io.BytesIO(response.content), weights_only=False)
        assert saved["fold"] == fold
        model = resolve_task(saved["task"]).obj.build_model(saved["params"])
        model.load_state_dict(saved["state_dict"])
    spans = [e for e in timeline.json()["traceEvents"] if e["ph"] == "X"]
    assert {(e["pid"], e["tid"]) for e in spans if e["cat"] == "fold"} == {
        (0, 0),
        (0, 1),
        (1, 0),
        (1, 1),
    }
