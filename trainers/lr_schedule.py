"""Learning-rate scaling by world size with gradual warm-up (Goyal et al., 2017).

The task's learning rate `lr` is the single-process rate. DDP ranks average their gradients, so
with `linear` scaling the target rate is `world_size * lr` (`sqrt`: `sqrt(world_size) * lr`,
`none`: `lr`). Warm-up ramps the rate linearly *per optimizer step* from `lr` to the target over
the first `warmup_epochs` epochs, then holds it. Everything here is expressed as a factor that
multiplies each parameter group's rate, so tasks with per-group rates keep their ratios;
`step_scaled` applies it around one optimizer step only, so a scheduler keeps its own values.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


def scale_factor(world_size: int, scaling: str) -> float:
    """The target multiplier of the base rate for `world_size` ranks."""
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    if scaling == "linear":
        return float(world_size)
    if scaling == "sqrt":
        return math.sqrt(world_size)
    if scaling == "none":
        return 1.0
    raise ValueError(f"lr scaling must be linear, sqrt or none, got {scaling!r}")


def lr_factor(
    *,
    world_size: int,
    scaling: str,
    warmup_epochs: int,
    epoch: int,
    step: int,
    steps_per_epoch: int,
) -> float:
    """Multiplier of the base rate at optimizer `step` (0-based) of `epoch` (0-based)."""
    target = scale_factor(world_size, scaling)
    if warmup_epochs <= 0:
        return target
    progress = (epoch + step / max(steps_per_epoch, 1)) / warmup_epochs
    return 1.0 + (target - 1.0) * min(progress, 1.0)


def step_scaled(
    optimizer: torch.optim.Optimizer, factor: float, scaler: torch.amp.GradScaler | None = None
) -> float:
    """The optimizer's step at ``factor`` times the rates its groups hold, which are put back
    after (so a scheduler keeps working on its own values); the first group's rate used."""
    groups = optimizer.param_groups
    own = [group["lr"] for group in groups]
    for group, lr in zip(groups, own, strict=True):
        group["lr"] = lr * factor
    if scaler is not None:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
    for group, lr in zip(groups, own, strict=True):
        group["lr"] = lr
    return float(own[0]) * factor
