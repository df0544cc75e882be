"""A user task with its own loop (``train_fold``), with a ``mode`` param for the contract tests.

The data is a lazy Dataset of 240 samples, 6 features, 2 classes, whose training reads add
fresh noise every time (an augmentation); ``load_eval_data`` reads the same samples clean,
``load_test_data`` other samples (``build_model`` and ``predict`` let a hold-out score rebuild
the saved models and predict with them). Modes: "ok" trains an MLP and reports val_loss,
val_accuracy and train_noise (the mean of the augmentation noise it saw in the epoch);
"silent" returns without reporting; "text" reports a string; "nan" reports NaN;
"no_objective" reports train_loss only; "early" makes rank 1 return after one epoch; "raise"
raises on rank 1 before its first report; "skip_collective" makes rank 1 skip an all-reduce
rank 0 calls before its first report (a deadlock); "ignore_stop" never checks
``should_stop``; "sleep" sleeps an hour before it; "spawn" starts a process that would
sleep for ten minutes and reports its pid (``child_pid``).
"""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import Dataset

metrics = ["val_loss", "val_accuracy", "train_noise", "train_loss"]
SAMPLES = 240


class Points(Dataset):
    """Two Gaussian blobs; with ``augment`` each read adds fresh noise (from torch's RNG)."""

    def __init__(self, augment: bool, seed: int = 7) -> None:
        rng = np.random.default_rng(seed)
        self.targets = (np.arange(SAMPLES) % 2).astype(np.int64)
        centres = np.where(self.targets[:, None] == 1, 1.0, -1.0)
        self.X = (centres + rng.normal(size=(SAMPLES, 6))).astype(np.float32)
        self.augment = augment

    def __len__(self) -> int:
        return SAMPLES

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.from_numpy(self.X[i])
        noise = torch.randn(6) * 0.1 if self.augment else torch.zeros(6)
        return torch.cat([x + noise, noise.abs().mean().reshape(1)]), torch.tensor(self.targets[i])


def load_data() -> Dataset:
    return Points(augment=True)


def load_eval_data() -> Dataset:
    return Points(augment=False)


def load_test_data() -> Dataset:
    """Other samples of the same blobs, for a hold-out score."""
    return Points(augment=False, seed=11)


def build_model(params: dict[str, Any]) -> nn.Module:
    """The network ``train_fold`` trains: a hold-out score rebuilds saved ones with it."""
    return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 2))


def predict(model: nn.Module, inputs: torch.Tensor) -> torch.Tensor:
    """A sample's last column is the augmentation's noise, not a feature."""
    return model(inputs[:, :6])


class WithoutItsModel:
    """The same own loop with test data, but no way to rebuild its saved models."""

    metrics = metrics
    load_data = staticmethod(load_data)
    load_test_data = staticmethod(load_test_data)

    @staticmethod
    def train_fold(ctx: Any) -> None:
        train_fold(ctx)


def train_fold(ctx: Any) -> None:
    mode = ctx.params.get("mode", "ok")
    if mode == "silent":
        return
    model = ctx.prepare_model(build_model(ctx.params))
    optimizer = torch.optim.Adam(model.parameters(), lr=ctx.params.get("lr", 0.01))
    train = ctx.prepare_loader(ctx.train_dataset, ctx.batch_size, shuffle=True)
    val = ctx.prepare_eval_loader(ctx.val_dataset, 64)
    state = ctx.load_checkpoint()
    if state is not None:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(ctx.start_epoch, ctx.epochs):
        model.train()
        noise = seen = loss_sum = 0.0
        for batch, y in train:
            batch, y = batch.to(ctx.device), y.to(ctx.device)
            x, extra = batch[:, :6], batch[:, 6]
            optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            noise += float(extra.sum())
            loss_sum += float(loss.detach()) * len(y)
            seen += len(y)
        model.eval()
        with torch.no_grad():
            sums = [0.0, 0.0, 0.0]
            for batch, y in val:
                batch, y = batch.to(ctx.device), y.to(ctx.device)
                out = model(batch[:, :6])
                sums[0] += float(loss_fn(out, y)) * len(y)
                sums[1] += float((out.argmax(1) == y).sum())
                sums[2] += len(y)
        total = ctx.sum(sums)
        _misbehave(ctx, mode, epoch)
        report = {
            "val_loss": total[0] / total[2],
            "val_accuracy": total[1] / total[2],
            "train_noise": noise / seen,
            "train_loss": loss_sum / seen,
        }
        if mode == "text":
            report["val_loss"] = "low"
        if mode == "nan":
            report["val_accuracy"] = float("nan")
        if mode == "no_objective":
            report = {"train_loss": loss_sum / seen}
        if mode == "spawn" and epoch == 0:
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
            report["child_pid"] = float(ctx.max(child.pid if ctx.rank == 0 else 0))
        ctx.report(epoch, **report)
        ctx.save_model(model, note="own loop")
        if ctx.should_stop() and mode != "ignore_stop":
            break
        ctx.save_checkpoint({"model": model.state_dict(), "optimizer": optimizer.state_dict()})
        if mode == "early" and ctx.rank == 1:
            return


def _misbehave(ctx: Any, mode: str, epoch: int) -> None:
    if epoch != 0:
        return
    if mode == "raise" and ctx.rank == 1:
        raise RuntimeError("own loop refuses to go on in epoch 0")
    if mode == "skip_collective" and ctx.rank == 0:
        dist.all_reduce(torch.zeros(3))
    if mode == "sleep":
        time.sleep(3600)
