"""The artifact store: keyed bytes in a local directory or behind an fsspec URL."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from foldwise.service.artifact_store import ArtifactStore, delete_study_artifacts
from foldwise.trainers.report import CHECKPOINT_FILE, MODEL_FILE


@pytest.fixture(params=["local", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ArtifactStore:
    if request.param == "local":
        return ArtifactStore(tmp_path / "artifacts")
    return ArtifactStore(f"memory://test-{uuid.uuid4().hex}")


def test_fold_files_arrive_in_order_and_the_model_supersedes_the_checkpoint(
    store: ArtifactStore,
) -> None:
    key = "study-1/trial-2/fold-0"
    store.keep_fold_files(key, [(CHECKPOINT_FILE, b"epoch 1"), (CHECKPOINT_FILE, b"epoch 2")])
    assert store.checkpoint(key) == b"epoch 2"
    store.keep_fold_files(key, [(MODEL_FILE, b"model")])
    assert store.checkpoint(key) is None
    assert store.read(f"{key}/{MODEL_FILE}") == b"model"
    assert b"".join(store.chunks(f"{key}/{MODEL_FILE}")) == b"model"
    assert (store.local_path(f"{key}/{MODEL_FILE}") is not None) == store.is_local


def test_deleting_a_study_removes_its_files_and_no_other(store: ArtifactStore) -> None:
    store.write("study-1/trial-0/fold-0/model.pt", b"a")
    store.write("study-11/trial-0/fold-0/model.pt", b"b")
    delete_study_artifacts(store, 1)
    delete_study_artifacts(store, 1)  # nothing left there is no error
    assert store.read("study-1/trial-0/fold-0/model.pt") is None
    assert store.read("study-11/trial-0/fold-0/model.pt") == b"b"


def test_a_relative_local_directory_becomes_absolute(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    store = ArtifactStore("./artifacts")
    store.write("study-1/x", b"1")
    assert (tmp_path / "artifacts" / "study-1" / "x").read_bytes() == b"1"
    assert store.is_local and Path(store.root).is_absolute()
