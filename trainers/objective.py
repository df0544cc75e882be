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


class SmoothedStopping:
    """NNLO's smoothed rule: stop when the mean of the last `patience` epochs does not beat the
    mean of the `patience` epochs before them by more than `min_delta` (needs 2 x patience
    epochs). Noisy curves trip it less often than the plain patience rule."""

    def __init__(self, *, direction: str, patience: int | None, min_delta: float = 0.0) -> None:
        self.direction = direction
        self.patience = patience
        self.min_delta = min_delta
        self.history: list[float] = []

    def should_stop(self, value: float) -> bool:
        """Record this epoch's value; True when training should stop now."""
        self.history.append(value)
        p = self.patience
        if p is None or len(self.history) < 2 * p:
            return False
        reference = sum(self.history[-2 * p : -p]) / p
        current = sum(self.history[-p:]) / p
        return not improved(current, reference, self.direction, self.min_delta)


def make_stopper(
    rule: str, *, direction: str, patience: int | None, min_delta: float = 0.0
) -> EarlyStopping | SmoothedStopping:
    """The early-stopping rule by name: `patience` (plain) or `smoothed` (NNLO's)."""
    kinds = {"patience": EarlyStopping, "smoothed": SmoothedStopping}
    if rule not in kinds:
        raise ValueError(f"early-stopping rule must be patience or smoothed, got {rule!r}")
    return kinds[rule](direction=direction, patience=patience, min_delta=min_delta)


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


def fold_metric_values(
    epochs: Sequence[dict[str, Any]],
    metrics: Sequence[str],
    metric: str,
    direction: str,
    use: str = "best",
) -> dict[str, float]:
    """Each of ``metrics`` at the epoch the objective (``metric``, ``direction``, ``use``)
    picks, the way ``fold_value`` picks it. A metric that epoch lacks is taken from the
    latest earlier epoch that reported it, else the earliest later one: a count reported once
    (a model's parameters) holds for the whole run. ``ValueError`` names a metric never
    reported, or not finite where it is read."""
    value = fold_value(epochs, metric, direction, use)
    picked = max(i for i, e in enumerate(epochs) if metric in e and _same(e[metric], value))
    out: dict[str, float] = {}
    for name in metrics:
        reported = [i for i, e in enumerate(epochs) if name in e]
        if not reported:
            seen = sorted({key for e in epochs for key in e})
            raise ValueError(f"metric {name!r} was never reported; reported: {seen or 'nothing'}")
        earlier = [i for i in reported if i <= picked]
        at = earlier[-1] if earlier else reported[0]
        out[name] = float(epochs[at][name])
        if not math.isfinite(out[name]):
            raise ValueError(f"metric {name!r} was {out[name]} at epoch {at + 1}")
    return out


def _same(a: Any, b: float) -> bool:
    a = float(a)
    return a == b or (math.isnan(a) and math.isnan(b))
