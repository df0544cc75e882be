"""The service's artifact store: where fold checkpoints and models live (DESIGN §7).

Workers never write here: rank 0 hands its checkpoint and model to the service through Ray, and
the service stores them under ``FOLDWISE_ARTIFACT_DIR``, a local directory by default or any
fsspec URL (``s3://bucket/prefix``, ``gs://...``, with that filesystem's package installed). So a
fold retried on another node resumes from its checkpoint, and models of folds trained on any node
can be downloaded, with no storage shared between the nodes.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path

import fsspec
from fsspec.implementations.local import LocalFileSystem

from foldwise.trainers.artifact_keys import (
    fold_artifact_key,
    refit_artifact_key,
    study_artifact_key,
)
from foldwise.trainers.report import CHECKPOINT_FILE, MODEL_FILE

CHUNK_BYTES = 1024 * 1024


class ArtifactStore:
    """Bytes by key (``study-1/trial-3/fold-0/model.pt``) under one root location."""

    def __init__(self, location: str | os.PathLike[str]) -> None:
        self.location = str(location)
        self.fs, root = fsspec.core.url_to_fs(self.location)
        self.root = root.rstrip("/")
        self.is_local = isinstance(self.fs, LocalFileSystem)

    def path(self, key: str) -> str:
        return f"{self.root}/{key}"

    def read(self, key: str) -> bytes | None:
        """The bytes stored under ``key``, or None when there are none."""
        try:
            return self.fs.cat_file(self.path(key))
        except FileNotFoundError:
            return None

    def write(self, key: str, data: bytes) -> None:
        """Store ``data`` under ``key``; a local file is replaced atomically, so a crash
        mid-write keeps the previous one."""
        path = self.path(key)
        if not self.is_local:
            self.fs.pipe_file(path, data)
            return
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
        temporary.write_bytes(data)
        os.replace(temporary, target)

    def exists(self, key: str) -> bool:
        return bool(self.fs.exists(self.path(key)))

    def delete(self, key: str) -> None:
        """Remove ``key`` and, for a folder, everything under it; nothing there is no error."""
        path = self.path(key)
        if self.fs.exists(path):
            self.fs.rm(path, recursive=True)

    def local_path(self, key: str) -> Path | None:
        """The file of ``key`` when the store is a local directory and it exists."""
        if not self.is_local:
            return None
        path = Path(self.path(key))
        return path if path.is_file() else None

    def chunks(self, key: str) -> Iterator[bytes]:
        """The bytes of ``key`` in pieces, for a streamed download from a remote store."""
        with self.fs.open(self.path(key), "rb") as source:
            while chunk := source.read(CHUNK_BYTES):
                yield chunk

    def keep_fold_files(self, fold_key: str, files: list[tuple[str, bytes]]) -> None:
        """Store what rank 0 of a fold run handed over, in order; the model supersedes the
        checkpoint, which is removed once the model is stored."""
        for name, data in files:
            self.write(f"{fold_key}/{name}", data)
            if name == MODEL_FILE:
                self.delete(f"{fold_key}/{CHECKPOINT_FILE}")

    def checkpoint(self, fold_key: str) -> bytes | None:
        return self.read(f"{fold_key}/{CHECKPOINT_FILE}")


@lru_cache(maxsize=8)
def artifact_store(location: str) -> ArtifactStore:
    """The store at ``location``, made once per process."""
    return ArtifactStore(location)


def fold_model_key(study_id: int, trial_number: int, fold: int) -> str:
    return f"{fold_artifact_key(study_id, trial_number, fold)}/{MODEL_FILE}"


def refit_model_key(study_id: int, trial_number: int, refit_number: int) -> str:
    return f"{refit_artifact_key(study_id, trial_number, refit_number)}/{MODEL_FILE}"


def delete_study_artifacts(store: ArtifactStore, study_id: int) -> None:
    """Remove everything the study's fold runs left (blocking: run it off the event loop)."""
    store.delete(study_artifact_key(study_id))
