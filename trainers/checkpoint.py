"""Fold checkpoints and saved models on disk, keyed by study, trial and fold (DESIGN §6).

Rank 0 writes; files are replaced atomically, so a worker killed mid-write leaves the previous
checkpoint intact. On a cluster the artifact root must be storage that every worker node and the
service see at the same path (NFS, a shared volume): workers write, the service reads.
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


def study_artifact_dir(root: str | Path, study_id: int) -> Path:
    """Where every artifact of one study lives, under the artifact root."""
    return Path(root) / f"study-{study_id}"


def fold_artifact_dir(root: str | Path, study_id: int, trial_number: int, fold: int) -> Path:
    """Where one fold of one trial keeps its checkpoint and model, under the artifact root."""
    return study_artifact_dir(root, study_id) / f"trial-{trial_number}" / f"fold-{fold}"


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


def load_checkpoint(directory: Path, fingerprint: str) -> dict[str, Any] | None:
    """The checkpoint in `directory` if one exists and was written by the same job."""
    path = directory / CHECKPOINT_FILE
    if not path.is_file():
        return None
    try:
        state = torch.load(path, map_location="cpu", weights_only=False)
    except Exception:  # unreadable (a foreign or damaged file): train from scratch instead
        return None
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
