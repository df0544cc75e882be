"""What any value in a submitted document may hold, checked before the fields are parsed.

A document comes from JSON or YAML, and both can carry what no field should store: NaN and the
infinities (``NaN``, ``1e400``), strings with NUL or other control characters or lone surrogates
(not text: PostgreSQL refuses NUL, and UTF-8 cannot encode a surrogate), integers beyond SQL's
BIGINT and nesting deep enough to exhaust the stack of whatever reads it next; YAML can also
carry what JSON cannot (a date, bytes, a set). ``find_unsafe`` walks a document once and names
each such place, so the error points at the field.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from foldwise.limits import MAX_DEPTH, MAX_INT

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")

Loc = tuple[str | int, ...]


@dataclass(frozen=True)
class Unsafe:
    """One place in a document that holds what no field may: ``kind`` names the rule."""

    loc: Loc
    kind: str
    message: str


def text_problem(value: str) -> tuple[str, str] | None:
    """(kind, message) when ``value`` is not plain text, else None."""
    if _SURROGATE.search(value):
        return "string_surrogate", "contains a lone surrogate, which is not valid Unicode"
    if control := _CONTROL.search(value):
        return "string_control", f"contains the control character U+{ord(control.group()):04X}"
    return None


def find_unsafe(value: Any, loc: Loc = (), depth: int = 0) -> Iterator[Unsafe]:
    """Every place under ``value`` that holds a non-finite number, an integer out of range, a
    string that is not plain text, a value JSON has no type for, or nesting deeper than
    ``MAX_DEPTH``."""
    if depth > MAX_DEPTH:
        yield Unsafe(loc, "too_deep", f"is nested more than {MAX_DEPTH} levels deep")
        return
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, float) and not math.isfinite(value):
        yield Unsafe(loc, "finite_number", "must be a finite number (not NaN or infinite)")
    elif isinstance(value, int) and abs(value) > MAX_INT:
        yield Unsafe(loc, "int_out_of_range", f"must lie within ±{MAX_INT}")
    elif isinstance(value, str):
        problem = text_problem(value)
        if problem is not None:
            yield Unsafe(loc, *problem)
    elif isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and (problem := text_problem(key)) is not None:
                yield Unsafe((*loc, _printable(key)), problem[0], f"key {problem[1]}")
                continue
            yield from find_unsafe(item, (*loc, key), depth + 1)
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from find_unsafe(item, (*loc, index), depth + 1)
    elif not isinstance(value, int | float):
        kind = type(value).__name__
        yield Unsafe(loc, "json_type", f"is a {kind}, not text, a number, a list or a mapping")


def _printable(key: str, limit: int = 64) -> str:
    """A key that can appear in an error's location: escaped, and cut short if long."""
    escaped = key[:limit].encode("unicode_escape").decode("ascii")
    return escaped if len(key) <= limit else f"{escaped}..."
