"""The Ray Tune searcher's search space: the foldwise parameters its optimizer sees, and where
and how each of their values lands in a trial's config.

Two forms are read. A Tune ``param_space`` (``tune.uniform``, ``loguniform``, ``quniform``,
``qloguniform``, ``randint``, ``lograndint``, ``qrandint``, ``qlograndint``, ``choice``, in
nested dicts too) becomes foldwise parameters that keep Tune's meaning: ``randint`` and
``lograndint`` exclude their upper bound where foldwise's ``int`` includes it; a quantized
domain becomes an ``int`` over its grid (the optimizer's ``k`` stands for ``k * q``, the grid
Tune itself samples); a ``choice`` whose categories are not distinct plain scalars becomes a
categorical over their indices. A foldwise space dict (``foldwise.space`` parameters, ``when``
conditions included) is taken as it is.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from pydantic import TypeAdapter, ValidationError
from ray.tune.search.sample import (
    Categorical,
    Domain,
    Float,
    Function,
    Integer,
    LogUniform,
    Normal,
    Quantized,
    Uniform,
)
from ray.tune.search.variant_generator import parse_spec_vars

from foldwise.space import (
    CategoricalParam,
    FloatParam,
    IntParam,
    Param,
    active_names,
    check_conditions_can_hold,
    condition_order,
    contains,
)

_SPACE: TypeAdapter[dict[str, Param]] = TypeAdapter(dict[str, Param])


@dataclass(frozen=True)
class Placement:
    """Where one optimizer parameter goes in a trial's (nested) config, and how its value is
    decoded: ``step`` for a quantized domain (``k`` stands for ``k * step``), ``choices`` for a
    categorical coded by index. Neither: the value goes as it is."""

    path: tuple[str, ...]
    step: int | float | None = None
    choices: tuple[Any, ...] | None = None

    def decode(self, value: Any) -> Any:
        """The config's value for the optimizer's ``value``."""
        if self.choices is not None:
            return self.choices[value]
        if self.step is None:
            return value
        if isinstance(self.step, int):
            return int(value) * self.step
        # 3 × 0.1 is 0.30000000000000004 in floats; decimal arithmetic gives the grid's 0.3
        return float(int(value) * Decimal(repr(self.step)))

    def encode(self, value: Any) -> Any:
        """The optimizer's value for a config's ``value``; ``ValueError`` if it is off the
        domain's grid or not one of its choices."""
        if self.choices is not None:
            for index, choice in enumerate(self.choices):
                if _equal(choice, value):
                    return index
            raise ValueError(f"{value!r} is not one of the choices")
        if self.step is None:
            return value
        index = round(value / self.step)
        if not math.isclose(index * self.step, value, rel_tol=1e-9, abs_tol=1e-12):
            raise ValueError(f"{value!r} is not a multiple of {self.step}")
        return index


