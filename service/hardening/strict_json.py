"""JSON request bodies read strictly (:mod:`foldwise.strict_json`): a key given twice in one
object, or an integer longer than Python reads, is a 422 naming where it is; a body that is not
UTF-8 is a 400 naming the byte.

Starlette's ``json.loads`` keeps the last of two equal keys, and an integer of more than
``sys.get_int_max_str_digits()`` digits raised a ValueError that FastAPI answered with a 400
naming nothing. ``StrictJSONRoute``, the route class of every router with a route that takes a
body, hands its handler a request whose ``json()`` refuses both, and reads only UTF-8
(``json.loads`` of bytes also takes UTF-16 and UTF-32).
"""

from __future__ import annotations

import codecs
from collections.abc import Callable, Coroutine
from typing import Any

import anyio
from fastapi import Depends, HTTPException, Request, Response, status
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute

from foldwise.service.api.auth import authenticate_first, get_principal
from foldwise.service.hardening.errors import compact_error
from foldwise.strict_json import StrictJSONError, loads_strict

INLINE_PARSE_BYTES = 64 * 1024
"""Bodies up to this size are parsed on the event loop (a spec is a few kB); larger ones in a
worker thread, so a body near the limit does not hold every other request up."""


JSON = "application/json"


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
    try:
        return loads_strict(text)
    except StrictJSONError as exc:
        raise _unprocessable(exc.kind, exc.path, exc.message) from None


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
    another media type, or as none, is a 415 (a route whose body may be left out takes a
    request with no body at all) (FastAPI handed the raw bytes to the model, whose
    422 said the valid document it was given "is a bytes"). That check is the route's last
    dependency, so a missing token is still a 401 first. A route that needs a token finds its
    principal before the body is read (``authenticate_first``): without a valid token, a body
    is neither parsed nor judged."""

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        super().__init__(path, endpoint, **kwargs)
        body = self.body_field
        if body is not None and getattr(body.field_info, "media_type", JSON) == JSON:
            given = list(kwargs.pop("dependencies", None) or [])
            required = body.field_info.is_required()
            check = _check_json_media_type if required else _check_json_media_type_if_any
            checked = [*given, Depends(check)]
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


def _check_json_media_type_if_any(request: Request) -> None:
    """As ``_check_json_media_type``, for a route whose body may be left out: a request with
    none (no Content-Length, or 0, and no chunks) takes the body's default."""
    headers = request.headers
    if headers.get("content-length", "0") == "0" and "transfer-encoding" not in headers:
        return
    _check_json_media_type(request)


def _check_json_media_type(request: Request) -> None:
    """A body not declared JSON (``application/json`` or ``application/*+json``), or not
    declared at all, is a 415: FastAPI reads only those as JSON."""
    media_type = request.headers.get("content-type", "none").split(";", 1)[0].strip().lower()
    kind, _slash, subtype = media_type.partition("/")
    if kind == "application" and (subtype == "json" or subtype.endswith("+json")):
        return
    detail = f"Unsupported Media Type: send the body as {JSON}, not {media_type[:80]!r}"
    raise HTTPException(status.HTTP_415_UNSUPPORTED_MEDIA_TYPE, detail, headers={"Accept": JSON})
