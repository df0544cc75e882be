"""A Lightning task: a LightningModule on scikit-learn's 8x8 digits, with its own optimizer,
scheduler and logged metrics, trained by a Lightning Trainer inside each fold's DDP group.

foldwise calls ``build_module(params)`` for every fold, feeds it the fold's training and
validation data (``load_data``) and reports what the module logs with ``self.log`` at the end
of each epoch (``val_acc``, ``val_loss``, ``train_loss``): any of them may be the objective.
Needs ``pip install 'foldwise[lightning]'``. Study: ``examples/lightning.yaml``.
"""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
import numpy as np
import torch
from torch import nn

metrics = ["val_acc", "val_loss", "train_loss"]


def load_data() -> tuple[np.ndarray, np.ndarray]:
    """Pixels scaled to [0, 1] as 64 features, and the digit."""
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    return (X / 16.0).astype(np.float32), y.astype(np.int64)


class DigitsModule(pl.LightningModule):
    """An MLP; AdamW with cosine annealing over the epochs, both the module's own."""

    def __init__(self, width: int = 64, lr: float = 1e-3, dropout: float = 0.1) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(
            nn.Linear(64, width), nn.ReLU(), nn.Dropout(dropout), nn.Linear(width, 10)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def training_step(self, batch: Any, _index: int) -> torch.Tensor:
        x, y = batch
        loss = nn.functional.cross_entropy(self(x), y)
        self.log("train_loss", loss, on_step=False, on_epoch=True, sync_dist=True)
        return loss

    def validation_step(self, batch: Any, _index: int) -> None:
        x, y = batch
        out = self(x)
        self.log("val_loss", nn.functional.cross_entropy(out, y), sync_dist=True)
        self.log("val_acc", (out.argmax(dim=1) == y).float().mean(), sync_dist=True)

    def configure_optimizers(self) -> Any:
        optimizer = torch.optim.AdamW(self.parameters(), lr=self.hparams.lr)
        epochs = self.trainer.max_epochs or 10
        scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs)
        return {"optimizer": optimizer, "lr_scheduler": scheduler}


def build_module(params: dict[str, Any]) -> pl.LightningModule:
    return DigitsModule(
        width=int(params.get("width", 64)),
        lr=float(params.get("lr", 1e-3)),
        dropout=float(params.get("dropout", 0.1)),
    )
