"""Search-space types: parameters, their conditions, and which parameters a config activates.

These are the contract types shared by the API, the optimizers and the trainers. A configuration is
a plain ``dict`` of parameter name to value that holds exactly the *active* parameters.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from foldwise.limits import MAX_ABS_BOUND, MAX_CHOICES, MAX_TEXT_LENGTH

Choice = Annotated[str, Field(max_length=MAX_TEXT_LENGTH)] | int | float | bool
"""A categorical choice or a condition's value."""
Scalar = str | int | float | bool
Bound = Annotated[float, Field(ge=-MAX_ABS_BOUND, le=MAX_ABS_BOUND)]
IntBound = Annotated[int, Field(ge=-int(MAX_ABS_BOUND), le=int(MAX_ABS_BOUND))]


class StrictModel(BaseModel):
    """The base of what a user writes (the study spec, request bodies): strict, so no bool
    where a number goes and no "3" where an int goes (what the JSON Schema says), no unknown
    key, no NaN or infinity."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)


STORED = "stored"
"""Validation context key (``context={STORED: True}``) of a spec read back from the database:
it was accepted when it was submitted, so checks added since (a condition that can never hold,
choices only a condition's equality tells apart) are not made again, and a study queued before
them still runs."""


def same_value(a: Any, b: Any) -> bool:
    """Equal as a condition compares values: ``True`` is not ``1``, nor ``False`` ``0`` (Python
    says they are equal), while ``3`` is ``3.0``."""
    return isinstance(a, bool) == isinstance(b, bool) and a == b


class Comparison(StrictModel):
    """A test on another parameter's value; every operator given must hold."""

    eq: Choice | None = None
    ne: Choice | None = None
    in_: list[Choice] | None = Field(default=None, alias="in", max_length=MAX_CHOICES)
    gt: float | None = None
    gte: float | None = None
    lt: float | None = None
    lte: float | None = None

    model_config = ConfigDict(
        extra="forbid", populate_by_name=True, allow_inf_nan=False, strict=True
    )

    @model_validator(mode="before")
    @classmethod
    def _scalar_means_eq(cls, data: Any) -> Any:
        # `when: {act: relu}` is shorthand for `when: {act: {eq: relu}}`.
        if isinstance(data, str | int | float | bool):
            return {"eq": data}
        if isinstance(data, list):
            return {"in": data}
        return data

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        """The object form, or the shorthands ``_scalar_means_eq`` reads: a value or a list."""
        scalar = {"type": ["string", "number", "boolean"]}
        shorthand = [scalar, {"type": "array", "items": scalar, "maxItems": MAX_CHOICES}]
        return {"anyOf": [handler(core_schema), *shorthand]}

    @model_validator(mode="after")
    def _not_empty(self) -> Comparison:
        if not self.model_dump(exclude_none=True):
            raise ValueError("a condition needs at least one of eq, ne, in, gt, gte, lt, lte")
        return self

    def holds(self, value: Any) -> bool:
        """Whether ``value`` passes every operator of this comparison."""
        if self.eq is not None and not same_value(value, self.eq):
            return False
        if self.ne is not None and same_value(value, self.ne):
            return False
        if self.in_ is not None and not any(same_value(value, v) for v in self.in_):
            return False
        ordered = [
            (self.gt, float.__gt__),
            (self.gte, float.__ge__),
            (self.lt, float.__lt__),
            (self.lte, float.__le__),
        ]
        for bound, test in ordered:
            if bound is None:
                continue
            if not isinstance(value, int | float) or isinstance(value, bool):
                return False
            if not test(float(value), float(bound)):
                return False
        return True


Condition = dict[str, Comparison]


class _Param(StrictModel):
    when: Condition | None = None

    def is_active(self, config: Mapping[str, Any]) -> bool:
        """Active when every condition's parameter is present in ``config`` and passes its test."""
        if not self.when:
            return True
        return all(name in config and cmp.holds(config[name]) for name, cmp in self.when.items())


class FloatParam(_Param):
    type: Literal["float"]
    low: Bound
    high: Bound
    log: bool = False

    @model_validator(mode="after")
    def _check_bounds(self) -> FloatParam:
        _check_range(self.low, self.high, self.log)
        return self


class IntParam(_Param):
    type: Literal["int"]
    low: IntBound
    high: IntBound
    log: bool = False

    @model_validator(mode="after")
    def _check_bounds(self) -> IntParam:
        _check_range(self.low, self.high, self.log)
        return self


class CategoricalParam(_Param):
    type: Literal["categorical"]
    choices: list[Choice] = Field(..., max_length=MAX_CHOICES)

    @field_validator("choices")
    @classmethod
    def _check_choices(cls, choices: list[Scalar], info: ValidationInfo) -> list[Scalar]:
        if not choices:
            raise ValueError("choices must not be empty")
        if len(set(map(repr, choices))) != len(choices):
            raise ValueError("choices must be distinct")
        if not (info.context or {}).get(STORED):  # a check added after studies were stored
            kept: dict[tuple[bool, Scalar], Scalar] = {}
            for choice in choices:  # keys equal exactly when ``same_value`` says so
                same = kept.setdefault((isinstance(choice, bool), choice), choice)
                if same is not choice:
                    raise ValueError(
                        f"choices must be distinct: {choice!r} is the value {same!r} "
                        "(a condition could not tell them apart)"
                    )
        return choices


def _check_range(low: float, high: float, log: bool) -> None:
    if not (math.isfinite(low) and math.isfinite(high)):
        raise ValueError("low and high must be finite")
    if low >= high:
        raise ValueError(f"low ({low}) must be below high ({high})")
    if log and low <= 0:
        raise ValueError(f"a log-scale parameter needs low > 0, got {low}")


Param = Annotated[FloatParam | IntParam | CategoricalParam, Field(discriminator="type")]


class ConditionError(ValueError):
    """A condition on an unknown parameter, on its own parameter, or closing a cycle.

    ``loc`` is where it sits in the space, ``(param, "when", other)``, so that validation
    errors can name the field; ``reason`` is the message without the parameter name.
    """

    def __init__(self, param: str, other: str, reason: str) -> None:
        super().__init__(f"{param}: {reason}")
        self.loc = (param, "when", other)
        self.reason = reason


def condition_order(space: Mapping[str, Param]) -> list[str]:
    """Parameter names ordered so that every parameter comes after those its condition reads.

    Raises ``ConditionError`` (a ``ValueError``) naming the parameter when a condition refers to
    an unknown parameter, to itself, or forms a cycle.
    """
    order: list[str] = []
    state: dict[str, str] = {}

    def visit(name: str, path: tuple[str, ...]) -> None:
        if state.get(name) == "done":
            return
        if state.get(name) == "visiting":  # path[-1]'s condition reads name: the cycle closes
            cycle = " -> ".join((*path, name))
            raise ConditionError(path[-1], name, f"conditions form a cycle ({cycle})")
        state[name] = "visiting"
        for dep in space[name].when or {}:
            if dep not in space:
                raise ConditionError(name, dep, f"condition refers to unknown parameter {dep!r}")
            if dep == name:
                raise ConditionError(name, dep, "a condition cannot refer to its own parameter")
            visit(dep, (*path, name))
        state[name] = "done"
        order.append(name)

    for name in space:
        visit(name, ())
    return order


def check_conditions_can_hold(space: Mapping[str, Param]) -> None:
    """``ConditionError`` at the first condition no value of its parameter passes: checked
    where a space is accepted (it costs more than ``condition_order``, which runs on every
    projection), after ``condition_order`` found every parameter a condition reads."""
    for name, param in space.items():
        for dep, comparison in (param.when or {}).items():
            if not can_hold(comparison, space[dep]):
                reason = f"no value of {dep!r} ({_values_of(space[dep])}) passes this condition"
                raise ConditionError(name, dep, reason)


def can_hold(comparison: Comparison, param: Param) -> bool:
    """Whether some value ``param`` can take passes ``comparison``: a condition that never
    holds (a value that is not a choice, an empty ``in``, ``gt`` on text) leaves its parameter
    never sampled, a typo that costs a whole study."""
    listed = [comparison.eq] if comparison.eq is not None else comparison.in_
    if listed is not None:  # only a listed value can pass
        candidates: Iterable[Any] = (v for v in listed if _takes(param, v))
    elif isinstance(param, CategoricalParam):
        candidates = param.choices
    else:
        candidates = _candidates(comparison, param)
    return any(comparison.holds(value) for value in candidates)


def _takes(param: Param, value: Any) -> bool:
    """Whether ``value`` is one ``param`` can take (as a condition compares it)."""
    if isinstance(param, CategoricalParam):
        return any(same_value(value, choice) for choice in param.choices)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    whole = not isinstance(param, IntParam) or float(value).is_integer()
    return whole and param.low <= value <= param.high


def _candidates(comparison: Comparison, param: FloatParam | IntParam) -> set[float]:
    """Values of a numeric ``param`` that include one passing ``comparison`` if any does: its
    bounds, the comparison's own values, and points between each two of them (two, so that a
    ``ne`` cannot hide a whole interval)."""
    given = [comparison.ne, comparison.gt, comparison.gte, comparison.lt, comparison.lte]
    numbers = {float(v) for v in given if isinstance(v, int | float) and not isinstance(v, bool)}
    marks = sorted(v for v in {param.low, param.high, *numbers} if param.low <= v <= param.high)
    points = set(marks)
    for a, b in zip(marks, marks[1:], strict=False):
        points |= {a + (b - a) / 3, a + 2 * (b - a) / 3}
    if isinstance(param, IntParam):  # whole numbers next to each point
        near = {math.floor(p) + d for p in points for d in (-1, 0, 1, 2)}
        return {n for n in near if param.low <= n <= param.high}
    return points


def _values_of(param: Param) -> str:
    if isinstance(param, CategoricalParam):
        return f"one of {param.choices}"[:200]
    article = "an" if param.type == "int" else "a"
    return f"{article} {param.type} in [{param.low}, {param.high}]"


def active_names(space: Mapping[str, Param], config: Mapping[str, Any]) -> list[str]:
    """Names of the parameters active in ``config``, in condition order."""
    active: dict[str, Any] = {}
    for name in condition_order(space):
        if space[name].is_active(active) and name in config:
            active[name] = config[name]
    return list(active)


def contains(space: Mapping[str, Param], config: Mapping[str, Any]) -> bool:
    """Whether ``config`` holds exactly the active parameters, each inside its range."""
    active: dict[str, Any] = {}
    for name in condition_order(space):
        param = space[name]
        if not param.is_active(active):
            continue
        if name not in config or not _in_range(param, config[name]):
            return False
        active[name] = config[name]
    return set(active) == set(config)


def project(space: Mapping[str, Param], params: Mapping[str, Any]) -> dict[str, Any] | None:
    """``params`` (another study's trial) as a configuration of ``space``, or None if it does
    not fit there.

    It fits when every parameter ``space`` activates for it (its conditions evaluated on the
    values kept so far) is present with a value of the parameter's kind inside its range: a
    number within ``[low, high]`` (a whole one for an int parameter), or one of the choices,
    of the same type (``True`` is not the choice ``1``). Parameters ``space`` lacks or leaves
    inactive are dropped; numbers come back as the parameter's type (``3.0`` as ``3``).
    """
    kept: dict[str, Any] = {}
    for name in condition_order(space):
        param = space[name]
        if not param.is_active(kept):
            continue
        if name not in params:
            return None
        value = _as_value_of(param, params[name])
        if value is None:
            return None
        kept[name] = value
    return kept


def _as_value_of(param: Param, value: Any) -> Any:
    """``value`` as a value of ``param``, or None when it is not one."""
    if isinstance(param, CategoricalParam):
        return value if _in_range(param, value) else None
    if not _in_range(param, value):
        return None
    return int(value) if isinstance(param, IntParam) else float(value)


def _in_range(param: Param, value: Any) -> bool:
    if isinstance(param, CategoricalParam):  # of the same type: True is not the choice 1
        return any(type(c) is type(value) and c == value for c in param.choices)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if isinstance(param, IntParam) and not float(value).is_integer():
        return False
    return param.low <= value <= param.high
