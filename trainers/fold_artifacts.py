"""Where rank 0 of a fold run keeps its checkpoint and its trained model (DESIGN §6, §7).

Two homes, one interface: ``DirectoryArtifacts`` writes files in a directory (standalone use, and
tests); ``BufferedArtifacts`` keeps the bytes for its caller to ship (a Ray worker hands them to
the service, which stores them wherever its artifact store is, so no node needs shared storage).
"""

from __future__ import annotations

import io
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

import torch

from trainers.checkpoint import CHECKPOINT_FILE, MODEL_FILE, clear_fold_dir, save_atomic


class BaseFoldArtifacts(ABC):
    """One fold's checkpoint and model, as rank 0 sees them."""

    @abstractmethod
    def load_checkpoint(self) -> dict[str, Any] | None:
        """The last checkpoint, or None when there is none (or it cannot be read)."""

    @abstractmethod
    def save_checkpoint(self, state: dict[str, Any]) -> None:
        """Keep ``state`` as the fold's latest checkpoint."""

    @abstractmethod
    def save_model(self, model: dict[str, Any]) -> None:
        """Keep the fold's trained model; the checkpoint is no longer needed."""

    @abstractmethod
    def clear(self) -> None:
        """Forget what an earlier run of this fold left (a fresh attempt starts from scratch)."""


class DirectoryArtifacts(BaseFoldArtifacts):
    """Files in ``directory``, replaced atomically (a kill mid-write keeps the previous one)."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)

    def load_checkpoint(self) -> dict[str, Any] | None:
        path = self.directory / CHECKPOINT_FILE
        return load_state(path.read_bytes()) if path.is_file() else None

    def save_checkpoint(self, state: dict[str, Any]) -> None:
        save_atomic(state, self.directory / CHECKPOINT_FILE)

    def save_model(self, model: dict[str, Any]) -> None:
        save_atomic(model, self.directory / MODEL_FILE)
        (self.directory / CHECKPOINT_FILE).unlink(missing_ok=True)

    def clear(self) -> None:
        clear_fold_dir(self.directory)


class BufferedArtifacts(BaseFoldArtifacts):
    """Bytes for the caller to ship: ``take()`` hands over what was saved since the last call,
    as (file name, bytes), in order. ``restore`` is the checkpoint the caller found, if any;
    clearing is the caller's job too (it owns the store)."""

    def __init__(self, restore: bytes | None = None) -> None:
        self._restore = restore
        self._outbox: list[tuple[str, bytes]] = []

    def load_checkpoint(self) -> dict[str, Any] | None:
        return load_state(self._restore) if self._restore else None

    def save_checkpoint(self, state: dict[str, Any]) -> None:
        self._outbox.append((CHECKPOINT_FILE, to_bytes(state)))

    def save_model(self, model: dict[str, Any]) -> None:
        self._outbox.append((MODEL_FILE, to_bytes(model)))

    def clear(self) -> None:
        self._restore = None

    def take(self) -> list[tuple[str, bytes]]:
        items, self._outbox = self._outbox, []
        return items


def to_bytes(obj: Any) -> bytes:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def load_state(data: bytes) -> dict[str, Any] | None:
    """A saved state, or None when it cannot be read (a foreign or damaged file: the fold then
    trains from scratch instead)."""
    try:
        state = torch.load(io.BytesIO(data), map_location="cpu", weights_only=False)
    except Exception:
        return None
    return state if isinstance(state, dict) else None
