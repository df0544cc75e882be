"""JSON request bodies read strictly: a key given twice in one object, or an integer longer than
Python reads, is a 422 naming where it is; a body that is not UTF-8 is a 400 naming the byte.

Starlette's ``json.loads`` keeps the last of two equal keys, so ``{"name": "a", "name": "b"}``
meant whatever this parser chose while a proxy or a client library in front might have read the
first; and an integer of more than ``sys.get_int_max_str_digits()`` digits raised a ValueError
that FastAPI answered with a 400 naming nothing. ``StrictJSONRoute``, the route class of every
router with a route that takes a body, hands its handler a request whose ``json()`` refuses both,
and reads only UTF-8 (``json.loads`` of bytes also takes UTF-16 and UTF-32).
"""

from __future__ import annotations

import codecs
import json
import sys
from collections.abc import Callable, Coroutine
from typing import Any

import anyio
from fastapi import Depends, HTTPException, Request, Response, status
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute

from foldwise.limits import MAX_DEPTH
from service.api.auth import authenticate_first, get_principal
from service.api.errors import compact_error

INLINE_PARSE_BYTES = 64 * 1024
"""Bodies up to this size are parsed on the event loop (a spec is a few kB); larger ones in a
worker thread, so a body near the limit does not hold every other request up."""


JSON = "application/json"


class _LongInt:
    """Stands in for an integer too long to read, until the parse ends and its place is known."""

    def __init__(self, digits: int) -> None:
        self.digits = digits


def parse_json_body(body: bytes) -> Any:
    """``body`` as JSON; ``HTTPException`` 422, in the shape of a validation error, at the
    first key repeated in an object or integer too long to read."""
    bom = len(codecs.BOM_UTF8) if body.startswith(codecs.BOM_UTF8) else 0
    try:  # JSON is UTF-8 (RFC 8259); Python would also read UTF-16 and UTF-32
        text = body[bom:].decode("utf-8")
    except UnicodeDecodeError as exc:
        at = bom + exc.start  # in the body as sent, its BOM included
        detail = f"The body is not UTF-8 JSON: byte {body[at]:#04x} at {at}"
        raise HTTPException(status.HTTP_400_BAD_REQUEST, detail) from None
    repeated: list[tuple[dict[str, Any], str]] = []
    long_ints: list[_LongInt] = []

    def read_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(pairs)
        if len(obj) < len(pairs):  # rare: find the first key seen twice
            seen: set[str] = set()
            repeated.append((obj, next(k for k, _v in pairs if k in seen or seen.add(k))))
        return obj

    def read_int(text: str) -> int | _LongInt:
        digits = len(text.lstrip("-"))
        if digits > sys.get_int_max_str_digits():
            long_ints.append(_LongInt(digits))
            return long_ints[-1]
        return int(text)

    try:
        value = json.loads(text, object_pairs_hook=read_object)
    except json.JSONDecodeError:
        raise
    except RecursionError:  # past the parser's own depth (about 1,000): a 400 naming nothing
        message = f"is nested more than {MAX_DEPTH} levels deep"
        raise _unprocessable("too_deep", [], message) from None
    except ValueError as exc:  # integers are read by the fast path until one is too long
        if "digits" not in str(exc):
            raise
        value = json.loads(text, object_pairs_hook=read_object, parse_int=read_int)
    targets = {id(obj) for obj, _key in repeated} | {id(n) for n in long_ints}
    paths = _paths_to(value, targets) if targets else {}
    for obj, key in repeated:  # the first still in the value (a later copy may replace one)
        if id(obj) in paths:
            message = f"the key {key!r} is given twice"
            raise _unprocessable("json_duplicate_key", [*paths[id(obj)], key], message)
    for long_int in long_ints:
        if id(long_int) in paths:
            message = f"an integer of {long_int.digits} digits is longer than any value allowed"
            raise _unprocessable("int_parsing_size", paths[id(long_int)], message)
    if repeated or long_ints:  # unreachable: a replaced copy's container is itself repeated
        raise _unprocessable("json_invalid", [], "the body cannot be read as one JSON value")
    return value


def _paths_to(root: Any, targets: set[int]) -> dict[int, list[str | int]]:
    """Keys and indexes from ``root`` to each node whose ``id`` is in ``targets`` (each is
    alive, held by the caller, so ids are not reused), in one walk of the value: a walk per
    target cost repeats times the document's size (31 s for a 64 kB body)."""
    found: dict[int, list[str | int]] = {}
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


def _path(steps: list[tuple[int, str | int | None]], at: int) -> list[str | int]:
    path: list[str | int] = []
    while at > 0:
        at, key = steps[at]
        assert key is not None
        path.append(key)
    return path[::-1]


def _unprocessable(kind: str, path: list[str | int], message: str) -> HTTPException:
    error = compact_error({"type": kind, "loc": ["body", *path], "msg": message})
    return HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, detail=[error])


class StrictJSONRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            body = await self.body()
            if len(body) <= INLINE_PARSE_BYTES:
                self._json = parse_json_body(body)
            else:  # tens of milliseconds near the body limit: off the event loop
                self._json = await anyio.to_thread.run_sync(parse_json_body, body)
        return self._json


class StrictJSONRoute(APIRoute):
    """A route whose JSON body is read by ``parse_json_body``; a body it reads as JSON sent as
    another media type, or as none, is a 415 (FastAPI handed the raw bytes to the model, whose
    422 said the valid document it was given "is a bytes"). That check is the route's last
    dependency, so a missing token is still a 401 first. A route that needs a token finds its
    principal before the body is read (``authenticate_first``): without a valid token, a body
    is neither parsed nor judged."""

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        super().__init__(path, endpoint, **kwargs)
        body = self.body_field
        if body is not None and getattr(body.field_info, "media_type", JSON) == JSON:
            given = list(kwargs.pop("dependencies", None) or [])
            checked = [*given, Depends(_check_json_media_type)]
            super().__init__(path, endpoint, dependencies=checked, **kwargs)
        self.authenticates = _depends_on(self.dependant, get_principal)

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def strict_handler(request: Request) -> Response:
            strict = StrictJSONRequest(request.scope, request.receive)
            if self.authenticates:
                await authenticate_first(strict)
            return await handler(strict)

        return strict_handler


def _depends_on(dependant: Dependant, call: Callable[..., Any]) -> bool:
    return any(d.call is call or _depends_on(d, call) for d in dependant.dependencies)


def _check_json_media_type(request: Request) -> None:
    """A body not declared JSON (``application/json`` or ``application/*+json``), or not
    declared at all, is a 415: FastAPI reads only those as JSON."""
    media_type = request.headers.get("content-type", "none").split(";", 1)[0].strip().lower()
    kind, _slash, subtype = media_type.partition("/")
    if kind == "application" and (subtype == "json" or subtype.endswith("+json")):
        return
    detail = f"Unsupported Media Type: send the body as {JSON}, not {media_type[:80]!r}"
    raise HTTPException(status.HTTP_415_UNSUPPORTED_MEDIA_TYPE, detail, headers={"Accept": JSON})
