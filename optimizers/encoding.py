"""Numeric views of configurations, shared by the model-based and the evolutionary optimizers.

Each numeric parameter maps to the unit interval through its own scale, log-scale ones in log
space. Integers own equal-width cells (``low - 0.5`` to ``high + 0.5`` before rounding), so
rounding reaches both bounds as often as any inner value. A categorical parameter becomes a
one-hot block. An inactive parameter sits at the centre of its encoded range (0.5, or 1/k in
each of its k columns): every configuration has exactly one vector, and a parameter that does
not apply pulls the model towards no particular value.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from foldwise.space import CategoricalParam, FloatParam, IntParam, Param, condition_order

INACTIVE = 0.5
"""Encoded value of an inactive numeric parameter."""


@dataclass(frozen=True)
class UnitScale:
    """Maps a numeric parameter's values to ``[0, 1]`` and back (linear in its own warping)."""

    start: float
    stop: float
    low: float
    high: float
    log: bool
    integer: bool

    @classmethod
    def of(cls, param: FloatParam | IntParam) -> UnitScale:
        integer = isinstance(param, IntParam)
        low, high = float(param.low), float(param.high)
        edges = (low - 0.5, high + 0.5) if integer else (low, high)
        start, stop = (math.log(e) for e in edges) if param.log else edges
        return cls(start, stop, low, high, param.log, integer)

    def to_unit(self, values: Any) -> np.ndarray:
        x = np.asarray(values, dtype=float)
        x = np.log(x) if self.log else x
        return (x - self.start) / (self.stop - self.start)

    def from_unit(self, units: Any) -> list[int] | list[float]:
        """Values (plain Python ints or floats) for unit coordinates, clipped into the range."""
        units = np.clip(np.asarray(units, dtype=float), 0.0, 1.0)
        x = self.start + units * (self.stop - self.start)
        x = np.exp(x) if self.log else x
        if self.integer:
            return np.clip(np.floor(x + 0.5), self.low, self.high).astype(int).tolist()
        return np.clip(x, self.low, self.high).tolist()


class SpaceEncoding:
    """Configurations as rows of a matrix: one column per numeric parameter, k per categorical."""

    def __init__(self, space: Mapping[str, Param]) -> None:
        self.space = dict(space)
        self.names = condition_order(self.space)
        self.scales: dict[str, UnitScale] = {}
        self.columns: dict[str, slice] = {}
        self._lookup: dict[str, dict[str, int]] = {}
        width = 0
        for name in self.names:
            param = self.space[name]
            size = len(param.choices) if isinstance(param, CategoricalParam) else 1
            if isinstance(param, CategoricalParam):
                self._lookup[name] = {repr(c): i for i, c in enumerate(param.choices)}
            else:
                self.scales[name] = UnitScale.of(param)
            self.columns[name] = slice(width, width + size)
            width += size
        self.width = width

    def encode(self, configs: Sequence[Mapping[str, Any]]) -> np.ndarray:
        """One row per configuration; absent (inactive) parameters take their centre value."""
        X = np.empty((len(configs), self.width))
        for name in self.names:
            param = self.space[name]
            values = [c.get(name) if param.is_active(c) else None for c in configs]
            X[:, self.columns[name]] = self._encode_param(name, values)
        return X

    def decode(self, X: np.ndarray) -> list[dict[str, Any]]:
        """Configurations for rows of ``X``: rounded, clipped, inactive parameters dropped."""
        X = np.atleast_2d(X)
        values: dict[str, list[Any]] = {}
        active: dict[str, np.ndarray] = {}
        for name in self.names:
            values[name] = self._decode_param(name, X[:, self.columns[name]])
            active[name] = self._active(name, values, active, len(X))
        return [
            {name: values[name][i] for name in self.names if active[name][i]}
            for i in range(len(X))
        ]

    def sample(self, count: int, rng: np.random.Generator) -> np.ndarray:
        """Uniform points of the encoded box: unit numeric columns, random one-hot blocks."""
        X = rng.random((count, self.width))
        for name in self.names:
            param = self.space[name]
            if isinstance(param, CategoricalParam):
                picks = rng.integers(len(param.choices), size=count)
                X[:, self.columns[name]] = np.eye(len(param.choices))[picks]
        return X

    def from_unit_cube(self, U: np.ndarray) -> np.ndarray:
        """Encoded points from points of the unit cube with one coordinate per parameter (in
        ``names`` order): numeric columns take it as is, a categorical picks choice ⌊u·k⌋.
        Evenly spread points of the cube (a Sobol sequence) stay evenly spread."""
        X = np.empty((len(U), self.width))
        for j, name in enumerate(self.names):
            param = self.space[name]
            if isinstance(param, CategoricalParam):
                k = len(param.choices)
                picks = np.minimum((U[:, j] * k).astype(int), k - 1)
                X[:, self.columns[name]] = np.eye(k)[picks]
            else:
                X[:, self.columns[name].start] = U[:, j]
        return X

    def choice_index(self, name: str, value: Any) -> int | None:
        """Index of ``value`` among ``name``'s choices: by ``repr`` (so 1 and True differ), then
        by equality for numbers (2.0 read back from JSON for the choice 2)."""
        index = self._lookup[name].get(repr(value))
        if index is not None or isinstance(value, bool):
            return index
        choices = self.space[name].choices
        return next(
            (i for i, c in enumerate(choices) if not isinstance(c, bool) and c == value), None
        )

    def _encode_param(self, name: str, values: list[Any]) -> np.ndarray:
        param = self.space[name]
        if isinstance(param, CategoricalParam):
            k = len(param.choices)
            block = np.full((len(values), k), 1.0 / k)
            for row, value in enumerate(values):
                index = self.choice_index(name, value)
                if index is not None:
                    block[row] = np.eye(k)[index]
            return block
        present = np.array([v is not None for v in values], dtype=bool)
        units = np.full(len(values), INACTIVE)
        if present.any():
            units[present] = self.scales[name].to_unit([v for v in values if v is not None])
        return units[:, None]

    def _decode_param(self, name: str, block: np.ndarray) -> list[Any]:
        param = self.space[name]
        if isinstance(param, CategoricalParam):
            return [param.choices[i] for i in np.argmax(block, axis=1)]
        return self.scales[name].from_unit(block[:, 0])

    def _active(
        self, name: str, values: dict[str, list[Any]], active: dict[str, np.ndarray], n: int
    ) -> np.ndarray:
        mask = np.ones(n, dtype=bool)
        for dep, test in (self.space[name].when or {}).items():
            passes = np.fromiter((test.holds(v) for v in values[dep]), dtype=bool, count=n)
            mask &= active[dep] & passes
        return mask
