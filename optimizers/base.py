"""The one ask/tell interface every optimizer implements (DESIGN §5)."""

from __future__ import annotations

import hashlib
import json
import math
from abc import ABC, abstractmethod
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from foldwise.optimizers.sampling import config_key
from foldwise.space import Param
from foldwise.spec import Direction

MAX_BUDGET = 1_000_000
"""Largest trial budget an optimizer plans for (a study's own limit is lower)."""


@dataclass(frozen=True)
class Observation:
    """A finished trial as the optimizer sees it.

    ``value`` is the mean over folds in the study's own direction (not negated); it is ``None``
    when the trial failed. ``std_error`` is the standard error of the fold values. ``folds`` is
    how many fold values the mean rests on (None: not known, take it as all of them); a
    ``pruned`` trial's value rests on fewer folds than the study's K, or on a fold stopped
    early, so it is a noisier observation (its larger ``std_error`` says how much), not a
    failure.
    """

    params: dict[str, Any]
    value: float | None
    std_error: float | None = None
    failed: bool = False
    folds: int | None = None
    pruned: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """Whether the trial produced a usable (finite) value."""
        return not self.failed and self.value is not None and math.isfinite(self.value)


class BaseOptimizer(ABC):
    """Suggests configurations from what is completed and what is still running.

    ``update`` is always given the *whole* picture: every completed (or failed) trial, in the
    order the trials finished, and every pending configuration, so an optimizer rebuilt from the
    stored history and updated once is in the same state as one that lived through the study.
    ``suggest`` must depend only on the seed and that picture, never on how many times it was
    called before, so a restarted service suggests what the live one would have.
    """

    def __init__(
        self,
        space: Mapping[str, Param],
        *,
        direction: Direction = Direction.MINIMIZE,
        seed: int = 0,
        budget: int | None = None,
        **options: Any,
    ) -> None:
        if not space:
            raise ValueError("space must hold at least one parameter")
        self.space = dict(space)
        self.direction = Direction(direction)
        self.seed = int(seed)
        self.budget = (
            None if budget is None else int_option("budget", budget, minimum=1, maximum=MAX_BUDGET)
        )
        """The study's trial budget, when it has one: optimizers may plan by it."""
        self.completed: list[Observation] = []
        self.pending: list[dict[str, Any]] = []
        self._digest = _history_digest(self.seed, [], [])
        self.configure(**options)

    def configure(self, **options: Any) -> None:
        """Take algorithm options; the default accepts none."""
        if options:
            names = sorted(options)
            message = f"unknown options for {type(self).__name__}: {names}"
            raise OptionError(names[0], message)

    def update(self, completed: Sequence[Observation], pending: Sequence[dict[str, Any]]) -> None:
        """Replace the optimizer's view of the study with ``completed`` and ``pending``."""
        self.completed = list(completed)
        self.pending = [dict(p) for p in pending]
        self._digest = _history_digest(self.seed, self.completed, self.pending)

    @abstractmethod
    def suggest(self, count: int) -> list[dict[str, Any]]:
        """Return ``count`` configurations to evaluate next, each holding its active parameters."""

    def rng(self, *salt: int) -> np.random.Generator:
        """A generator seeded by the seed, the picture last given to ``update`` and ``salt``."""
        return np.random.default_rng([*self._digest, *salt])

    def losses(self) -> np.ndarray:
        """Completed values in minimisation form (maximised objectives negated); NaN if failed."""
        sign = -1.0 if self.direction is Direction.MAXIMIZE else 1.0
        return np.array([sign * o.value if o.ok else np.nan for o in self.completed], dtype=float)

    def seen_keys(self) -> set[tuple]:
        """Keys of every completed and pending configuration, so none is suggested again."""
        return {config_key(o.params) for o in self.completed} | set(map(config_key, self.pending))


def _history_digest(seed: int, completed: Sequence[Observation], pending: Sequence[dict]) -> list:
    """Four 32-bit words that identify the seed and the history, stable across processes."""
    record = [
        seed,
        [
            [
                o.params,
                _float_or_none(o.value if o.ok else None),
                _float_or_none(o.std_error),
                *([o.folds] if o.pruned else []),  # unchanged for studies that never prune
            ]
            for o in completed
        ],
        pending,
    ]
    text = json.dumps(record, sort_keys=True, default=repr, allow_nan=True)
    digest = hashlib.sha256(text.encode()).digest()
    return [int.from_bytes(digest[i : i + 4], "little") for i in range(0, 16, 4)]


def _float_or_none(value: float | None) -> float | None:
    return None if value is None else float(value)


def check_count(count: int) -> int:
    """``count`` as a non-negative int, or ``ValueError``."""
    if isinstance(count, bool) or not isinstance(count, int | np.integer) or count < 0:
        raise ValueError(f"count must be a non-negative integer, got {count!r}")
    return int(count)


class OptionError(ValueError):
    """A bad optimizer option: ``name`` is the option's key, so an error can point at it."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name


def int_option(name: str, value: Any, *, minimum: int, maximum: int) -> int:
    """Validate an integer option inside ``[minimum, maximum]`` (bools and floats are refused);
    the maximum keeps a study that was accepted runnable (no fit or population too large to
    compute or hold)."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise OptionError(name, f"option {name} must be an integer, got {value!r}")
    if not minimum <= value <= maximum:
        raise OptionError(name, f"option {name} must lie in [{minimum}, {maximum}], got {value!r}")
    return int(value)


def float_option(name: str, value: Any, *, minimum: float, maximum: float = math.inf) -> float:
    """Validate a finite numeric option inside ``[minimum, maximum]``."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.number):
        raise OptionError(name, f"option {name} must be a number, got {value!r}")
    if not (math.isfinite(value) and minimum <= value <= maximum):
        raise OptionError(name, f"option {name} must lie in [{minimum}, {maximum}], got {value!r}")
    return float(value)


def choice_option(name: str, value: Any, choices: Collection[str]) -> str:
    """Validate an option that names one of ``choices``."""
    if value not in choices:
        raise OptionError(name, f"option {name} must be one of {sorted(choices)}, got {value!r}")
    return str(value)
