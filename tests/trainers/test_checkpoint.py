"""Checkpoints: a resumed fold continues where its checkpoint left off and ends where an
uninterrupted run ends; the fold's model is saved; stale or foreign checkpoints are ignored."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import torch

from foldwise.trainers.artifact_keys import fold_artifact_dir
from foldwise.trainers.ddp import free_port
from foldwise.trainers.fold_runner import load_state, run_fold_in_directory
from foldwise.trainers.job import FoldJob
from foldwise.trainers.report import (
    CHECKPOINT_FILE,
    MODEL_FILE,
    ArtifactKind,
    EpochReport,
    SavedArtifact,
)
from foldwise.trainers.task import resolve_task
from tests.trainers.fold_jobs import epochs_of, make_job, run_local, stable


def _job(**overrides: Any) -> FoldJob:
    fields: dict[str, Any] = {
        "params": {"lr": 0.02, "width": 12},
        "seed": 4,
        "epochs": 4,
        "batch_size": 20,
        "artifact_key": "study-1/trial-0/fold-0",
        "checkpoint_every": 1,
    }
    return make_job(**{**fields, **overrides})


def _cut(job: FoldJob, directory: Path, after: int) -> None:
    """Run ``job`` until its ``after``-th report; its worker "dies" there (the stream closes)."""
    events = run_fold_in_directory(
        job, directory, rank=0, master_addr="127.0.0.1", master_port=free_port(), num_threads=1
    )
    reports = 0
    for event in events:
        reports += isinstance(event, EpochReport)
        if reports == after and isinstance(event, SavedArtifact):
            break
    events.close()


def test_resumed_fold_continues_from_its_checkpoint_and_ends_like_an_uninterrupted_one(
    tmp_path: Path,
) -> None:
    whole = epochs_of(run_local(_job(), tmp_path / "whole"))
    _cut(_job(), tmp_path / "cut", after=2)
    assert (tmp_path / "cut" / CHECKPOINT_FILE).is_file()
    assert not (tmp_path / "cut" / MODEL_FILE).exists()
    resumed = epochs_of(run_local(_job(resume=True), tmp_path / "cut"))
    assert [(e.epoch, e.restored) for e in resumed] == [
        (1, True),
        (2, True),
        (3, False),
        (4, False),
    ]
    assert stable(resumed) == stable(whole)  # same weights, optimizer, shuffles and dropout
    assert (tmp_path / "cut" / MODEL_FILE).is_file()
    assert not (tmp_path / "cut" / CHECKPOINT_FILE).exists()  # the model supersedes it


def test_checkpoints_every_n_epochs_and_saves_the_best_epochs_model(tmp_path: Path) -> None:
    job = _job(epochs=5, checkpoint_every=2, params={"lr": 0.5, "width": 12})
    events = run_local(job, tmp_path)
    saved = [(e.kind, e.epoch) for e in events if isinstance(e, SavedArtifact)]
    assert saved[:2] == [(ArtifactKind.CHECKPOINT, 2), (ArtifactKind.CHECKPOINT, 4)]
    best = min(epochs_of(events), key=lambda e: e.metrics["val_loss"])
    assert saved[2] == (ArtifactKind.MODEL, best.epoch) and len(saved) == 3
    model = torch.load(tmp_path / MODEL_FILE)
    assert model["epoch"] == best.epoch and model["params"] == job.params
    built = resolve_task(job.task).obj.build_model(model["params"])
    built.load_state_dict(model["state_dict"])  # a downloaded model rebuilds as documented


def test_a_fresh_attempt_ignores_and_clears_what_an_earlier_run_left(tmp_path: Path) -> None:
    _cut(_job(), tmp_path, after=2)
    epochs = epochs_of(run_local(_job(epochs=1), tmp_path))  # resume=False: a first attempt
    assert [e.restored for e in epochs] == [False]


def test_a_checkpoint_of_another_job_is_not_resumed(tmp_path: Path) -> None:
    _cut(_job(), tmp_path, after=2)
    other = _job(params={"lr": 0.03, "width": 12}, resume=True)
    assert [e.restored for e in epochs_of(run_local(other, tmp_path))] == [False] * 4


def test_no_artifact_key_sends_no_files() -> None:
    events = run_local(_job(artifact_key=None, epochs=2))
    assert not [e for e in events if isinstance(e, SavedArtifact)]


def test_artifact_dirs_are_keyed_by_study_trial_and_fold(tmp_path: Path) -> None:
    assert fold_artifact_dir(tmp_path, 3, 7, 1) == tmp_path / "study-3" / "trial-7" / "fold-1"
    with pytest.raises(ValueError, match="checkpoint_every"):
        _job(checkpoint_every=-1)


def test_a_damaged_checkpoint_is_ignored(tmp_path: Path) -> None:
    assert load_state(b"not a checkpoint") is None
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / CHECKPOINT_FILE).write_bytes(b"not a checkpoint")
    epochs = epochs_of(run_local(_job(resume=True, epochs=2), tmp_path))
    assert [e.restored for e in epochs] == [False, False]


def test_a_resume_given_the_checkpoints_bytes_continues_where_it_left_off(tmp_path) -> None:
    """A Ray worker's way: rank 0 gets the bytes its service kept, and sends what it saves."""
    first = run_fold_in_directory(
        _job(), tmp_path, rank=0, master_addr="127.0.0.1", master_port=free_port()
    )
    shipped = []
    for event in first:
        if isinstance(event, SavedArtifact):
            shipped.append(event)
            if len(shipped) == 2:
                break
    first.close()
    assert [(a.kind, a.epoch) for a in shipped] == [(ArtifactKind.CHECKPOINT, 1)] * 1 + [
        (ArtifactKind.CHECKPOINT, 2)
    ]
    resumed = run_local(dataclasses.replace(_job(), resume=True), restore=shipped[-1].data)
    assert [e.restored for e in epochs_of(resumed)] == [True, True, False, False]
    files = [(a.kind, a.epoch) for a in resumed if isinstance(a, SavedArtifact)]
    assert files == [(ArtifactKind.CHECKPOINT, 3), (ArtifactKind.MODEL, files[-1][1])]
