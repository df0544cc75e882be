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
    when the trial failed. ``std_error`` is the standard error of the fold values; none told
    (``None``) and 0 say the same, that the value is exact, and every optimizer, its seeded
    draws included, hears them alike. ``folds`` is
    how many fold values the mean rests on (None: not known, take it as all of them); a
    ``pruned`` trial's value rests on fewer folds than the study's K, or on a fold stopped
    early, so it is a noisier observation (its larger ``std_error`` says how much), not a
    failure.

    With several objectives, ``values`` holds each one's fold mean in the spec's order, each in
    its own direction (``value`` is the first of them), and ``std_errors`` their standard
    errors. ``constraint_gaps`` holds, per constraint, the trial's signed gap to the limit
    relative to the limit's size (:meth:`foldwise.spec.Constraint.gap`): positive by how much it
    broke it, zero or negative where it holds (with that much room). An infeasible trial is
    data, not a failure.
    """

    params: dict[str, Any]
    value: float | None
    std_error: float | None = None
    failed: bool = False
    folds: int | None = None
    pruned: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    values: tuple[float | None, ...] | None = None
    std_errors: tuple[float | None, ...] | None = None
    constraint_gaps: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if self.values is not None and len(self.values) and self.values[0] != self.value:
            if not (self.value is None or _both_nan(self.values[0], self.value)):
                raise ValueError("value must be the first of values")
        if self.std_errors is not None and len(self.std_errors) != len(self.objectives):
            raise ValueError("std_errors needs one entry per objective value")

    @property
    def objectives(self) -> tuple[float | None, ...]:
        """Every objective's value (one for a single-objective study)."""
        return (self.value,) if self.values is None else tuple(self.values)

    @property
    def objective_errors(self) -> tuple[float | None, ...]:
        """Every objective's standard error (None where not known)."""
        if self.std_errors is not None:
            return tuple(self.std_errors)
        return (self.std_error,) + (None,) * (len(self.objectives) - 1)

    @property
    def ok(self) -> bool:
        """Whether the trial produced usable (finite) values for every objective."""
        return not self.failed and all(v is not None and math.isfinite(v) for v in self.objectives)

    @property
    def violation(self) -> float:
        """The total amount by which the trial broke its constraints: 0 when feasible."""
        return float(sum(max(0.0, g) for g in self.constraint_gaps))

    @property
    def feasible(self) -> bool:
        return self.violation <= 0


def _both_nan(a: float | None, b: float | None) -> bool:
    return a is not None and b is not None and math.isnan(a) and math.isnan(b)


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
        directions: Sequence[Direction] | None = None,
        seed: int = 0,
        budget: int | None = None,
        **options: Any,
    ) -> None:
        if not space:
            raise ValueError("space must hold at least one parameter")
        self.space = dict(space)
        self.directions = tuple(Direction(d) for d in (directions or (direction,)))
        """Each objective's direction; one for a single-objective study."""
        self.direction = self.directions[0]
        self.seed = int(seed)
        self.budget = (
            None if budget is None else int_option("budget", budget, minimum=1, maximum=MAX_BUDGET)
        )
        """The study's trial budget, when it has one: optimizers may plan by it."""
        self.completed: list[Observation] = []
        self.pending: list[dict[str, Any]] = []
        self._history = HistoryIndex(self.seed)
        self._digest = self._history.digest([])
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
        self._history.extend(self.completed)
        self._digest = self._history.digest(self.pending)

    @abstractmethod
    def suggest(self, count: int) -> list[dict[str, Any]]:
        """Return ``count`` configurations to evaluate next, each holding its active parameters."""

    def rng(self, *salt: int) -> np.random.Generator:
        """A generator seeded by the seed, the picture last given to ``update`` and ``salt``."""
        return np.random.default_rng([*self._digest, *salt])

    @property
    def started(self) -> int:
        """How many trials the study has started: completed (or failed) and running."""
        return len(self.completed) + len(self.pending)

    @property
    def multi_objective(self) -> bool:
        return len(self.directions) > 1

    def losses(self) -> np.ndarray:
        """Completed values in minimisation form (maximised objectives negated); NaN if failed.
        With several objectives: the first one's."""
        return self.loss_matrix()[:, 0]

    def loss_matrix(self) -> np.ndarray:
        """Completed values in minimisation form, a row per trial and a column per objective;
        a row of NaN for a failed trial."""
        signs = np.array([-1.0 if d is Direction.MAXIMIZE else 1.0 for d in self.directions])
        rows = [
            signs * np.array(o.objectives, dtype=float) if o.ok else np.full(len(signs), np.nan)
            for o in self.completed
        ]
        return np.array(rows, dtype=float).reshape(len(rows), len(signs))

    def violations(self) -> np.ndarray:
        """Each completed trial's total constraint violation (0 when feasible)."""
        return np.array([o.violation for o in self.completed], dtype=float)

    def constraint_gaps(self) -> np.ndarray:
        """A row per completed trial, a column per constraint: its signed gap to the limit
        (see :class:`Observation`); NaN for a failed trial, which reported no metric."""
        width = max((len(o.constraint_gaps) for o in self.completed), default=0)
        rows = [
            o.constraint_gaps if o.ok and len(o.constraint_gaps) == width else (math.nan,) * width
            for o in self.completed
        ]
        return np.array(rows, dtype=float).reshape(len(rows), width)

    def ranking_fitness(self, rows: slice | np.ndarray = slice(None)) -> np.ndarray:
        """A fitness per completed trial (of ``rows``), higher is better, ``-inf`` if failed:
        the negated loss for one objective without constraints; otherwise NSGA-II's order
        (the Pareto front under constraint domination, then crowding; ``pareto.fitness``)
        among those rows."""
        losses, violations = self.loss_matrix()[rows], self.violations()[rows]
        if not self.multi_objective and not violations.any():
            fitness = -losses[:, 0]
            return np.where(np.isnan(fitness), -np.inf, fitness)
        from foldwise.optimizers.pareto import fitness as pareto_fitness  # loads moocore

        return pareto_fitness(losses, violations)

    def seen_keys(self) -> set[tuple]:
        """Keys of every completed and pending configuration, so none is suggested again."""
        return self._history.keys | set(map(config_key, self.pending))


