"""One rank's training state for a fold run: data shard, model, optimizer, and one epoch of work.

The training indices are sharded like DistributedSampler with padding rather than dropping, so
every rank takes the same number of steps and an uneven last batch never deadlocks; validation
shards the held-out fold and all-reduces sums, so every rank computes identical metrics.
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch.utils.data import DistributedSampler

from trainers.ddp import all_reduce_max, all_reduce_sum, wrap_model
from trainers.job import FoldJob
from trainers.kfold import make_folds
from trainers.lr_schedule import lr_factor
from trainers.monitor import ResourceMonitor
from trainers.task import Task

VAL_BATCH = 1024
"""Validation batch size per rank (no gradients, so larger than the training batch)."""
USAGE_KEYS = ("cpu_percent", "rss_mb", "gpu_util_percent", "gpu_mem_mb")
"""Resource fields averaged over the ranks that report them."""
TIMING_KEYS = ("lr", "epoch_seconds", "train_seconds", "val_seconds", "samples_per_second")


def epoch_metric_names(kind: str, *, gpu: bool) -> list[str]:
    """What every epoch of a task of ``kind`` reports (``run_epoch``), so what an objective
    may name; the GPU fields only come from ranks that have a GPU."""
    score = "val_accuracy" if kind == "classification" else "val_mse"
    usage = USAGE_KEYS if gpu else USAGE_KEYS[:2]
    return ["train_loss", "val_loss", score, *TIMING_KEYS, *usage]


class TrainingDiverged(RuntimeError):
    """A training or validation loss became NaN or infinite."""


def rank_shard(
    train_idx: np.ndarray, *, world_size: int, rank: int, seed: int, epoch: int
) -> np.ndarray:
    """This rank's training indices for `epoch`: one shuffle shared by all ranks, dealt out in
    turn and padded by repeating the first few so that every rank gets the same count."""
    sampler = DistributedSampler(
        range(len(train_idx)), num_replicas=world_size, rank=rank, shuffle=True, seed=seed
    )
    sampler.set_epoch(epoch)
    return train_idx[list(iter(sampler))]


class FoldTraining:
    """The state of one rank's fold run; `run_epoch` returns metrics identical on every rank."""

    def __init__(
        self, job: FoldJob, task: Task, X: np.ndarray, y: np.ndarray, rank: int, device: Any
    ) -> None:
        self.job, self.task, self.rank, self.device = job, task, rank, device
        self.classify = task.kind == "classification"
        self.train_idx, self.val_idx = make_folds(
            y, job.folds, job.seed, stratified=self.classify
        )[job.fold]
        floating = np.issubdtype(X.dtype, np.floating)
        self.X = torch.as_tensor(X.astype(np.float32) if floating else X)
        self.y = torch.as_tensor(y, dtype=torch.long if self.classify else torch.float32)
        if not self.classify and self.y.ndim == 1:
            self.y = self.y.unsqueeze(1)
        self.seed = job.seed * 1_000_003 + job.fold
        torch.manual_seed(self.seed)  # the same initial weights on every rank
        self.model = task.build_model(job.params).to(device)
        self.ddp = wrap_model(self.model, device)
        self.optimizer = task.make_optimizer(self.model, job.params)
        self.base_lrs = [group["lr"] for group in self.optimizer.param_groups]
        self.loss_fn = task.loss_fn(job.params)

    def release_ddp(self) -> None:
        """Free the DDP wrapper; call it while the process group still exists.

        DDP's C++ reducer holds the process group. If the reducer held the last reference,
        freeing it would run ProcessGroupGloo's destructor with the GIL held, and that destructor
        joins gloo's worker threads, one of which may be waiting for the GIL to drop the tensor of
        the work it just finished: a deadlock (seen in about one warm fold run in ten). Freed
        first, the group is destroyed later by `destroy_process_group`, which releases the GIL.
        DDP's hooks make reference cycles, hence the collection.
        """
        self.ddp = self.model
        gc.collect()

    def state(self) -> dict[str, Any]:
        """Model and optimizer state for a checkpoint."""
        return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict()}

    def load_state(self, state: dict[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])

    def run_epoch(
        self,
        epoch: int,
        monitor: ResourceMonitor | None = None,
        stop_requested: Callable[[], bool] | None = None,
    ) -> dict[str, float]:
        """Train and validate once; all-reduced losses, metric, timings and resource use.

        ``stop_requested`` is asked once the epoch is done; if it says yes on any rank, the
        metrics of every rank carry ``stopped: 1`` (all ranks agree, so all stop together).
        """
        wall_start = time.time()
        started = time.perf_counter()
        train_sum, train_n = self._train(epoch)
        train_seconds = time.perf_counter() - started
        val = self._validate()
        seconds = time.perf_counter() - started
        usage = _usage_counts(monitor.take() if monitor is not None else {})
        sums = all_reduce_sum([train_sum, train_n, *val, *usage], self.device)
        stop = float(stop_requested is not None and stop_requested())
        times = [train_seconds, seconds - train_seconds, seconds, -wall_start, stop]
        train_seconds, val_seconds, seconds, neg_start, stop = all_reduce_max(times, self.device)
        metrics = {
            "epoch": float(epoch + 1),
            "train_loss": sums[0] / max(sums[1], 1.0),
            "val_loss": sums[2] / max(sums[3], 1.0),
            "val_accuracy" if self.classify else "val_mse": sums[4] / max(sums[5], 1.0),
            "lr": float(self.optimizer.param_groups[0]["lr"]),
            "epoch_start": -neg_start,
            "train_seconds": train_seconds,
            "val_seconds": val_seconds,
            "epoch_seconds": seconds,
            "samples_per_second": sums[1] / max(train_seconds, 1e-9),
            **_usage_means(sums[6:]),
            **({"stopped": 1.0} if stop else {}),
        }
        _check_finite(metrics, epoch)
        return metrics

    def _train(self, epoch: int) -> tuple[float, float]:
        """One pass over this rank's shard; returns (sum of sample losses, samples)."""
        self.ddp.train()
        torch.manual_seed(self.seed + 7919 * (epoch + 1) + self.rank)  # dropout: per rank, epoch
        job = self.job
        local = torch.as_tensor(
            rank_shard(
                self.train_idx,
                world_size=job.world_size,
                rank=self.rank,
                seed=job.seed,
                epoch=epoch,
            )
        )
        batch = job.per_rank_batch
        steps = math.ceil(len(local) / batch)
        loss_sum = torch.zeros((), dtype=torch.float64, device=self.device)
        for step in range(steps):
            self._set_lr(epoch, step, steps)
            idx = local[step * batch : (step + 1) * batch]
            xb, yb = self.X[idx].to(self.device), self.y[idx].to(self.device)
            self.optimizer.zero_grad(set_to_none=True)
            loss = self.loss_fn(self._align(self.ddp(xb), yb), yb)
            loss.backward()
            self.optimizer.step()
            loss_sum += loss.detach() * len(idx)  # no host sync per step
        return float(loss_sum.item()), float(len(local))

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
        """This rank's share of the held-out fold: [loss sum, samples, metric sum, count]."""
        self.model.eval()
        shard = torch.as_tensor(self.val_idx[self.rank :: self.job.world_size])
        sums = torch.zeros(4, dtype=torch.float64, device=self.device)
        for start in range(0, len(shard), VAL_BATCH):
            idx = shard[start : start + VAL_BATCH]
            xb, yb = self.X[idx].to(self.device), self.y[idx].to(self.device)
            out = self._align(self.model(xb), yb)
            sums[0] += self.loss_fn(out, yb).detach() * len(idx)
            sums[1] += len(idx)
            if self.classify:
                sums[2] += (out.argmax(dim=1) == yb).sum()
                sums[3] += len(idx)
            else:
                sums[2] += ((out - yb) ** 2).sum().detach()
                sums[3] += yb.numel()
        return sums.tolist()

    def _align(self, out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Regression outputs of shape (n,) meet targets of shape (n, 1) without broadcasting."""
        if not self.classify and out.shape != target.shape and out.numel() == target.numel():
            return out.reshape(target.shape)
        return out


def _usage_counts(usage: dict[str, float]) -> list[float]:
    """(value, 1) for each resource field this rank measured, (0, 0) for the others."""
    return [v for k in USAGE_KEYS for v in ((usage[k], 1.0) if k in usage else (0.0, 0.0))]


def _usage_means(sums: list[float]) -> dict[str, float]:
    """Each resource field's mean over the ranks that measured it."""
    pairs = zip(USAGE_KEYS, sums[0::2], sums[1::2], strict=True)
    return {key: total / n for key, total, n in pairs if n > 0}


def _check_finite(metrics: dict[str, float], epoch: int) -> None:
    for name in ("train_loss", "val_loss"):
        if not math.isfinite(metrics[name]):
            raise TrainingDiverged(
                f"{name.replace('_', ' ')} became {metrics[name]} at epoch {epoch + 1}"
            )
