"""Every optimizer step a fold function takes, seen through torch's global step hooks.

``StepWatch`` notes the learning rate each step used (what foldwise records of every epoch as
``optimizer_lr``, whatever loop trains it) and, where foldwise drives a user's optimizers itself
(a Lightning Trainer), applies the study's scaling and warm-up to that one step: the rates are
multiplied just before the update and put back right after it, so a scheduler that steps
later in the same batch or epoch works on its own values, as it would without foldwise.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import torch
from torch.optim.optimizer import (
    register_optimizer_step_post_hook,
    register_optimizer_step_pre_hook,
)


class StepWatch:
    """Watches the optimizer steps taken on the thread that enters it (a fold's thread: other
    threads of the process, another fold's among them, are not seen).

    ``factor``, when given, is asked before each step for the multiplier of the rates the
    optimizer holds (``FoldContext.lr_factor`` at the step); 1.0 leaves them alone. The rate
    recorded is the first parameter group's of the first optimizer that stepped, as used.

        >>> with StepWatch() as watch:  # doctest: +SKIP
        ...     optimizer.step()
        >>> watch.take_rate()  # doctest: +SKIP
        0.01
    """

    def __init__(self, factor: Callable[[], float] | None = None) -> None:
        self.factor = factor
        self.steps = 0
        """Optimizer steps taken so far on the watched thread."""
        self._thread: int | None = None
        self._handles: list[Any] = []
        self._held: dict[int, list[float]] = {}
        self._first: int | None = None
        self._rate: float | None = None

    def __enter__(self) -> StepWatch:
        self._thread = threading.get_ident()
        self._handles = [
            register_optimizer_step_pre_hook(self._before),
            register_optimizer_step_post_hook(self._after),
        ]
        return self

    def __exit__(self, *exc: object) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def take_rate(self) -> float | None:
        """The rate the last step since the previous call used, or None (no step since)."""
        rate, self._rate = self._rate, None
        return rate

    def _before(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        if threading.get_ident() != self._thread:
            return
        groups = optimizer.param_groups
        factor = 1.0 if self.factor is None else float(self.factor())
        if factor != 1.0 and id(optimizer) not in self._held:
            own = [group["lr"] for group in groups]
            self._held[id(optimizer)] = own
            for group, lr in zip(groups, own, strict=True):
                group["lr"] = lr * factor
        self.steps += 1
        if self._first is None:
            self._first = id(optimizer)
        if id(optimizer) == self._first and groups:
            self._rate = float(groups[0]["lr"])

    def _after(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        if threading.get_ident() != self._thread:
            return
        own = self._held.pop(id(optimizer), None)
        if own is not None:
            for group, lr in zip(optimizer.param_groups, own, strict=True):
                group["lr"] = lr
