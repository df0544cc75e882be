"""Checkpoints: a resumed fold continues where its checkpoint left off and ends where an
uninterrupted run ends; the fold's model is saved; stale or foreign checkpoints are ignored."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from trainers.checkpoint import (
    CHECKPOINT_FILE,
    MODEL_FILE,
    fold_artifact_dir,
    job_fingerprint,
    matching_checkpoint,
)
from trainers.ddp import free_port
from trainers.fold_artifacts import BufferedArtifacts, DirectoryArtifacts
from trainers.fold_runner import run_fold
from trainers.job import FoldJob
from trainers.task import resolve_task

VOLATILE = {"epoch_start", "train_seconds", "val_seconds", "epoch_seconds", "samples_per_second"}
VOLATILE |= {"cpu_percent", "rss_mb", "checkpoint", "model_saved", "restored"}


def _job(directory: Path, **overrides: Any) -> FoldJob:
    fields: dict[str, Any] = {
        "task": "tests.user_tasks.tiny",
        "params": {"lr": 0.02, "width": 12},
        "fold": 0,
        "folds": 3,
        "seed": 4,
        "epochs": 4,
        "batch_size": 20,
        "checkpoint_dir": str(directory),
        "checkpoint_every": 1,
    }
    return FoldJob(**{**fields, **overrides})


def _run(
    job: FoldJob, stop_after: int | None = None, artifacts: Any = None
) -> list[dict[str, float]]:
    epochs = []
    port = free_port()
    for metrics in run_fold(
        job, rank=0, master_addr="127.0.0.1", master_port=port, artifacts=artifacts
    ):
        epochs.append(metrics)
        if stop_after is not None and len(epochs) == stop_after:
            break  # the worker "dies" here: the generator is closed mid-fold
    return epochs


def _stable(epochs: list[dict[str, float]]) -> list[dict[str, float]]:
    return [{k: v for k, v in m.items() if k not in VOLATILE} for m in epochs]


def test_resumed_fold_continues_from_its_checkpoint_and_ends_like_an_uninterrupted_one(
    tmp_path: Path,
) -> None:
    whole = _run(_job(tmp_path / "whole"))
    _run(_job(tmp_path / "cut"), stop_after=2)
    assert (tmp_path / "cut" / CHECKPOINT_FILE).is_file()
    assert not (tmp_path / "cut" / MODEL_FILE).exists()
    resumed = _run(_job(tmp_path / "cut", resume=True))
    assert [m.get("restored") for m in resumed] == [1.0, 1.0, None, None]
    assert [m["epoch"] for m in resumed] == [1.0, 2.0, 3.0, 4.0]
    assert _stable(resumed) == _stable(whole)  # same weights, optimizer, shuffles and dropout
    assert (tmp_path / "cut" / MODEL_FILE).is_file()
    assert not (tmp_path / "cut" / CHECKPOINT_FILE).exists()  # the model supersedes it


def test_checkpoints_every_n_epochs_and_saves_the_best_epochs_model(tmp_path: Path) -> None:
    job = _job(tmp_path, epochs=5, checkpoint_every=2, params={"lr": 0.5, "width": 12})
    epochs = _run(job)
    assert [m.get("checkpoint") for m in epochs] == [None, 1.0, None, 1.0, None]
    assert epochs[-1]["model_saved"] == 1.0
    saved = torch.load(tmp_path / MODEL_FILE)
    best = min(epochs, key=lambda m: m["val_loss"])
    assert saved["epoch"] == int(best["epoch"]) and saved["params"] == job.params
    model = resolve_task(job.task).build_model(saved["params"])
    model.load_state_dict(saved["state_dict"])  # a downloaded model rebuilds as documented


def test_a_fresh_attempt_ignores_and_clears_what_an_earlier_run_left(tmp_path: Path) -> None:
    _run(_job(tmp_path), stop_after=2)
    epochs = _run(_job(tmp_path, epochs=1))  # resume=False: the first attempt of a new study
    assert [m.get("restored") for m in epochs] == [None]


def test_a_checkpoint_of_another_job_is_not_resumed(tmp_path: Path) -> None:
    _run(_job(tmp_path), stop_after=2)
    other = _job(tmp_path, params={"lr": 0.03, "width": 12}, resume=True)
    assert _checkpoint_of(tmp_path, job_fingerprint(other)) is None
    assert _checkpoint_of(tmp_path, job_fingerprint(_job(tmp_path))) is not None
    assert [m.get("restored") for m in _run(other)] == [None] * 4


def test_no_checkpoint_directory_writes_nothing(tmp_path: Path) -> None:
    epochs = _run(_job(tmp_path / "x", checkpoint_dir=None, epochs=2))
    assert not (tmp_path / "x").exists()
    assert not any("model_saved" in m or "checkpoint" in m for m in epochs)


def test_artifact_dirs_are_keyed_by_study_trial_and_fold(tmp_path: Path) -> None:
    assert fold_artifact_dir(tmp_path, 3, 7, 1) == tmp_path / "study-3" / "trial-7" / "fold-1"
    with pytest.raises(ValueError, match="checkpoint_every"):
        _job(tmp_path, checkpoint_every=-1)


def test_a_damaged_checkpoint_is_ignored(tmp_path: Path) -> None:
    (tmp_path / CHECKPOINT_FILE).write_bytes(b"not a checkpoint")
    job = _job(tmp_path, resume=True)
    assert _checkpoint_of(tmp_path, job_fingerprint(job)) is None


def _checkpoint_of(directory: Path, fingerprint: str) -> dict[str, Any] | None:
    return matching_checkpoint(DirectoryArtifacts(directory).load_checkpoint(), fingerprint)


def test_buffered_artifacts_hand_over_what_rank_0_saved_and_resume_from_it(tmp_path) -> None:
    """A Ray worker's way: no file written; the checkpoint and model come out as bytes, and a
    retried attempt given the checkpoint's bytes continues where it left off."""
    job = _job(tmp_path / "unused", checkpoint_dir=None, artifact_key="study-1/trial-0/fold-0")
    first = BufferedArtifacts()
    _run(job, stop_after=2, artifacts=first)
    shipped = first.take()
    assert [name for name, _ in shipped] == [CHECKPOINT_FILE, CHECKPOINT_FILE]
    assert first.take() == []
    resumed = BufferedArtifacts(restore=shipped[-1][1])
    epochs = _run(FoldJob(**{**job.__dict__, "resume": True}), artifacts=resumed)
    assert [m.get("restored") for m in epochs] == [1.0, 1.0, None, None]
    names = [name for name, _ in resumed.take()]
    assert names == [CHECKPOINT_FILE, MODEL_FILE]
    assert not (tmp_path / "unused").exists()
    with pytest.raises(ValueError, match="artifact_key needs the artifacts"):
        _run(job)
