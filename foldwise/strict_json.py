"""JSON read strictly: a key given twice in one object, or an integer longer than Python reads,
is an error naming where it is.

``json.loads`` keeps the last of two equal keys, so ``{"name": "a", "name": "b"}`` meant
whatever this parser chose while a proxy or a client library in front might have read the
first; and an integer of more than ``sys.get_int_max_str_digits()`` digits raised a bare
ValueError naming nothing. The service reads request bodies with this
(:mod:`service.api.strict_json`), the SDK and the CLI read ``.json`` spec files with it.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

from foldwise.limits import MAX_DEPTH

JSONPath = list[str | int]

_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}:]|[^"\[\]{}:]+')
"""A string, a bracket or a colon, or a run of anything else (numbers, literals, commas and
space, whose commas are counted at once): what locates a place in JSON text."""


class StrictJSONError(ValueError):
    """A document that parses as JSON but may not be read: ``kind`` names the rule, ``path``
    the keys and indexes to where it breaks it."""

    def __init__(self, kind: str, path: JSONPath, message: str) -> None:
        super().__init__(message)
        self.kind, self.path, self.message = kind, path, message


class _LongInt:
    """Stands in for an integer too long to read, until the parse ends and its place is known."""

    def __init__(self, digits: int) -> None:
        self.digits = digits


def loads_strict(text: str) -> Any:
    """``text`` as JSON; ``json.JSONDecodeError`` where it is not JSON, ``StrictJSONError`` at
    the first key repeated in an object, integer too long to read, or nesting past what the
    parser takes."""
    repeated: list[tuple[dict[str, Any], str]] = []
    long_ints: list[_LongInt] = []

    def read_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(pairs)
        if len(obj) < len(pairs):  # rare: find the first key seen twice
            seen: set[str] = set()
            repeated.append((obj, next(k for k, _v in pairs if k in seen or seen.add(k))))
        return obj

    def read_int(digits_text: str) -> int | _LongInt:
        digits = len(digits_text.lstrip("-"))
        if digits > sys.get_int_max_str_digits():
            long_ints.append(_LongInt(digits))
            return long_ints[-1]
        return int(digits_text)

    try:
        try:
            value = json.loads(text, object_pairs_hook=read_object)
        except json.JSONDecodeError:
            raise
        except ValueError as exc:  # integers are read by the fast path until one is too long
            if "digits" not in str(exc):
                raise
            value = json.loads(text, object_pairs_hook=read_object, parse_int=read_int)
    except RecursionError:  # past the parser's own depth (about 1,000), in either pass
        message = f"is nested more than {MAX_DEPTH} levels deep"
        raise StrictJSONError("too_deep", _path_past_depth(text, MAX_DEPTH), message) from None
    targets = {id(obj) for obj, _key in repeated} | {id(n) for n in long_ints}
    paths = _paths_to(value, targets) if targets else {}
    for obj, key in repeated:  # the first still in the value (a later copy may replace one)
        if id(obj) in paths:
            message = f"the key {key!r} is given twice"
            raise StrictJSONError("json_duplicate_key", [*paths[id(obj)], key], message)
    for long_int in long_ints:
        if id(long_int) in paths:
            message = f"an integer of {long_int.digits} digits is longer than any value allowed"
            raise StrictJSONError("int_parsing_size", paths[id(long_int)], message)
    if repeated or long_ints:  # unreachable: a replaced copy's container is itself repeated
        raise StrictJSONError("json_invalid", [], "the text cannot be read as one JSON value")
    return value


def _path_past_depth(text: str, depth: int) -> JSONPath:
    """Keys and indexes to the first list or mapping in ``text`` nested more than ``depth``
    levels deep (where :func:`foldwise.json_values.find_unsafe` names a chain of lists or
    mappings too deep), read from the text alone: the parser could not build the value. ``[]``
    when there is none."""
    steps: list[str | int | None] = []  # per open container: the key or index being read
    last_string = '""'
    for token in _TOKEN.finditer(text):
        mark = token.group()
        if mark[0] == '"':
            last_string = mark
        elif mark == ":" and steps:
            steps[-1] = json.loads(last_string)
        elif mark in "[{":
            if len(steps) > depth:
                return [step for step in steps if step is not None]
            steps.append(0 if mark == "[" else None)
        elif mark in "]}":
            if steps:
                steps.pop()
        elif steps and isinstance(steps[-1], int):  # a run: its commas step through a list
            steps[-1] += mark.count(",")
    return []


def _paths_to(root: Any, targets: set[int]) -> dict[int, JSONPath]:
    """Keys and indexes from ``root`` to each node whose ``id`` is in ``targets`` (each is
    alive, held by the caller, so ids are not reused), in one walk of the value: a walk per
    target cost repeats times the document's size (31 s for a 64 kB body)."""
    found: dict[int, JSONPath] = {}
    steps: list[tuple[int, str | int | None]] = []  # (the parent's step, the key to here)
    stack: list[tuple[Any, int, str | int | None]] = [(root, -1, None)]
    while stack and len(found) < len(targets):
        node, parent, key = stack.pop()
        here = len(steps)
        steps.append((parent, key))
        if id(node) in targets and id(node) not in found:
            found[id(node)] = _path(steps, here)
        if isinstance(node, dict):
            stack += [(v, here, k) for k, v in reversed(node.items())]
        elif isinstance(node, list):
            stack += [(v, here, i) for i, v in reversed(list(enumerate(node)))]
    return found


def _path(steps: list[tuple[int, str | int | None]], at: int) -> JSONPath:
    path: JSONPath = []
    while at > 0:
        at, key = steps[at]
        assert key is not None
        path.append(key)
    return path[::-1]
