"""What a plot of a study's trials draws, worked out on the server: the steps of the
best-so-far line, and at most so many points that keep the best trials and the envelope."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar


class _Ranked(Protocol):
    @property
    def number(self) -> int: ...

    @property
    def value(self) -> float: ...


P = TypeVar("P", bound=_Ranked)


def best_so_far(points: Sequence[P], *, maximize: bool) -> list[P]:
    """The trials that improved on every lower-numbered one: the steps of the best-so-far line.
    A trial that breaks the study's constraints (``feasible`` False) is no step."""
    steps: list[P] = []
    for point in sorted(points, key=lambda p: p.number):
        if getattr(point, "feasible", None) is False:
            continue
        if not steps or _better(point.value, steps[-1].value, maximize):
            steps.append(point)
    return steps


def downsample(points: Sequence[P], max_points: int, *, maximize: bool) -> list[P]:
    """At most ``max_points`` points: the best quarter of the budget, then each bucket's extremes.

    The best trials are what a user looks for; the per-bucket minimum and maximum keep the
    envelope of the history (and the spread on every axis) where a stride would lose it.
    """
    if len(points) <= max_points:
        return list(points)
    ranked = sorted(points, key=lambda p: -p.value if maximize else p.value)
    keep: dict[int, P] = {p.number: p for p in ranked[: max_points // 4]}
    buckets = max(1, (max_points - len(keep)) // 2)
    size = -(-len(points) // buckets)
    ordered = sorted(points, key=lambda p: p.number)
    for start in range(0, len(ordered), size):
        chunk = ordered[start : start + size]
        for point in (min(chunk, key=_value), max(chunk, key=_value)):
            keep.setdefault(point.number, point)
    return sorted(keep.values(), key=lambda p: p.number)


def _better(value: float, incumbent: float, maximize: bool) -> bool:
    return value > incumbent if maximize else value < incumbent


def _value(point: _Ranked) -> float:
    return point.value
