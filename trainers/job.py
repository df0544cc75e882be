"""FoldJob: everything a worker needs to run one fold of one trial, as one picklable value."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

DIRECTIONS = ("minimize", "maximize")
LR_SCALINGS = ("linear", "sqrt", "none")
BACKENDS = ("gloo", "nccl")


@dataclass(frozen=True)
class FoldJob:
    """One fold run of one trial: a DDP job of `world_size` ranks.

    `batch_size` is each rank's batch (Horovod practice), so the global batch grows with the
    ranks and `lr_scaling` scales the learning rate to match (Goyal et al.). `options` are passed
    to the task as-is; `trial_key` only labels logs and errors.
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
    lr_scaling: str = "linear"
    warmup_epochs: int = 0
    world_size: int = 1
    backend: str = "gloo"
    options: dict[str, Any] = field(default_factory=dict)
    trial_key: str = ""

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

    @property
    def per_rank_batch(self) -> int:
        """Each rank's batch; the global batch is this times ``world_size``."""
        return self.batch_size

    def describe(self) -> str:
        """A short label for logs and error messages."""
        key = self.trial_key or self.task
        return f"{key} fold {self.fold}/{self.folds}"


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise ValueError(f"FoldJob: {message}")
