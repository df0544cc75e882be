"""A built-in-loop task with every hook, for the built-in loop's tests.

Data: a lazy Dataset of 200 samples (4 features, 2 classes, 3 of 4 samples in class 0) read one
by one; each training read adds fresh noise and counts itself, ``load_eval_data`` reads clean.
``collate_fn`` turns a batch into ({"x": features}, labels), so the model takes a dict.
Params: ``lr``; ``schedule`` ("onecycle" per step, "step" per epoch, "plateau" on val_loss, or
none); ``weighted`` (class weights from the fold's training labels, through the context).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.data import Dataset

kind = "classification"
READS = {"train": 0, "eval": 0}
SEEN: dict[str, Any] = {}


class Samples(Dataset):
    def __init__(self, augment: bool) -> None:
        rng = np.random.default_rng(3)
        self.targets = (rng.random(200) < 0.25).astype(np.int64)
        self.X = (rng.normal(size=(200, 4)) + 1.5 * self.targets[:, None]).astype(np.float32)
        self.augment = augment

    def __len__(self) -> int:
        return 200

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        READS["train" if self.augment else "eval"] += 1
        x = torch.from_numpy(self.X[i])
        return (x + 0.05 * torch.randn(4) if self.augment else x), int(self.targets[i])


def load_data() -> Dataset:
    return Samples(augment=True)


def load_eval_data() -> Dataset:
    return Samples(augment=False)


def collate_fn(batch: list[tuple[torch.Tensor, int]]) -> tuple[dict[str, torch.Tensor], Any]:
    xs, ys = zip(*batch, strict=True)
    return {"x": torch.stack(xs)}, torch.tensor(ys)


class DictNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.net(batch["x"])


def build_model(params: dict[str, Any]) -> nn.Module:
    return DictNet()


def make_optimizer(model: nn.Module, params: dict[str, Any]) -> torch.optim.Optimizer:
    return torch.optim.SGD(model.parameters(), lr=float(params.get("lr", 0.1)), momentum=0.9)


def make_scheduler(
    optimizer: torch.optim.Optimizer, params: dict[str, Any], steps_per_epoch: int, epochs: int
) -> Any:
    SEEN["scheduler"] = (steps_per_epoch, epochs)
    schedule = params.get("schedule")
    lr = float(params.get("lr", 0.1))
    if schedule == "onecycle":
        return torch.optim.lr_scheduler.OneCycleLR(
            optimizer, max_lr=lr, total_steps=steps_per_epoch * epochs
        )
    if schedule == "step":
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
        return {"scheduler": scheduler, "interval": "epoch"}
    if schedule == "plateau":
        scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, factor=0.5, patience=0)
        return {"scheduler": scheduler, "interval": "epoch", "monitor": "val_loss"}
    return None


def loss_fn(params: dict[str, Any], ctx: Any) -> nn.Module:
    if not params.get("weighted"):
        return nn.CrossEntropyLoss()
    counts = np.bincount(ctx.train_targets, minlength=2)
    SEEN["counts"] = counts.tolist()
    weights = torch.tensor(counts.sum() / (2 * counts), dtype=torch.float32)
    return nn.CrossEntropyLoss(weight=weights)
