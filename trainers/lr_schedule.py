"""Learning-rate scaling by world size with gradual warm-up (Goyal et al., 2017).

The task's learning rate `lr` is the single-process rate. DDP ranks average their gradients, so
with `linear` scaling the target rate is `world_size * lr` (`sqrt`: `sqrt(world_size) * lr`,
`none`: `lr`). Warm-up ramps the rate linearly *per optimizer step* from `lr` to the target over
the first `warmup_epochs` epochs, then holds it. Everything here is expressed as a factor that
multiplies each parameter group's initial rate, so tasks with per-group rates keep their ratios.
"""

from __future__ import annotations

import math


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
