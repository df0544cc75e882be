"""What a fold run sends back while it trains: one report per epoch, and what rank 0 saved.

A fold run is a stream of these values (DESIGN §6): an ``EpochReport`` for each epoch (the
task's metrics, apart from the flags that say how the epoch counts), a ``SavedArtifact``
whenever rank 0 keeps a checkpoint or the fold's model, and a ``FoldWarning`` whenever the run
knows something it reports is suspect (the study shows it to the user). Plain values that
import neither torch nor Ray, so the service reads them without loading either.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

CHECKPOINT_FILE = "checkpoint.pt"
"""Latest training state of a running fold; removed once the fold's model is saved."""
MODEL_FILE = "model.pt"
"""The fold's trained model: {task, module, code_hash, params, trainer, fold, refit, epoch,
metrics, state_dict} and what ``save_model`` added: enough to rebuild it
(``foldwise.trainers.load_model``)."""

MEASURED_METRICS = ("epoch_start", "epoch_seconds", "cpu_percent", "rss_mb")
"""What foldwise measures of every epoch, whatever loop trains it (mean over the ranks)."""
GPU_METRICS = ("gpu_mem_mb", "gpu_util_percent")
"""Measured as well on ranks that train on a GPU."""
MODEL_METRICS = ("n_params",)
"""Counted of the model a fold function prepared (``ctx.prepare_model``; the built-in loop does
it): its trainable parameters, in every epoch's report, for objectives and constraints on model
size. A task that reports ``n_params`` itself keeps its own count."""
RATE_METRIC = "optimizer_lr"
"""The learning rate the epoch's last optimizer step used (the first parameter group of the
first optimizer that stepped), as foldwise saw it: recorded on every path, in epochs whose
fold function stepped an optimizer."""
RESERVED_METRICS = frozenset({"epoch", RATE_METRIC, *MEASURED_METRICS, *GPU_METRICS})
"""Names a task may not report: foldwise fills them in."""


@dataclass(frozen=True)
class EpochReport:
    """One epoch of a fold run, as rank 0 reported it.

    ``epoch`` counts from 1. ``metrics`` are what the task reported and what foldwise measured
    (``MEASURED_METRICS``). ``restored``: replayed from an earlier attempt's checkpoint (trained
    then, not now). ``stopped``: the run was told to stop (racing, pruning or the study) and
    ends after this epoch, which counts for nothing.
    """

    epoch: int
    metrics: dict[str, float]
    restored: bool = False
    stopped: bool = False


class ArtifactKind(StrEnum):
    CHECKPOINT = "checkpoint"
    MODEL = "model"


@dataclass(frozen=True)
class SavedArtifact:
    """A checkpoint or the fold's model, saved by rank 0 after its report of ``epoch``."""

    kind: ArtifactKind
    epoch: int
    data: bytes = field(repr=False)

    @property
    def file_name(self) -> str:
        return CHECKPOINT_FILE if self.kind is ArtifactKind.CHECKPOINT else MODEL_FILE


class WarningKind(StrEnum):
    """What a fold run's warning is about."""

    PARTIAL_METRIC = "partial_metric"
    """A metric differs across the ranks: computed over each rank's share of the fold."""
    AUGMENTED_VALIDATION = "augmented_validation"
    """The validation fold is read through the training transforms."""
    VALIDATION_SAMPLES = "validation_samples"
    """Some validation samples are not counted exactly once."""
    LIGHTNING = "lightning"
    """A warning Lightning gave while it trained the fold."""
    TASK = "task"
    """What the task's own code said with ``ctx.warn``."""


@dataclass(frozen=True)
class FoldWarning:
    """Something the fold run knows is suspect about what it reports, said once per run:
    ``message`` names no trial or value of its own, so the same problem in many runs is one
    warning of the study."""

    kind: WarningKind
    message: str


FoldEvent = EpochReport | SavedArtifact | FoldWarning
"""What a fold run's stream carries."""
