"""Routes of what trials leave behind: a trial's timeline and its folds' trained models.

Models live under `Settings.artifact_dir` (keyed study/trial/fold), written by rank 0 of each fold
run; on a cluster that directory must be shared storage mounted at the same path everywhere.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException, status
from fastapi.responses import FileResponse, JSONResponse

from service.api.convert import trial_out
from service.api.deps import SessionDep, SettingsDep, StudyDep
from service.db import studies as study_repo
from service.db import trials as trial_repo
from service.db.models import StudyRow, TrialRow
from trainers.checkpoint import MODEL_FILE, fold_artifact_dir
from trainers.timeline import trial_trace

router = APIRouter(prefix="/studies/{study_id}", tags=["artifacts"])


@router.get("/trials/{number}/timeline", response_model=dict[str, Any])
def get_timeline(study: StudyDep, number: int, session: SessionDep) -> JSONResponse:
    """The trial's Chrome trace-event JSON (fold runs, epochs, training and validation)."""
    trial = _trial_or_404(session, study, number)
    filename = f"study{study.id}-trial{number}-timeline.json"
    return JSONResponse(
        trial_trace(trial_out(trial)),
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )


@router.get("/trials/{number}/folds/{fold}/model", response_class=FileResponse)
def get_fold_model(
    study: StudyDep, number: int, fold: int, session: SessionDep, settings: SettingsDep
) -> FileResponse:
    """One fold's trained model (torch.save of task, params, epoch, metrics, state_dict)."""
    trial = _trial_or_404(session, study, number)
    return _model_file(settings.artifact_dir, study, trial, fold)


@router.get("/best/folds/{fold}/model", response_class=FileResponse)
def get_best_model(
    study: StudyDep, fold: int, session: SessionDep, settings: SettingsDep
) -> FileResponse:
    """The study's best completed trial's model of `fold`."""
    best = study_repo.best_trials(session, [study]).get(study.id)
    if best is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"study {study.id} has no completed trial")
    return _model_file(settings.artifact_dir, study, best, fold)


def _trial_or_404(session: SessionDep, study: StudyRow, number: int) -> TrialRow:
    trial = trial_repo.get_trial(session, study.id, number)
    if trial is None:
        raise HTTPException(
            status.HTTP_404_NOT_FOUND, f"trial {number} of study {study.id} not found"
        )
    return trial


def _model_file(root: Any, study: StudyRow, trial: TrialRow, fold: int) -> FileResponse:
    path = fold_artifact_dir(root, study.id, trial.number, fold) / MODEL_FILE
    if not path.is_file():
        raise HTTPException(
            status.HTTP_404_NOT_FOUND,
            f"no saved model for fold {fold} of trial {trial.number} of study {study.id}",
        )
    filename = f"study{study.id}-trial{trial.number}-fold{fold}-model.pt"
    return FileResponse(path, media_type="application/octet-stream", filename=filename)
