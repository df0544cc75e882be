"""A tiny user task: 300 samples, 8 features, 3 classes, with a `mode` param for failure tests.

`mode`: "ok" trains normally; "raise" makes build_model raise; "nan" makes the model output NaN;
"crash" kills rank 1's process (os._exit) at the start of epoch 2, in every attempt;
"crash_once" kills rank 1 at the start of epoch 3, but only in a run that started at epoch 1:
a run resumed from a checkpoint (whose model buffers say epochs were done) goes on; "hang"
makes rank 1 sleep for an hour at the start of epoch 2 (its peers then wait in all-reduce);
"env" makes build_model raise, naming the FOLDWISE_* variables the worker can see; "flat"
trains a model that always predicts the uniform distribution (its loss stays at log 3: a
clearly worse trial on every fold, for racing and pruning tests); "flat_nan" is flat in its
first epoch and diverges (NaN) from its second on. `epoch_seconds` (default 0) is how long each
training epoch waits at its start: an epoch of this task otherwise takes milliseconds, shorter
than a stop takes to reach a rank.
Usable as "tests.user_tasks.tiny" or "tests.user_tasks.tiny:task".
"""

from __future__ import annotations

import os
import time
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

kind = "classification"
MODES = ("ok", "raise", "nan", "crash", "crash_once", "hang", "env", "flat", "flat_nan")


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
    if mode == "env":
        seen = sorted(name for name in os.environ if name.startswith("FOLDWISE_"))
        raise ValueError(f"worker environment holds: {seen}")
    return _TinyNet(mode, int(params.get("width", 16)), float(params.get("epoch_seconds", 0)))


class _TinyNet(nn.Module):
    def __init__(self, mode: str, width: int, epoch_seconds: float) -> None:
        super().__init__()
        self.mode = mode
        self.epoch_seconds = epoch_seconds
        self.net = nn.Sequential(nn.Linear(8, width), nn.ReLU(), nn.Linear(width, 3))
        # A buffer, so a checkpoint carries it: the epochs this model has started training.
        self.register_buffer("epochs_started", torch.zeros((), dtype=torch.long))
        self._evaluated = True  # the first training step starts an epoch
        self._first_epoch: int | None = None  # the epoch this process started training at

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training and self._evaluated:  # first training step after a validation pass
            self.epochs_started += 1
            time.sleep(self.epoch_seconds)
        self._evaluated = not self.training
        epoch = int(self.epochs_started)
        if self._first_epoch is None:
            self._first_epoch = epoch
        if _rank() == 1 and self.mode == "crash" and epoch == 2:
            os._exit(1)
        if _rank() == 1 and self.mode == "hang" and epoch == 2:
            time.sleep(3600)
        if _rank() == 1 and self.mode == "crash_once" and epoch == 3 and self._first_epoch == 1:
            os._exit(1)
        out = self.net(x)
        if self.mode == "flat" or (self.mode == "flat_nan" and epoch < 2):
            return out * 0.0
        if self.mode == "flat_nan":
            return out * float("nan")
        return out * float("nan") if self.mode == "nan" else out


def _rank() -> int:
    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


task = SimpleNamespace(load_data=load_data, build_model=build_model, kind=kind)
