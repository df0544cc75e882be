"""FoldJob: everything a worker needs to run one fold of one trial, as one picklable value."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

DIRECTIONS = ("minimize", "maximize")
LR_SCALINGS = ("linear", "sqrt", "none")
BACKENDS = ("gloo", "nccl")
STOPPING_RULES = ("patience", "smoothed")
USES = ("best", "last")


@dataclass(frozen=True)
class FoldJob:
    """One fold run of one trial: a DDP job of `world_size` ranks.

    `batch_size` is each rank's batch (Horovod practice), so the global batch grows with the
    ranks and `lr_scaling` scales the learning rate to match (Goyal et al.). `options` are passed
    to the task as-is; `trial_key` only labels logs and errors.

    With `checkpoint_dir` set, rank 0 writes a checkpoint there every `checkpoint_every` epochs
    (0: never) and the fold's model when it ends; `resume` (a retried attempt) continues from the
    checkpoint found there instead of epoch 0. `artifact_key` (the service's key of the fold in
    its artifact store) does the same, with the checkpoint and model handed to the caller
    (``trainers.fold_artifacts.BufferedArtifacts``) instead of written here.
    """

    task: str
    params: dict[str, Any]
    fold: int
    folds: int
    seed: int = 0
    epochs: int = 10
    batch_size: int = 64
    objective_metric: str = "val_loss"
    direction: str = "minimize"
    patience: int | None = None
    min_delta: float = 0.0
    stopping_rule: str = "patience"
    objective_use: str = "best"
    lr_scaling: str = "linear"
    warmup_epochs: int = 0
    world_size: int = 1
    backend: str = "gloo"
    options: dict[str, Any] = field(default_factory=dict)
    trial_key: str = ""
    checkpoint_dir: str | None = None
    artifact_key: str | None = None
    checkpoint_every: int = 0
    resume: bool = False
    monitor: bool = True

    def __post_init__(self) -> None:
        _check(bool(self.task), "task must be a non-empty name")
        _check(self.folds >= 2, f"folds must be >= 2, got {self.folds}")
        _check(0 <= self.fold < self.folds, f"fold must be in [0, {self.folds}), got {self.fold}")
        _check(self.epochs >= 1, f"epochs must be >= 1, got {self.epochs}")
        _check(self.world_size >= 1, f"world_size must be >= 1, got {self.world_size}")
        _check(self.batch_size >= 1, f"batch_size must be >= 1, got {self.batch_size}")
        _check(self.direction in DIRECTIONS, f"direction must be one of {DIRECTIONS}")
        _check(self.lr_scaling in LR_SCALINGS, f"lr_scaling must be one of {LR_SCALINGS}")
        _check(self.backend in BACKENDS, f"backend must be one of {BACKENDS}")
        _check(self.patience is None or self.patience >= 1, "patience must be >= 1 or None")
        _check(self.min_delta >= 0, f"min_delta must be >= 0, got {self.min_delta}")
        _check(self.warmup_epochs >= 0, f"warmup_epochs must be >= 0, got {self.warmup_epochs}")
        _check(bool(self.objective_metric), "objective_metric must be a non-empty name")
        _check(
            self.stopping_rule in STOPPING_RULES, f"stopping_rule must be one of {STOPPING_RULES}"
        )
        _check(self.objective_use in USES, f"objective_use must be one of {USES}")
        _check(
            self.checkpoint_every >= 0,
            f"checkpoint_every must be >= 0, got {self.checkpoint_every}",
        )

    @property
    def keeps_artifacts(self) -> bool:
        """Whether rank 0 checkpoints and saves the model (every rank must know: the restored
        checkpoint is broadcast)."""
        return self.checkpoint_dir is not None or self.artifact_key is not None

    @property
    def per_rank_batch(self) -> int:
        """Each rank's batch; the global batch is this times ``world_size``."""
        return self.batch_size

    def describe(self) -> str:
        """A short label for logs and error messages."""
        key = self.trial_key or self.task
        return f"{key} fold {self.fold}/{self.folds}"


def trained_seconds(epochs: Iterable[Mapping[str, float]]) -> float:
    """Seconds a fold run spent training these epochs. An epoch replayed from an earlier
    attempt's checkpoint (metric ``restored``) was trained then, not in this run: it counts 0."""
    return sum(float(m.get("epoch_seconds", 0.0)) for m in epochs if not m.get("restored"))


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise ValueError(f"FoldJob: {message}")
