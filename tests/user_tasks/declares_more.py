"""A user task with its own loop that declares val_f1 but reports only val_loss each epoch:
a study optimising val_f1 would fail every trial (``foldwise task check`` says so at once)."""

from __future__ import annotations

from typing import Any

import numpy as np

metrics = ["val_loss", "val_f1"]


def load_data() -> tuple[np.ndarray, np.ndarray]:
    X = np.linspace(-1.0, 1.0, 60, dtype=np.float32).reshape(30, 2)
    return X, (np.arange(30) % 2).astype(np.int64)


def train_fold(ctx: Any) -> None:
    for epoch in range(ctx.start_epoch, ctx.epochs):
        ctx.report(epoch, val_loss=1.0 / (epoch + 1))