class HistoryIndex:
    """What the optimizer derives from the whole history, kept up to date as it grows instead
    of recomputed at each ``update``: its digest (four 32-bit words that identify the seed and
    the history, stable across processes) and the keys of its configurations. A history that
    is not the last one grown (a shorter one, or other observations at its ends) is read
    afresh."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._restart()

    def _restart(self) -> None:
        # the digest is sha256 of the JSON text [seed, [record, ...], pending], hashed as it
        # grows: the same words as hashing the whole text at once
        self._hasher = hashlib.sha256(f"[{_dumps(self.seed)}, [".encode())
        self.keys: set[tuple] = set()
        self._count = 0
        self._ends: tuple[Observation, Observation] | None = None

    def extend(self, completed: Sequence[Observation]) -> None:
        """Take in ``completed``: the observations past the last history, when it begins so."""
        known = self._count
        if known and (
            len(completed) < known
            or completed[0] is not self._ends[0]  # type: ignore[index]
            or completed[known - 1] is not self._ends[1]  # type: ignore[index]
        ):
            self._restart()
            known = 0
        for index, o in enumerate(completed[known:], start=known):
            self._hasher.update((", " if index else "").encode() + _dumps(_record(o)).encode())
            self.keys.add(config_key(o.params))
        self._count = len(completed)
        self._ends = (completed[0], completed[-1]) if completed else None

    def digest(self, pending: Sequence[dict]) -> list[int]:
        """The digest of the history taken in, with ``pending``."""
        final = self._hasher.copy()
        final.update(f"], {_dumps(list(pending))}]".encode())
        digest = final.digest()
        return [int.from_bytes(digest[i : i + 4], "little") for i in range(0, 16, 4)]


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=repr, allow_nan=True)


def _record(o: Observation) -> list:
    """An observation as the digest reads it."""
    return [
        o.params,
        _float_or_none(o.value if o.ok else None),
        _error_or_none(o.std_error),
        *([o.folds] if o.pruned else []),  # unchanged for studies that never prune
        *([_multi_record(o)] if o.values is not None or o.constraint_gaps else []),
    ]


def _float_or_none(value: float | None) -> float | None:
    return None if value is None else float(value)


def _error_or_none(error: float | None) -> float | None:
    """A standard error as the model hears it: none told and zero are the same (exact)."""
    return None if error is None or error == 0 else float(error)


def _multi_record(o: Observation) -> list:
    """What a multi-objective or constrained observation adds to the history digest."""
    return [
        [_float_or_none(v if o.ok else None) for v in o.objectives],
        [_error_or_none(e) for e in o.objective_errors],
        [float(g) for g in o.constraint_gaps],
    ]


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
