"""Where a study's files live in an artifact store: keys by study, trial, fold and refit (no
torch)."""

from __future__ import annotations

from pathlib import Path


def study_artifact_key(study_id: int) -> str:
    """The key under which every artifact of one study lives, relative to the artifact root."""
    return f"study-{study_id}"


def fold_artifact_key(study_id: int, trial_number: int, fold: int) -> str:
    """The key under which one fold of one trial keeps its checkpoint and model."""
    return f"{study_artifact_key(study_id)}/trial-{trial_number}/fold-{fold}"


def refit_artifact_key(study_id: int, trial_number: int, refit_number: int) -> str:
    """The key under which one refit of one trial keeps its checkpoint and model."""
    return f"{study_artifact_key(study_id)}/trial-{trial_number}/refit-{refit_number}"


def fold_artifact_dir(root: str | Path, study_id: int, trial_number: int, fold: int) -> Path:
    """Where one fold of one trial keeps its checkpoint and model, under a local root."""
    return Path(root) / fold_artifact_key(study_id, trial_number, fold)
