"""Building fold jobs and running them in this process, for the trainers' tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from foldwise.cv import CrossValidation
from foldwise.spec import EarlyStopping, Objective, TrainerSpec
from foldwise.trainers.ddp import free_port
from foldwise.trainers.fold_runner import run_fold, run_fold_in_directory
from foldwise.trainers.job import FoldJob
from foldwise.trainers.report import EpochReport, FoldEvent

TIMING = {"epoch_start", "train_seconds", "val_seconds", "epoch_seconds", "samples_per_second"}
TIMING |= {"cpu_percent", "rss_mb"}
"""Metrics that differ from run to run (wall-clock and resource use)."""


def make_job(
    task: str = "tests.user_tasks.tiny",
    *,
    params: dict[str, Any] | None = None,
    fold: int = 0,
    folds: int = 3,
    seed: int = 0,
    world_size: int = 1,
    artifact_key: str | None = None,
    resume: bool = False,
    trial_key: str = "",
    objective: dict[str, Any] | None = None,
    early_stopping: dict[str, Any] | None = None,
    cv: dict[str, Any] | None = None,
    **trainer: Any,
) -> FoldJob:
    """A job for ``task`` with ``trainer`` settings (validated by the spec's own types);
    ``folds`` counts every fold run of a trial (``parallel.folds`` x ``cv.repeats``)."""
    return FoldJob(
        trainer=TrainerSpec(task=task, **trainer),
        params=params or {},
        fold=fold,
        folds=folds,
        objective=Objective.model_validate(objective or {}, strict=False),
        cv=CrossValidation.model_validate(cv or {}, strict=False),
        early_stopping=None if early_stopping is None else EarlyStopping(**early_stopping),
        seed=seed,
        world_size=world_size,
        artifact_key=artifact_key,
        resume=resume,
        trial_key=trial_key,
    )


def run_local(job: FoldJob, directory: str | Path | None = None, **kwargs: Any) -> list[FoldEvent]:
    """Every event of ``job`` run as rank 0 of one (files in ``directory``, when given)."""
    kwargs = {"rank": 0, "master_addr": "127.0.0.1", "master_port": free_port(), **kwargs}
    kwargs.setdefault("num_threads", 1)
    if directory is None:
        return list(run_fold(job, **kwargs))
    return list(run_fold_in_directory(job, directory, **kwargs))


def epochs_of(events: list[FoldEvent]) -> list[EpochReport]:
    return [e for e in events if isinstance(e, EpochReport)]


def stable(reports: list[EpochReport]) -> list[dict[str, float]]:
    """The reports' metrics without what differs from run to run."""
    return [{k: v for k, v in r.metrics.items() if k not in TIMING} for r in reports]
