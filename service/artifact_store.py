"""The service's side of the artifact store: where a study's checkpoints and models live.

Fold runs write under ``Settings.artifact_dir`` (see ``trainers.checkpoint``); the service reads
models from there and removes a study's folder when the study is deleted, so a later study never
sees a deleted one's files.
"""

from __future__ import annotations

import shutil
from functools import partial
from pathlib import Path

import anyio

from trainers.checkpoint import MODEL_FILE, fold_artifact_dir, study_artifact_dir


def fold_model_path(root: Path, study_id: int, trial_number: int, fold: int) -> Path:
    return fold_artifact_dir(root, study_id, trial_number, fold) / MODEL_FILE


async def delete_study_artifacts(root: Path, study_id: int) -> None:
    """Remove everything the study's fold runs wrote, off the event loop."""
    folder = study_artifact_dir(root, study_id)
    await anyio.to_thread.run_sync(partial(shutil.rmtree, folder, ignore_errors=True))
