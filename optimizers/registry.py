"""Optimizers by name, imported on first use so the API starts without loading scikit-optimize."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from importlib import import_module
from typing import Any

from foldwise.optimizers.base import BaseOptimizer, OptionError
from foldwise.space import Param
from foldwise.spec import Direction

_OPTIMIZERS: dict[str, str] = {  # keyed by foldwise.spec.OPTIMIZER_NAMES (a test holds it)
    "random": "foldwise.optimizers.random_search:RandomOptimizer",
    "gp": "foldwise.optimizers.gp:GPOptimizer",
    "evolution": "foldwise.optimizers.evolution:EvolutionOptimizer",
    "nas_evolution": "foldwise.optimizers.nas_evolution:NASEvolutionOptimizer",
}


def optimizer_names() -> tuple[str, ...]:
    """Every registered name; equal to ``foldwise.spec.OPTIMIZER_NAMES``."""
    return tuple(_OPTIMIZERS)


def optimizer_class(name: str) -> type[BaseOptimizer]:
    """The class registered as ``name``, imported now; ``ValueError`` for an unknown name."""
    try:
        module_name, attribute = _OPTIMIZERS[name].split(":")
    except KeyError:
        known = ", ".join(_OPTIMIZERS)
        raise ValueError(f"unknown optimizer {name!r} (known: {known})") from None
    return getattr(import_module(module_name), attribute)


def create_optimizer(
    name: str,
    space: Mapping[str, Param],
    *,
    direction: Direction = Direction.MINIMIZE,
    directions: Sequence[Direction] | None = None,
    seed: int = 0,
    budget: int | None = None,
    options: Mapping[str, Any] | None = None,
) -> BaseOptimizer:
    """A fresh optimizer; ``ValueError`` for an unknown name or bad options. ``directions``
    (one per objective) makes it a multi-objective one."""
    if options is not None and not isinstance(options, Mapping):
        raise ValueError(f"options must be a mapping, got {type(options).__name__}")
    bad_keys = [key for key in options or {} if not isinstance(key, str)]
    if bad_keys:
        raise ValueError(f"option names must be strings, got {bad_keys!r}")
    reserved = sorted(set(options or {}) & {"direction", "directions", "seed", "budget"})
    if reserved:
        message = f"{', '.join(reserved)} come from the study, not from options"
        raise OptionError(reserved[0], message)
    cls = optimizer_class(name)
    return cls(
        space,
        direction=direction,
        directions=directions,
        seed=seed,
        budget=budget,
        **dict(options or {}),
    )
