"""FoldJob: everything a worker needs to run one fold of one trial, as one picklable value.

It is built once from the typed study spec (``FoldJob.from_spec``) and carries the spec's own
types, already validated: the trial's trainer settings (with what its params search), the
objective and early stopping.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from foldwise.cv import CrossValidation
from foldwise.spec import EarlyStopping, Objective, StudySpec, TrainerSpec
from foldwise.trainers.lr_schedule import RatePlan, default_settings
from foldwise.trainers.report import EpochReport

Backend = Literal["gloo", "nccl"]


@dataclass(frozen=True)
class FoldJob:
    """One fold run of one trial: a DDP job of ``world_size`` ranks.

    ``fold`` is one of the trial's ``folds`` fold runs: ``parallel.folds`` of each of
    ``cv.repeats`` (fold ``r * parallel.folds + i`` is fold ``i`` of repeat ``r``), split by
    ``cv`` (``trainers.splits``).

    ``trainer.batch_size`` is each rank's batch (Horovod practice), so the global batch grows
    with the ranks and ``trainer.lr_scaling`` scales the learning rate to match (Goyal et al.).
    With ``artifact_key`` (where the fold's files live), rank 0 sends a checkpoint every
    ``trainer.checkpoint_every`` epochs and the fold's model at its end; ``resume`` (a retried
    attempt) continues from the checkpoint its caller hands it. ``trial_key`` labels logs.
    ``code_hash`` names the snapshot of the task's package the study runs (None: a built-in
    task, or code the workers have installed); the executor gives the workers that code.
    ``refit``: not a fold but the trial's params trained on all the training data (``fold``
    is 0 and unused), validated on the same data. ``attempt`` counts the fold's runs from 0
    (a retried one is 1, ...): each rank's random stream depends on it (``rank_seed``).
    """

    trainer: TrainerSpec
    params: dict[str, Any]
    fold: int
    folds: int
    objective: Objective = field(default_factory=Objective)
    cv: CrossValidation = field(default_factory=CrossValidation)
    early_stopping: EarlyStopping | None = None
    seed: int = 0
    world_size: int = 1
    backend: Backend = "gloo"
    trial_key: str = ""
    artifact_key: str | None = None
    resume: bool = False
    monitor: bool = True
    code_hash: str | None = None
    refit: bool = False
    attempt: int = 0

    def __post_init__(self) -> None:
        if not 0 <= self.fold < self.folds:
            raise ValueError(f"FoldJob: fold must be in [0, {self.folds}), got {self.fold}")
        if self.world_size < 1:
            raise ValueError(f"FoldJob: world_size must be >= 1, got {self.world_size}")
        if self.folds % self.cv.repeats:
            raise ValueError(
                f"FoldJob: folds ({self.folds}) must be a multiple of cv.repeats "
                f"({self.cv.repeats})"
            )

    @classmethod
    def from_spec(
        cls,
        spec: StudySpec,
        *,
        params: dict[str, Any],
        fold: int,
        trial_key: str = "",
        artifact_key: str | None = None,
        resume: bool = False,
        code_hash: str | None = None,
        attempt: int = 0,
    ) -> FoldJob:
        """Fold ``fold`` of the trial with ``params`` in the study ``spec``."""
        return cls(
            trainer=spec.trainer.for_trial(params),
            params=params,
            fold=fold,
            folds=spec.fold_count,
            objective=spec.objective,
            cv=spec.cv,
            early_stopping=spec.early_stopping,
            seed=spec.seed,
            world_size=spec.parallel.workers_per_fold,
            backend="nccl" if spec.resources.gpus_per_worker > 0 else "gloo",
            trial_key=trial_key,
            artifact_key=artifact_key,
            resume=resume,
            code_hash=code_hash,
            attempt=attempt,
        )

    @property
    def task(self) -> str:
        return self.trainer.task

    @property
    def epochs(self) -> int:
        return self.trainer.epochs

    @property
    def batch_size(self) -> int:
        """Each rank's batch; the global batch is this times ``world_size``."""
        return self.trainer.batch_size

    @property
    def keeps_artifacts(self) -> bool:
        """Whether rank 0 sends checkpoints and the model (every rank must know: a restored
        checkpoint is broadcast to all)."""
        return self.artifact_key is not None

    @property
    def fold_seed(self) -> int:
        """The seed of this fold's initial weights, the same on every rank and every attempt
        (a refit's is a fold number of its own)."""
        return self.seed * 1_000_003 + (self.folds if self.refit else self.fold)

    def rank_seed(self, rank: int) -> int:
        """The seed of rank ``rank``'s own random stream (torch, numpy, ``random`` and its
        DataLoader workers): from (study seed, fold, rank, attempt), so no two ranks draw the
        same dropout masks or augmentations and a rerun draws what the first run drew."""
        fold = self.folds if self.refit else self.fold
        entropy = [self.seed, fold, rank, self.attempt]
        return int(np.random.SeedSequence(entropy).generate_state(1, np.uint64)[0] >> 1)

    def rate_plan(self, *, own_loop: bool) -> RatePlan:
        """The run's learning-rate scaling and warm-up: the study's, or its loop's default
        where the study left them open (``trainers.lr_schedule.default_settings``)."""
        scaling, warmup = default_settings(own_loop=own_loop)
        trainer = self.trainer
        return RatePlan(
            world_size=self.world_size,
            scaling=scaling if trainer.lr_scaling is None else trainer.lr_scaling,
            warmup_epochs=warmup if trainer.warmup_epochs is None else trainer.warmup_epochs,
        )

    def fingerprint(self) -> str:
        """A hash of everything that shapes training, so a checkpoint resumes only the same job."""
        shaping = {
            "trainer": self.trainer.model_dump(
                mode="json", exclude={"retries", "fold_timeout", "checkpoint_every"}
            ),
            "params": self.params,
            "fold": self.fold,
            "folds": self.folds,
            "seed": self.seed,
            "world_size": self.world_size,
        }
        if self.cv != CrossValidation():  # absent when default: older checkpoints still match
            shaping["cv"] = self.cv.model_dump(mode="json")
        if self.refit:
            shaping["refit"] = True
        payload = json.dumps(shaping, sort_keys=True, default=str)
        return hashlib.sha256(payload.encode()).hexdigest()[:16]

    def describe(self) -> str:
        """A short label for logs and error messages."""
        key = self.trial_key or self.task
        return f"{key} refit" if self.refit else f"{key} fold {self.fold}/{self.folds}"


def trained_seconds(epochs: Iterable[EpochReport]) -> float:
    """Seconds a fold run spent training these epochs. An epoch replayed from an earlier
    attempt's checkpoint was trained then, not in this run: it counts 0."""
    return sum(float(e.metrics.get("epoch_seconds", 0.0)) for e in epochs if not e.restored)
