"""Reading the objective out of per-epoch metrics: early stopping and a fold's value."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any


def improved(value: float, best: float | None, direction: str, min_delta: float = 0.0) -> bool:
    """Whether `value` beats `best` by more than `min_delta` in `direction`."""
    if best is None:
        return math.isfinite(value)
    if direction == "minimize":
        return value < best - min_delta
    if direction == "maximize":
        return value > best + min_delta
    raise ValueError(f"direction must be minimize or maximize, got {direction!r}")


class EarlyStopping:
    """Stop after `patience` epochs without an improvement of more than `min_delta`."""

    def __init__(self, *, direction: str, patience: int | None, min_delta: float = 0.0) -> None:
        self.direction = direction
        self.patience = patience
        self.min_delta = min_delta
        self.best: float | None = None
        self.stale = 0

    def should_stop(self, value: float) -> bool:
        """Record this epoch's value; True when training should stop now."""
        if improved(value, self.best, self.direction, self.min_delta):
            self.best = value
            self.stale = 0
        else:
            self.stale += 1
        return self.patience is not None and self.stale >= self.patience


def fold_value(
    epochs: Sequence[dict[str, Any]], metric: str, direction: str, use: str = "best"
) -> float:
    """A fold's value: the best epoch's `metric` in `direction`, or the last epoch's."""
    values = [float(e[metric]) for e in epochs if metric in e]
    if not values:
        reported = sorted({key for e in epochs for key in e})
        raise ValueError(
            f"objective metric {metric!r} was never reported; reported: {reported or 'nothing'}"
        )
    if use == "last":
        return values[-1]
    if use != "best":
        raise ValueError(f"use must be best or last, got {use!r}")
    if direction not in ("minimize", "maximize"):
        raise ValueError(f"direction must be minimize or maximize, got {direction!r}")
    finite = [v for v in values if math.isfinite(v)] or values
    return min(finite) if direction == "minimize" else max(finite)
