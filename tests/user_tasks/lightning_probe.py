"""A Lightning task that logs what the fold gave it: the rate each optimizer step used, the
training samples each rank read (summed), and a mark logged in the module's own
``on_train_epoch_end``. For the 2-rank Lightning tests."""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
import numpy as np
import torch
from torch import nn

metrics = ["val_loss", "lr_used", "train_samples", "epoch_mark"]
BASE_LR = 0.01


def load_data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    X = rng.normal(size=(200, 4)).astype(np.float32)
    return X, (X[:, 0] > 0).astype(np.int64)


class ProbeModule(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Linear(4, 2)
        self.rates: list[float] = []
        self.samples = 0

    def training_step(self, batch: Any, _index: int) -> torch.Tensor:
        x, y = batch
        self.samples += len(y)
        return nn.functional.cross_entropy(self.net(x), y)

    def on_before_optimizer_step(self, optimizer: Any) -> None:
        self.rates.append(float(optimizer.param_groups[0]["lr"]))  # foldwise's factor applied

    def validation_step(self, batch: Any, _index: int) -> None:
        x, y = batch
        self.log("val_loss", nn.functional.cross_entropy(self.net(x), y), sync_dist=True)

    def on_train_epoch_end(self) -> None:
        self.log("lr_used", max(self.rates), sync_dist=True, reduce_fx="max")
        self.log("train_samples", float(self.samples), sync_dist=True, reduce_fx="sum")
        self.log("epoch_mark", float(self.current_epoch + 1))
        self.rates, self.samples = [], 0

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=BASE_LR)


def build_module(params: dict[str, Any]) -> pl.LightningModule:
    return ProbeModule()
