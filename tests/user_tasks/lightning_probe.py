"""A Lightning task that logs what the fold gave it: the rate the module's optimizer holds
(``own_lr``: its scheduler's, at the last step of the epoch), the training and validation
samples each rank read (summed over the ranks), and a mark logged in the module's own
``on_train_epoch_end``. For the Lightning tests.

Params: ``interval`` ("epoch": a StepLR halving the rate each epoch; "step": a LambdaLR taking
0.9 of it each step; absent: no scheduler) and ``unsynced`` (also log the validation loss
without ``sync_dist``, as ``val_rank_loss``). ``with_datamodule`` is the same task with its
data through a LightningDataModule.
"""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
import numpy as np
import torch
from torch import nn

metrics = ["val_loss", "own_lr", "train_samples", "val_samples", "epoch_mark", "val_rank_loss"]
BASE_LR = 0.01
SAMPLES = 200


def load_data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    X = rng.normal(size=(SAMPLES, 4)).astype(np.float32)
    return X, (X[:, 0] > 0).astype(np.int64)


class ProbeModule(pl.LightningModule):
    def __init__(self, params: dict[str, Any]) -> None:
        super().__init__()
        self.params = params
        self.net = nn.Linear(4, 2)
        self.rate = float("nan")
        self.samples = self.val_seen = 0

    def training_step(self, batch: Any, _index: int) -> torch.Tensor:
        x, y = batch
        self.samples += len(y)
        return nn.functional.cross_entropy(self.net(x), y)

    def on_train_batch_start(self, batch: Any, _index: int) -> None:
        optimizer = self.optimizers(use_pl_optimizer=False)
        self.rate = float(optimizer.param_groups[0]["lr"])  # its own: foldwise's is in the step

    def validation_step(self, batch: Any, _index: int) -> None:
        x, y = batch
        self.val_seen += len(y)
        loss = nn.functional.cross_entropy(self.net(x), y)
        self.log("val_loss", loss, sync_dist=True)
        if self.params.get("unsynced"):
            self.log("val_rank_loss", loss)
        else:
            self.log("val_rank_loss", loss, sync_dist=True)

    def on_validation_epoch_end(self) -> None:
        self.log("val_samples", float(self.val_seen), sync_dist=True, reduce_fx="sum")
        self.val_seen = 0

    def on_train_epoch_end(self) -> None:
        self.log("own_lr", self.rate, sync_dist=True, reduce_fx="max")
        self.log("train_samples", float(self.samples), sync_dist=True, reduce_fx="sum")
        self.log("epoch_mark", float(self.current_epoch + 1), sync_dist=True, reduce_fx="max")
        self.samples = 0

    def configure_optimizers(self) -> Any:
        optimizer = torch.optim.SGD(self.parameters(), lr=BASE_LR)
        interval = self.params.get("interval")
        if interval == "epoch":
            scheduler: Any = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
        elif interval == "step":
            scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 0.9**step)
        else:
            return optimizer
        return {
            "optimizer": optimizer,
            "lr_scheduler": {"scheduler": scheduler, "interval": interval},
        }


def build_module(params: dict[str, Any]) -> pl.LightningModule:
    return ProbeModule(params)


class _WithDataModule:
    metrics = metrics

    def load_data(self) -> tuple[np.ndarray, np.ndarray]:
        return load_data()

    def build_module(self, params: dict[str, Any]) -> pl.LightningModule:
        return ProbeModule(params)

    def build_datamodule(self, ctx: Any) -> pl.LightningDataModule:
        return pl.LightningDataModule.from_datasets(
            train_dataset=ctx.train_dataset, val_dataset=ctx.val_dataset, batch_size=10
        )


with_datamodule = _WithDataModule()
