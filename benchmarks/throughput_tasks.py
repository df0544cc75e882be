"""The tasks benchmarks/trainer_throughput.py trains: one model and one data set, three ways.

An MLP (128 -> 256 -> 256 -> 10, Adam) on synthetic data, as the built-in loop's task
(``BuiltIn``), as an own loop written with the fold context's helpers (``OwnLoop``), and as a
LightningModule (``Lightning``). Each reports ``train_seconds`` (the training pass alone) and
``train_samples`` (this rank's share), so samples/s are counted the same way for all, and
``first_step_at`` (the wall time of its first optimizer step).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch
from torch import nn

FEATURES, CLASSES, WIDTH = 128, 10, 256
kind = "classification"


def load_data(options: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(int(options["samples"]), FEATURES)).astype(np.float32)
    y = (X @ rng.normal(size=(FEATURES, CLASSES))).argmax(axis=1).astype(np.int64)
    return X, y


def build_model(params: dict[str, Any]) -> nn.Module:
    return nn.Sequential(
        nn.Linear(FEATURES, WIDTH), nn.ReLU(), nn.Linear(WIDTH, WIDTH), nn.ReLU(),
        nn.Linear(WIDTH, CLASSES),
    )  # fmt: skip


class BuiltIn:
    """foldwise's loop around ``build_model`` (it reports ``train_seconds`` itself)."""

    kind = "classification"
    load_data = staticmethod(load_data)
    build_model = staticmethod(build_model)


class OwnLoop:
    """The same training written as a fold function with the context's helpers."""

    kind = "classification"
    metrics = ["val_accuracy", "train_seconds", "train_samples", "first_step_at"]
    load_data = staticmethod(load_data)

    def train_fold(self, ctx: Any) -> None:
        model = ctx.prepare_model(build_model(ctx.params))
        lr = float(ctx.params.get("lr", 1e-3)) * ctx.lr_scale
        optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        loss_fn = nn.CrossEntropyLoss()
        train = ctx.prepare_loader(ctx.train_dataset, ctx.batch_size, shuffle=True)
        val = ctx.prepare_eval_loader(ctx.val_dataset, 1024)
        first_step_at = None
        for epoch in range(ctx.start_epoch, ctx.epochs):
            model.train()
            started, seen = time.perf_counter(), 0
            for x, y in train:
                optimizer.zero_grad(set_to_none=True)
                loss_fn(model(x), y).backward()
                optimizer.step()
                seen += len(y)
                first_step_at = first_step_at or time.time()
            seconds = time.perf_counter() - started
            correct, count = _accuracy(model, val)
            correct, count = ctx.sum([correct, count])
            ctx.report(
                epoch,
                val_accuracy=correct / count,
                train_seconds=seconds,
                train_samples=seen,
                first_step_at=first_step_at,
            )
            if ctx.should_stop():
                break


@torch.no_grad()
def _accuracy(model: nn.Module, loader: Any) -> tuple[float, float]:
    model.eval()
    correct = count = 0
    for x, y in loader:
        correct += int((model(x).argmax(dim=1) == y).sum())
        count += len(y)
    return float(correct), float(count)


def _lightning_module() -> Any:
    import lightning.pytorch as pl

    class Module(pl.LightningModule):
        def __init__(self, lr: float) -> None:
            super().__init__()
            self.net, self.lr = build_model({}), lr
            self.started = 0.0

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.net(x)

        def on_train_epoch_start(self) -> None:
            self.started, self.seen = time.perf_counter(), 0

        def training_step(self, batch: Any, _index: int) -> torch.Tensor:
            x, y = batch
            self.seen += len(y)
            return nn.functional.cross_entropy(self(x), y)

        def on_validation_epoch_start(self) -> None:
            self.train_seconds = time.perf_counter() - self.started

        def validation_step(self, batch: Any, _index: int) -> None:
            x, y = batch
            self.log("val_accuracy", (self(x).argmax(dim=1) == y).float().mean(), sync_dist=True)

        def on_validation_epoch_end(self) -> None:
            self.log("train_seconds", self.train_seconds)
            self.log("train_samples", float(self.seen))

        def configure_optimizers(self) -> Any:
            return torch.optim.Adam(self.parameters(), lr=self.lr)

    return Module


class Lightning:
    """The same training as a LightningModule run by a Lightning Trainer."""

    kind = "classification"
    metrics = ["val_accuracy", "train_seconds", "train_samples"]
    load_data = staticmethod(load_data)

    def build_module(self, params: dict[str, Any]) -> Any:
        return _lightning_module()(float(params.get("lr", 1e-3)))


class Reports:
    """A fold function that only reports, ``options["reports"]`` times: the cost of one report."""

    kind = "classification"
    metrics = ["value", "a", "b", "c"]
    load_data = staticmethod(load_data)

    def train_fold(self, ctx: Any) -> None:
        count = int(ctx.options["reports"])
        started = time.perf_counter()
        for epoch in range(count):
            ctx.report(epoch, value=1.0 / (epoch + 1), a=1.0, b=2.0, c=3.0)
        seconds = (time.perf_counter() - started) / count
        ctx.report(count, value=seconds, a=0.0, b=0.0, c=0.0)