@dataclass(frozen=True)
class SearchSpace:
    """The optimizer's parameters (by name) and where each goes in a trial's config."""

    params: dict[str, Param]
    placements: dict[str, Placement]

    def to_config(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The trial config for the optimizer's ``params`` (nested as the param_space was)."""
        config: dict[str, Any] = {}
        for name, value in params.items():
            place = self.placements[name]
            node = config
            for key in place.path[:-1]:
                node = node.setdefault(key, {})
            node[place.path[-1]] = place.decode(value)
        return config

    def from_config(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """The optimizer's params for a trial ``config``, inactive parameters dropped;
        ``ValueError`` when the config does not lie in the space."""
        found: dict[str, Any] = {}
        for name, place in self.placements.items():
            node: Any = config
            for key in place.path:
                node = node.get(key, _MISSING) if isinstance(node, Mapping) else _MISSING
            if node is _MISSING:
                continue
            try:
                found[name] = place.encode(node)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"parameter {name!r}: {exc}") from None
        params = {name: found[name] for name in active_names(self.params, found)}
        if not contains(self.params, params):
            raise ValueError(f"the config does not lie in the search space: {dict(config)!r}")
        return params

    def to_json(self) -> dict[str, Any]:
        """A JSON-able record of the space; choices that JSON cannot hold are counted only."""
        record: dict[str, Any] = {}
        for name, place in self.placements.items():
            param = self.params[name].model_dump(mode="json", by_alias=True, exclude_none=True)
            item: dict[str, Any] = {"param": param, "path": list(place.path)}
            if place.step is not None:
                item["step"] = place.step
            if place.choices is not None and _survives_json(list(place.choices)):
                item["choices"] = list(place.choices)
            elif place.choices is not None:
                item["unsaved_choices"] = len(place.choices)
            record[name] = item
        return record

    @classmethod
    def from_json(cls, record: Mapping[str, Any]) -> SearchSpace:
        """The space ``to_json`` recorded; ``ValueError`` when its choices could not be saved."""
        params = _SPACE.validate_python({name: item["param"] for name, item in record.items()})
        placements = {}
        for name, item in record.items():
            if "unsaved_choices" in item:
                raise ValueError(
                    f"parameter {name!r}: its choices are not JSON and were not saved; give the "
                    "searcher its search space (space= or the param_space) before restoring"
                )
            choices = tuple(item["choices"]) if "choices" in item else None
            placements[name] = Placement(tuple(item["path"]), item.get("step"), choices)
        return cls(params, placements)


def read_space(space: Mapping[str, Any]) -> SearchSpace:
    """A Tune ``param_space`` or a foldwise space dict, whichever ``space`` is."""
    if has_tune_domains(space):
        return space_from_tune(space)
    return space_from_foldwise(space)


def has_tune_domains(config: Mapping[str, Any]) -> bool:
    """Whether ``config`` holds a Tune search domain or a ``grid_search`` anywhere."""
    _, domains, grids = parse_spec_vars(dict(config))
    return bool(domains or grids)


def space_from_foldwise(space: Mapping[str, Any]) -> SearchSpace:
    """A foldwise space dict (parameters as dicts or ``foldwise.space`` models)."""
    try:
        params = _SPACE.validate_python(dict(space))
    except ValidationError as exc:
        raise ValueError(f"invalid search space: {_first_error(exc)}") from None
    if not params:
        raise ValueError("the search space needs at least one parameter")
    condition_order(params)  # a ConditionError (ValueError) naming the parameter
    check_conditions_can_hold(params)
    return SearchSpace(params, {name: Placement((name,)) for name in params})


def space_from_tune(config: Mapping[str, Any]) -> SearchSpace:
    """The search domains of a Tune ``param_space``; constants in it are left to Tune, which
    merges them into every trial's config. ``ValueError`` names any domain it cannot take."""
    _, domains, grids = parse_spec_vars(dict(config))
    for path, _ in grids:
        raise ValueError(
            f"parameter {_name(path)!r}: grid_search is not supported by FoldwiseSearch, whose "
            "optimizer picks every value; use tune.choice"
        )
    if not domains:
        raise ValueError("the param_space holds no Tune search domain")
    params: dict[str, Param] = {}
    placements: dict[str, Placement] = {}
    for path, domain in domains:
        name = _name(path)
        if not all(isinstance(key, str) for key in path):
            raise ValueError(f"parameter {name!r}: search domains inside lists are not supported")
        if name in params:
            raise ValueError(f"parameter {name!r}: two param_space entries share this name")
        try:
            params[name], placements[name] = _convert(domain, tuple(path))
        except (ValidationError, ValueError) as exc:
            reason = _first_error(exc) if isinstance(exc, ValidationError) else str(exc)
            raise ValueError(f"parameter {name!r}: {reason}") from None
    return SearchSpace(params, placements)


def _convert(domain: Domain, path: tuple[str, ...]) -> tuple[Param, Placement]:
    sampler = domain.get_sampler()
    step = None
    if isinstance(sampler, Quantized):
        step, sampler = sampler.q, sampler.get_sampler()
    if isinstance(domain, Function):
        raise ValueError(
            "tune.sample_from is not supported: FoldwiseSearch picks every value itself (for "
            "conditional parameters give it a foldwise space with `when` conditions)"
        )
    if isinstance(sampler, Normal):
        raise ValueError("tune.randn / qrandn are not supported: the optimizers need bounds")
    if isinstance(domain, Categorical) and isinstance(sampler, Uniform) and step is None:
        return _categorical(list(domain.categories), path)
    if isinstance(domain, Float | Integer) and isinstance(sampler, Uniform | LogUniform):
        return _numeric(domain, step, isinstance(sampler, LogUniform), path)
    kind = type(domain).__name__
    raise ValueError(f"a {kind} domain sampled by {sampler} is not supported")


def _numeric(
    domain: Float | Integer, step: float | None, log: bool, path: tuple[str, ...]
) -> tuple[Param, Placement]:
    integer = isinstance(domain, Integer)
    if step is None and not integer:
        param = FloatParam(type="float", low=domain.lower, high=domain.upper, log=log)
        return param, Placement(path)
    if step is None:  # randint, lograndint: Tune's upper bound is exclusive, foldwise's inclusive
        low, high, place = int(domain.lower), int(domain.upper) - 1, Placement(path)
    else:  # the grid of multiples of q inside the bounds, as Tune's Quantized samples it
        low = _grid_index(domain.lower, step, math.ceil)
        high = _grid_index(domain.upper, step, math.floor)
        if integer and step == 1:  # Tune: qrandint(q=1) excludes its upper bound
            high, place = high - 1, Placement(path)
        else:
            place = Placement(path, int(step) if integer else float(step))
    if low >= high:
        raise ValueError(
            "the domain holds fewer than two values: put a constant in the param_space instead"
        )
    return IntParam(type="int", low=low, high=high, log=log), place


def _grid_index(bound: float, step: float, inward: Callable[[float], float]) -> int:
    """``bound``'s index on the grid of multiples of ``step``, rounded inwards unless it lies on
    the grid (within float error), as Tune's ``Quantized._grid_index`` does."""
    scaled = bound / step
    nearest = round(scaled)
    return int(nearest if math.isclose(scaled, nearest) else inward(scaled))


def _categorical(choices: list[Any], path: tuple[str, ...]) -> tuple[Param, Placement]:
    try:
        return CategoricalParam(type="categorical", choices=choices), Placement(path)
    except ValidationError:  # lists, dicts, None, objects or repeats: the optimizer sees indices
        indices: list[Any] = list(range(len(choices)))
        param = CategoricalParam(type="categorical", choices=indices)
        return param, Placement(path, choices=tuple(choices))


def _name(path: tuple[Any, ...]) -> str:
    return "/".join(map(str, path))


def _first_error(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(map(str, error["loc"]))
    return f"{where}: {error['msg']}" if where else error["msg"]


def _survives_json(value: Any) -> bool:
    try:
        return json.loads(json.dumps(value)) == value
    except (TypeError, ValueError):
        return False


def _equal(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except (TypeError, ValueError):  # e.g. arrays, whose == is elementwise
        return False


_MISSING = object()
