"""Run one fold of one trial as a DDP job and yield its metrics once per epoch (DESIGN §6).

Every rank runs `run_fold` with the same job. The training indices are sharded by a
DistributedSampler that pads rather than drops, so every rank takes the same number of steps and an
uneven last batch never deadlocks; validation shards the held-out fold and all-reduces sums, so
every rank yields identical metrics and makes identical early-stopping decisions.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator

import numpy as np
import torch
from torch.utils.data import DistributedSampler

from trainers.ddp import all_reduce_max, all_reduce_sum, process_group, resolve_device, wrap_model
from trainers.job import FoldJob
from trainers.kfold import make_folds
from trainers.lr_schedule import lr_factor
from trainers.objective import EarlyStopping
from trainers.task import Task, resolve_task

VAL_BATCH = 1024
"""Validation batch size per rank (no gradients, so larger than the training batch)."""


class TrainingDiverged(RuntimeError):
    """A training or validation loss became NaN or infinite."""


def run_fold(
    job: FoldJob,
    *,
    rank: int,
    master_addr: str,
    master_port: int,
    device: str | torch.device | None = None,
    data: tuple[np.ndarray, np.ndarray] | None = None,
    num_threads: int | None = None,
) -> Iterator[dict[str, float]]:
    """Train `job`'s fold as rank `rank` of `job.world_size`; yield per-epoch metrics.

    `data` skips `load_data()` (a warm worker passes its cached copy); `num_threads` sets torch's
    intra-op threads to this worker's CPU share. The process group is always destroyed on exit.
    """
    if not 0 <= rank < job.world_size:
        raise ValueError(f"rank must be in [0, {job.world_size}), got {rank}")
    task = resolve_task(job.task)
    X, y = data if data is not None else task.load_data(job.options)
    if num_threads is not None:
        torch.set_num_threads(max(1, int(num_threads)))
    dev = resolve_device(job.backend, device)
    with process_group(
        backend=job.backend,
        rank=rank,
        world_size=job.world_size,
        master_addr=master_addr,
        master_port=master_port,
    ):
        yield from _FoldTraining(job, task, X, y, rank, dev).epochs()


class _FoldTraining:
    """The state of one rank's fold run: data shards, DDP model, optimizer, sampler."""

    def __init__(
        self,
        job: FoldJob,
        task: Task,
        X: np.ndarray,
        y: np.ndarray,
        rank: int,
        device: torch.device,
    ) -> None:
        self.job, self.task, self.rank, self.device = job, task, rank, device
        self.classify = task.kind == "classification"
        folds = make_folds(y, job.folds, job.seed, stratified=self.classify)
        self.train_idx, self.val_idx = folds[job.fold]
        floating = np.issubdtype(X.dtype, np.floating)
        self.X = torch.as_tensor(X.astype(np.float32) if floating else X)
        self.y = torch.as_tensor(y, dtype=torch.long if self.classify else torch.float32)
        if not self.classify and self.y.ndim == 1:
            self.y = self.y.unsqueeze(1)
        seed = job.seed * 1_000_003 + job.fold  # same initial weights on every rank
        torch.manual_seed(seed)
        self.model = task.build_model(job.params).to(device)
        self.ddp = wrap_model(self.model, device)
        torch.manual_seed(seed + 1 + rank)  # independent dropout masks per rank
        self.optimizer = task.make_optimizer(self.model, job.params)
        self.base_lrs = [group["lr"] for group in self.optimizer.param_groups]
        self.loss_fn = task.loss_fn(job.params)
        self.sampler = DistributedSampler(
            range(len(self.train_idx)),
            num_replicas=job.world_size,
            rank=rank,
            shuffle=True,
            seed=job.seed,
            drop_last=False,
        )

    def epochs(self) -> Iterator[dict[str, float]]:
        job = self.job
        stopper = EarlyStopping(
            direction=job.direction, patience=job.patience, min_delta=job.min_delta
        )
        for epoch in range(job.epochs):
            metrics = self._run_epoch(epoch)
            if job.objective_metric not in metrics:
                raise ValueError(
                    f"objective metric {job.objective_metric!r} is not reported; "
                    f"this task reports {sorted(metrics)}"
                )
            yield metrics
            if stopper.should_stop(metrics[job.objective_metric]):
                return

    def _run_epoch(self, epoch: int) -> dict[str, float]:
        started = time.perf_counter()
        train_sum, train_n = self._train(epoch)
        train_seconds = time.perf_counter() - started
        val = self._validate()
        seconds = time.perf_counter() - started
        sums = all_reduce_sum([train_sum, train_n, *val], self.device)
        train_seconds, seconds = all_reduce_max([train_seconds, seconds], self.device)
        metrics = {
            "epoch": float(epoch + 1),
            "train_loss": sums[0] / max(sums[1], 1.0),
            "val_loss": sums[2] / max(sums[3], 1.0),
            "val_accuracy" if self.classify else "val_mse": sums[4] / max(sums[5], 1.0),
            "lr": float(self.optimizer.param_groups[0]["lr"]),
            "epoch_seconds": seconds,
            "samples_per_second": sums[1] / max(train_seconds, 1e-9),
        }
        for name in ("train_loss", "val_loss"):
            if not math.isfinite(metrics[name]):
                raise TrainingDiverged(
                    f"{name.replace('_', ' ')} became {metrics[name]} at epoch {epoch + 1}"
                )
        return metrics

    def _train(self, epoch: int) -> tuple[float, float]:
        """One pass over this rank's shard; returns (sum of sample losses, samples)."""
        self.ddp.train()
        self.sampler.set_epoch(epoch)
        local = torch.as_tensor(self.train_idx[list(iter(self.sampler))])
        batch = self.job.per_rank_batch
        steps = math.ceil(len(local) / batch)
        loss_sum = 0.0
        for step in range(steps):
            self._set_lr(epoch, step, steps)
            idx = local[step * batch : (step + 1) * batch]
            xb, yb = self.X[idx].to(self.device), self.y[idx].to(self.device)
            self.optimizer.zero_grad(set_to_none=True)
            loss = self.loss_fn(self._align(self.ddp(xb), yb), yb)
            loss.backward()
            self.optimizer.step()
            loss_sum += float(loss.item()) * len(idx)
        return loss_sum, float(len(local))

    def _set_lr(self, epoch: int, step: int, steps: int) -> None:
        job = self.job
        factor = lr_factor(
            world_size=job.world_size,
            scaling=job.lr_scaling,
            warmup_epochs=job.warmup_epochs,
            epoch=epoch,
            step=step,
            steps_per_epoch=steps,
        )
        for group, base in zip(self.optimizer.param_groups, self.base_lrs, strict=True):
            group["lr"] = base * factor

    @torch.no_grad()
    def _validate(self) -> list[float]:
        """Evaluate this rank's share of the held-out fold.

        Returns [loss sum, samples, metric sum, metric count] for the all-reduce.
        """
        self.model.eval()
        shard = torch.as_tensor(self.val_idx[self.rank :: self.job.world_size])
        loss_sum = metric_sum = metric_n = 0.0
        for start in range(0, len(shard), VAL_BATCH):
            idx = shard[start : start + VAL_BATCH]
            xb, yb = self.X[idx].to(self.device), self.y[idx].to(self.device)
            out = self._align(self.model(xb), yb)
            loss_sum += float(self.loss_fn(out, yb).item()) * len(idx)
            if self.classify:
                metric_sum += float((out.argmax(dim=1) == yb).sum().item())
                metric_n += len(idx)
            else:
                metric_sum += float(((out - yb) ** 2).sum().item())
                metric_n += yb.numel()
        return [loss_sum, float(len(shard)), metric_sum, metric_n]

    def _align(self, out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Regression outputs of shape (n,) meet targets of shape (n, 1) without broadcasting."""
        if not self.classify and out.shape != target.shape and out.numel() == target.numel():
            return out.reshape(target.shape)
        return out
