"""Run one fold of one trial as a DDP job and yield its metrics once per epoch (DESIGN §6).

Every rank runs `run_fold` with the same job and yields the same all-reduced metrics, so every
rank makes the same early-stopping decision. When the job keeps artifacts, rank 0 keeps a
checkpoint every `checkpoint_every` epochs and the fold's model at the end (in a directory, or as
bytes for its caller: ``trainers.fold_artifacts``); a resumed attempt first re-yields the
checkpoint's epochs (marked `restored: 1`) and then continues after them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from trainers.checkpoint import job_fingerprint, matching_checkpoint
from trainers.ddp import broadcast_object, master_store, process_group, resolve_device
from trainers.fold_artifacts import BaseFoldArtifacts, DirectoryArtifacts
from trainers.fold_training import FoldTraining, TrainingDiverged
from trainers.job import FoldJob
from trainers.monitor import ResourceMonitor
from trainers.objective import improved, make_stopper
from trainers.task import resolve_task

__all__ = ["TrainingDiverged", "master_store", "run_fold", "resolve_task"]


def run_fold(
    job: FoldJob,
    *,
    rank: int,
    master_addr: str,
    master_port: int,
    store: dist.Store | None = None,
    device: str | torch.device | None = None,
    data: tuple[np.ndarray, np.ndarray] | None = None,
    num_threads: int | None = None,
    stop_requested: Callable[[], bool] | None = None,
    artifacts: BaseFoldArtifacts | None = None,
) -> Iterator[dict[str, float]]:
    """Train `job`'s fold as rank `rank` of `job.world_size`; yield per-epoch metrics.

    Rank 0 listens for the others at `master_port`, or with `store` when it brings one
    (``trainers.ddp.master_store``). `data` skips `load_data()` (a warm worker passes its
    cached copy); `num_threads` sets torch's intra-op threads to this worker's CPU share.
    `stop_requested` is asked at the end of each epoch: once it says yes on any rank, every
    rank yields that epoch marked `stopped: 1` and returns (no model is saved). The process
    group is always destroyed on exit. `artifacts` is where rank 0 keeps its checkpoint and
    model: needed with `job.artifact_key`, a directory by default with `job.checkpoint_dir`;
    other ranks never use it.
    """
    if not 0 <= rank < job.world_size:
        raise ValueError(f"rank must be in [0, {job.world_size}), got {rank}")
    if rank == 0 and artifacts is None and job.keeps_artifacts:
        if job.checkpoint_dir is None:
            raise ValueError("a job with an artifact_key needs the artifacts to keep them in")
        artifacts = DirectoryArtifacts(job.checkpoint_dir)
    task = resolve_task(job.task)
    X, y = data if data is not None else task.load_data(job.options)
    if num_threads is not None:
        torch.set_num_threads(max(1, int(num_threads)))
    dev = resolve_device(job.backend, device)
    with (
        process_group(
            backend=job.backend,
            rank=rank,
            world_size=job.world_size,
            master_addr=master_addr,
            master_port=master_port,
            store=store,
        ),
        ResourceMonitor(dev) if job.monitor else contextlib.nullcontext() as monitor,
    ):
        training = FoldTraining(job, task, X, y, rank, dev)
        try:
            loop = _FoldLoop(job, training, rank, artifacts if rank == 0 else None)
            yield from loop.epochs(monitor, stop_requested)
        finally:
            training.release_ddp()  # before the process group goes: see release_ddp


class _FoldLoop:
    """The epoch loop: early stopping, the best epoch's weights, checkpoints and the model."""

    def __init__(
        self,
        job: FoldJob,
        training: FoldTraining,
        rank: int,
        artifacts: BaseFoldArtifacts | None,
    ) -> None:
        self.job, self.training, self.rank = job, training, rank
        self.stopper = make_stopper(
            job.stopping_rule,
            direction=job.direction,
            patience=job.patience,
            min_delta=job.min_delta,
        )
        self.keeps = job.keeps_artifacts
        self.artifacts = artifacts
        self.history: list[dict[str, float]] = []
        self.best: tuple[float, dict[str, float], dict[str, Any]] | None = None

    def epochs(
        self, monitor: ResourceMonitor | None, stop_requested: Callable[[], bool] | None
    ) -> Iterator[dict[str, float]]:
        for metrics in self._restore():
            yield {**metrics, "restored": 1.0}
        for epoch in range(len(self.history), self.job.epochs):
            metrics = self.training.run_epoch(epoch, monitor, stop_requested)
            if metrics.get("stopped"):  # asked to stop: this epoch is the last, nothing saved
                yield metrics
                return
            stop = self._record(metrics)
            if self.keeps:
                if stop or epoch + 1 == self.job.epochs:
                    metrics["model_saved"] = 1.0
                    self._save_model()
                elif self.job.checkpoint_every and (epoch + 1) % self.job.checkpoint_every == 0:
                    metrics["checkpoint"] = 1.0
                    self._save_checkpoint()
            yield metrics
            if stop:
                return

    def _record(self, metrics: dict[str, float]) -> bool:
        """Remember the epoch (and the best weights); True when early stopping says stop."""
        job = self.job
        if job.objective_metric not in metrics:
            raise ValueError(
                f"objective metric {job.objective_metric!r} is not reported; "
                f"this task reports {sorted(metrics)}"
            )
        value = metrics[job.objective_metric]
        self.history.append(dict(metrics))
        best_value = None if self.best is None else self.best[0]
        keep = self.artifacts is not None and job.objective_use == "best"
        if keep and improved(value, best_value, job.direction):
            weights = self.training.model.state_dict()
            cpu = {k: v.detach().to("cpu", copy=True) for k, v in weights.items()}
            self.best = (value, dict(metrics), cpu)
        return self.stopper.should_stop(value)

    def _restore(self) -> list[dict[str, float]]:
        """On a resumed attempt, load rank 0's checkpoint on every rank; else start clean."""
        if not self.keeps:
            return []
        state = None
        if self.artifacts is not None:
            if self.job.resume:
                found = self.artifacts.load_checkpoint()
                state = matching_checkpoint(found, job_fingerprint(self.job))
            else:
                self.artifacts.clear()
        state = broadcast_object(state, self.training.device)
        if state is None:
            return []
        self.training.load_state(state["training"])
        self.best = state["best"] if self.artifacts is not None else None
        for metrics in state["history"]:
            self._record_restored(metrics)
        return state["history"]

    def _record_restored(self, metrics: dict[str, float]) -> None:
        self.history.append(dict(metrics))
        self.stopper.should_stop(metrics[self.job.objective_metric])

    def _save_checkpoint(self) -> None:
        if self.artifacts is None:
            return
        state = {
            "fingerprint": job_fingerprint(self.job),
            "history": self.history,
            "training": self.training.state(),
            "best": self.best,
        }
        self.artifacts.save_checkpoint(state)

    def _save_model(self) -> None:
        """Write the fold's model (best or last epoch's weights) and drop the checkpoint."""
        if self.artifacts is None:
            return
        if self.best is not None:
            _, metrics, weights = self.best
        else:
            metrics, weights = self.history[-1], self.training.model.state_dict()
        model = {
            "task": self.job.task,
            "params": self.job.params,
            "fold": self.job.fold,
            "epoch": int(metrics["epoch"]),
            "metrics": metrics,
            "state_dict": weights,
        }
        self.artifacts.save_model(model)
