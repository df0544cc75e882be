"""Learning-rate scaling by world size with gradual warm-up (Goyal et al., 2017).

The task's learning rate `lr` is the single-process rate. DDP ranks average their gradients, so
with `linear` scaling the target rate is `world_size * lr` (`sqrt`: `sqrt(world_size) * lr`,
`none`: `lr`). Warm-up ramps the rate linearly *per optimizer step* from `lr` to the target over
the first `warmup_epochs` epochs, then holds it. Everything here is expressed as a factor that
multiplies each parameter group's rate, so tasks with per-group rates keep their ratios;
`step_scaled` applies it around one optimizer step only, so a scheduler keeps its own values.

A study that leaves `trainer.lr_scaling` and `warmup_epochs` open gets its loop's default
(`default_settings`): foldwise's own loops (built-in, Lightning) scale linearly and warm up
for one epoch; an own `train_fold` trains at the rates it wrote, unless the study asks. A
`RatePlan` is one fold run's: the settings, and whether the fold function applied what they
ask (`unapplied` says in one line when it did not).
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


DEFAULT_SCALING = "linear"
DEFAULT_WARMUP_EPOCHS = 1


def default_settings(*, own_loop: bool) -> tuple[str, int]:
    """(lr scaling, warm-up epochs) for a study that leaves them open: an own loop's rates
    are its own; foldwise's loops scale linearly with one epoch of warm-up."""
    return ("none", 0) if own_loop else (DEFAULT_SCALING, DEFAULT_WARMUP_EPOCHS)


class RatePlan:
    """One fold run's learning-rate scaling and warm-up (``scaling`` and ``warmup_epochs``
    as the study resolved them), and what the fold function read of it: ``scale`` (the
    target factor) or ``factor`` (the factor at a step, warm-up included)."""

    def __init__(self, *, world_size: int, scaling: str, warmup_epochs: int) -> None:
        self.world_size, self.scaling, self.warmup_epochs = world_size, scaling, warmup_epochs
        self.target = scale_factor(world_size, scaling)
        self.scale_read = self.factor_read = False

    @property
    def scale(self) -> float:
        self.scale_read = True
        return self.target

    def factor(self, epoch: int, step: int, steps_per_epoch: int) -> float:
        self.scale_read = self.factor_read = True
        return lr_factor(
            world_size=self.world_size,
            scaling=self.scaling,
            warmup_epochs=self.warmup_epochs,
            epoch=epoch,
            step=step,
            steps_per_epoch=steps_per_epoch,
        )

    @property
    def asks(self) -> bool:
        """Whether the settings change any step's rate (with one rank, or ``none``, no)."""
        return self.target != 1.0

    def unapplied(self) -> str | None:
        """Why a fold function that stepped its optimizer ignored what the study asks, in one
        line; None when it applied it, or there is nothing to apply."""
        if not self.asks:
            return None
        how = (
            "step with ctx.optimizer_step(optimizer, epoch, step, steps_per_epoch) or scale "
            "by ctx.lr_factor(...)"
        )
        if not self.scale_read:
            return (
                f"stepped its optimizer at its own rate, but trainer.lr_scaling: "
                f"{self.scaling} asks for {self.target:g}x it on {self.world_size} ranks: "
                f"{how}, or leave lr_scaling out to train at your own rates"
            )
        if self.warmup_epochs > 0 and not self.factor_read:
            return (
                f"stepped its optimizer without the warm-up trainer.warmup_epochs: "
                f"{self.warmup_epochs} asks for (it read only ctx.lr_scale): {how}, or set "
                "warmup_epochs: 0"
            )
        return None


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
