"""A tiny user task: 300 samples, 8 features, 3 classes, with a `mode` param for failure tests.

`mode`: "ok" trains normally; "raise" makes build_model raise; "nan" makes the model output NaN;
"crash" kills rank 1's process (os._exit) at the start of epoch 2. Usable as
"tests.user_tasks.tiny" or "tests.user_tasks.tiny:task".
"""

from __future__ import annotations

import os
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

kind = "classification"
MODES = ("ok", "raise", "nan", "crash")


def load_data() -> tuple[np.ndarray, np.ndarray]:
    """Gaussian features; the label is the argmax of a fixed random linear map plus noise."""
    rng = np.random.default_rng(1234)
    X = rng.normal(size=(300, 8)).astype(np.float32)
    logits = X @ rng.normal(size=(8, 3)) + 0.3 * rng.normal(size=(300, 3))
    return X, logits.argmax(axis=1).astype(np.int64)


def build_model(params: dict[str, Any]) -> nn.Module:
    mode = params.get("mode", "ok")
    if mode not in MODES:
        raise ValueError(f"tiny task: mode must be one of {MODES}, got {mode!r}")
    if mode == "raise":
        raise ValueError("tiny task refuses mode=raise")
    return _TinyNet(mode, int(params.get("width", 16)))


class _TinyNet(nn.Module):
    def __init__(self, mode: str, width: int) -> None:
        super().__init__()
        self.mode = mode
        self.net = nn.Sequential(nn.Linear(8, width), nn.ReLU(), nn.Linear(width, 3))
        self.epoch = 1
        self._evaluated = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training and self._evaluated:  # first training step after a validation pass
            self.epoch += 1
        self._evaluated = not self.training
        if self.mode == "crash" and self.epoch == 2 and _rank() == 1:
            os._exit(1)
        out = self.net(x)
        return out * float("nan") if self.mode == "nan" else out


def _rank() -> int:
    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


task = SimpleNamespace(load_data=load_data, build_model=build_model, kind=kind)
