"""Fold checkpoints and saved models: their names, keys (study, trial, fold) and fingerprints.

Rank 0 writes them through ``trainers.fold_artifacts``: files replaced atomically in a directory,
or bytes a Ray worker hands to the service's artifact store (no shared storage on a cluster).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

import torch

from trainers.job import FoldJob

CHECKPOINT_FILE = "checkpoint.pt"
"""Latest training state of a running fold; removed once the fold's model is saved."""
MODEL_FILE = "model.pt"
"""The fold's trained model: {task, params, fold, epoch, metrics, state_dict}."""


def study_artifact_key(study_id: int) -> str:
    """The key under which every artifact of one study lives, relative to the artifact root."""
    return f"study-{study_id}"


def fold_artifact_key(study_id: int, trial_number: int, fold: int) -> str:
    """The key under which one fold of one trial keeps its checkpoint and model."""
    return f"{study_artifact_key(study_id)}/trial-{trial_number}/fold-{fold}"


def study_artifact_dir(root: str | Path, study_id: int) -> Path:
    """Where every artifact of one study lives, under a local artifact root."""
    return Path(root) / study_artifact_key(study_id)


def fold_artifact_dir(root: str | Path, study_id: int, trial_number: int, fold: int) -> Path:
    """Where one fold of one trial keeps its checkpoint and model, under a local root."""
    return Path(root) / fold_artifact_key(study_id, trial_number, fold)


def job_fingerprint(job: FoldJob) -> str:
    """A hash of everything that shapes training, so a checkpoint resumes only the same job."""
    keys = ("task", "params", "fold", "folds", "seed", "batch_size", "world_size", "lr_scaling")
    keys += ("warmup_epochs", "options")
    payload = json.dumps({k: getattr(job, k) for k in keys}, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def save_atomic(obj: Any, path: Path) -> None:
    """torch.save to a temporary name in the same directory, then rename over `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)


def matching_checkpoint(state: dict[str, Any] | None, fingerprint: str) -> dict[str, Any] | None:
    """``state`` if it is a checkpoint written by the job with ``fingerprint``, else None."""
    if not isinstance(state, dict) or state.get("fingerprint") != fingerprint:
        return None
    return state


def clear_fold_dir(directory: Path) -> None:
    """Forget what an earlier run of this fold left (a fresh attempt starts from scratch)."""
    if directory.is_dir():
        shutil.rmtree(directory)


def load_model(path: str | Path) -> dict[str, Any]:
    """A downloaded `model.pt`: build the task's model from `params`, then load `state_dict`."""
    return torch.load(path, map_location="cpu", weights_only=False)
