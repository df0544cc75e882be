"""Routes of what trials leave behind: a trial's timeline and its folds' trained models.

Models live in the service's artifact store (`Settings.artifact_dir`: a local directory or an
fsspec URL, keyed study/trial/fold); rank 0 of each fold run hands them to the service through
Ray, so they download the same whichever node trained them.
"""

from __future__ import annotations

from typing import Annotated, Any

import anyio
from fastapi import APIRouter, HTTPException, Path, status
from fastapi.responses import FileResponse, JSONResponse, Response, StreamingResponse
from sqlalchemy.orm import Session

from foldwise.service.api.convert import trial_out
from foldwise.service.api.deps import DbDep, SettingsDep, study_or_404, trial_or_404
from foldwise.service.artifact_store import artifact_store, fold_model_key
from foldwise.service.db import studies as study_repo
from foldwise.service.db.models import StudyRow, TrialRow
from foldwise.service.hardening.errors import ErrorMessage, documented
from foldwise.service.hardening.input_rules import StudyId, TrialNumber, decimal_int
from foldwise.trainers.timeline import trial_trace

router = APIRouter(prefix="/studies/{study_id}", tags=["artifacts"], responses=documented(404))

Fold = Annotated[decimal_int(0, 99), Path(description="The fold, 0 to K - 1")]

MODEL_FILE = {
    200: {"content": {"application/octet-stream": {}}, "description": "The model file"},
    206: {
        "content": {"application/octet-stream": {}, "multipart/byteranges": {}},
        "description": "The bytes a Range header asked for (a download taken up again); "
        "several ranges come as multipart/byteranges",
    },
    400: {"model": ErrorMessage, "description": "A malformed Range header"},
    416: {"model": ErrorMessage, "description": "A Range past the end of the file"},
}
"""The answers of a model download: a saved file takes byte ranges (a model in remote storage
is sent whole, 200, whatever the Range)."""


@router.get("/trials/{number}/timeline", response_model=dict[str, Any])
async def get_timeline(study_id: StudyId, number: TrialNumber, db: DbDep) -> JSONResponse:
    """The trial's Chrome trace-event JSON (fold runs, epochs, training and validation)."""

    def work(session: Session) -> dict[str, Any]:
        study_or_404(session, study_id)
        return trial_trace(trial_out(trial_or_404(session, study_id, number)))

    filename = f"study{study_id}-trial{number}-timeline.json"
    return JSONResponse(
        await db.read(work),
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )


@router.get(
    "/trials/{number}/folds/{fold}/model", response_class=FileResponse, responses=MODEL_FILE
)
async def get_fold_model(
    study_id: StudyId, number: TrialNumber, fold: Fold, db: DbDep, settings: SettingsDep
) -> Response:
    """One fold's trained model (torch.save of task, params, epoch, metrics, state_dict)."""

    def work(session: Session) -> tuple[StudyRow, TrialRow]:
        study = study_or_404(session, study_id)
        return study, trial_or_404(session, study_id, number, with_folds=False)

    study, trial = await db.read(work)
    return await _model_file(settings.artifact_dir, study, trial, fold)


@router.get("/best/folds/{fold}/model", response_class=FileResponse, responses=MODEL_FILE)
async def get_best_model(
    study_id: StudyId, fold: Fold, db: DbDep, settings: SettingsDep
) -> Response:
    """The study's best completed trial's model of `fold`."""

    def work(session: Session) -> tuple[StudyRow, TrialRow | None]:
        study = study_or_404(session, study_id)
        return study, study_repo.best_trials(session, [study]).get(study.id)

    study, best = await db.read(work)
    if best is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, study_repo.no_best_trial(study))
    return await _model_file(settings.artifact_dir, study, best, fold)


async def _model_file(location: str, study: StudyRow, trial: TrialRow, fold: int) -> Response:
    folds = study.spec.fold_count
    if fold >= folds:
        raise HTTPException(
            status.HTTP_404_NOT_FOUND,
            f"study {study.id} has {folds} folds (0 to {folds - 1}); there is no fold {fold}",
        )
    return await send_model(
        location,
        fold_model_key(study.id, trial.number, fold),
        f"study{study.id}-trial{trial.number}-fold{fold}-model.pt",
        f"no saved model for fold {fold} of trial {trial.number} of study {study.id}",
    )


async def send_model(location: str, key: str, filename: str, missing: str) -> Response:
    """The model file at ``key`` of the artifact store: a local file answers byte ranges, a
    remote one is streamed whole; a 404 saying ``missing`` when there is none."""
    store = artifact_store(location)
    local = store.local_path(key)
    if local is None and (store.is_local or not await anyio.to_thread.run_sync(store.exists, key)):
        raise HTTPException(status.HTTP_404_NOT_FOUND, missing)
    if local is not None:
        return FileResponse(local, media_type="application/octet-stream", filename=filename)
    return StreamingResponse(
        store.chunks(key),
        media_type="application/octet-stream",
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )
