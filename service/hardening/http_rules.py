"""What HTTP itself says about requests, before any route sees them.

- A ``Host``, ``Authorization``, ``Content-Length`` or ``Content-Type`` given twice is a 400:
  the first copy won, where a proxy in front may have read the other.
- ``HEAD`` is answered wherever ``GET`` is, with the same status and headers and no body
  (RFC 9110 9.3.2; FastAPI's routes list only the methods they declare, so HEAD was a 405).
- A path with an encoded slash (``/studies/1%2Ftrials``) is a 404: routing reads the decoded
  path, so it reached ``/studies/1/trials``, a URL the client did not name. No id, trial number
  or static file name here holds a slash.
- A body sent with a ``Content-Encoding`` other than ``identity`` (gzip, say) is a 415 whose
  ``Accept-Encoding: identity`` says what is read (RFC 9110 15.5.16), not a 400 about JSON.
- Every error is answered in the JSON routes give (``ErrorsAsJson`` wraps the whole stack):
  the body limiter (outside every other middleware) answered a 413 in ``text/plain`` when the
  request declared its length, the host check a 400, and a file download a malformed or
  unsatisfiable ``Range``.
"""

from __future__ import annotations

import contextlib
import json
from http import HTTPStatus

from starlette.datastructures import MutableHeaders
from starlette.middleware.body_limit import MAX_BODY_SIZE_SCOPE_KEY
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class HttpOnlyMiddleware:
    """Base of a pure ASGI middleware that handles HTTP requests only (lifespan events and
    websockets pass by): subclasses write ``handle``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await self.handle(scope, receive, send)

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        raise NotImplementedError


class HttpRules(HttpOnlyMiddleware):
    """ASGI middleware refusing what the rules above refuse."""

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        refused = _refusal(scope)
        if refused is not None:
            await refused(scope, receive, send)
            return
        await self.app(scope, receive, send)


class HeadAsGet(HttpOnlyMiddleware):
    """ASGI wrapper answering HEAD as GET without the body; it wraps the whole stack, so the
    headers are those of the answer GET gets, an error made JSON included. The answer ends at
    its first body chunk, and the app is stopped there: a HEAD of a model file or a CSV export
    reads no more than its first chunk."""

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return

        async def send_head(message: Message) -> None:
            if message["type"] != "http.response.body":
                await send(message)
                return
            await send({"type": "http.response.body", "body": b""})
            raise _HeadAnswered

        try:
            await self.app({**scope, "method": "GET"}, receive, send_head)
        except* _HeadAnswered:  # a streaming answer's task group may wrap it
            pass


class _HeadAnswered(Exception):
    """Raised into the app once a HEAD's answer has ended: what it goes on making is unsent."""


_ONCE = (b"host", b"authorization", b"content-length", b"content-type")
"""Headers a request may give only once: a proxy and this service could each read a
different copy (RFC 9112 3.2 asks a 400 for a second Host)."""


def _refusal(scope: Scope) -> JSONResponse | None:
    names = [key.lower() for key, _value in scope["headers"]]
    for name in _ONCE:
        if names.count(name) > 1:
            detail = f"Bad Request: the {name.decode().title()} header is given twice"
            return JSONResponse({"detail": detail}, 400)
    raw_path: bytes = scope.get("raw_path") or scope["path"].encode()
    if b"%2f" in raw_path.lower():
        return JSONResponse({"detail": "Not Found: the path holds an encoded slash"}, 404)
    coding = _header(scope, b"content-encoding").strip().lower()
    if coding not in ("", "identity"):
        message = f"Unsupported Media Type: the body's Content-Encoding {coding!r} is not read"
        return JSONResponse({"detail": message}, 415, headers={"Accept-Encoding": "identity"})
    return None


def _header(scope: Scope, name: bytes) -> str:
    for key, value in scope["headers"]:
        if key.lower() == name:
            return value.decode("latin-1")
    return ""


class ErrorsAsJson(HttpOnlyMiddleware):
    """ASGI wrapper answering every error some part of the stack gives as text in the JSON
    ``{"detail": ...}`` that routes give: the body limiter's 413 (named with the limit), the
    host check's 400, a model download's malformed (400) or unsatisfiable (416) ``Range``.
    Its headers are kept (a 416's ``Content-Range``)."""

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        start: Message | None = None
        text = bytearray()

        async def send_json() -> None:
            nonlocal start
            assert start is not None
            held, start = start, None
            detail = _error_detail(held["status"], text.decode("utf-8", "replace"), scope)
            body = json.dumps({"detail": detail}).encode()
            headers = MutableHeaders(raw=list(held.get("headers", [])))
            headers["content-type"] = "application/json"
            headers["content-length"] = str(len(body))
            await send({**held, "headers": headers.raw})
            await send({"type": "http.response.body", "body": body})

        async def send_or_hold(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start" and _is_text_error(message):
                start = message
                return
            if start is None or message["type"] != "http.response.body":
                await send(message)
                return
            text.extend(message.get("body", b"")[: MAX_TEXT - len(text)])
            if not message.get("more_body", False):
                await send_json()

        try:
            await self.app(scope, receive, send_or_hold)
        finally:  # an answer begun and never ended (the app raised) goes out as it came
            if start is not None:
                with contextlib.suppress(Exception):  # the app's own error is the one raised
                    await send_json()


MAX_TEXT = 1000
"""Bytes of a text error kept as its detail."""


def _is_text_error(message: Message) -> bool:
    """An error in text, or any 413: read from a body sent in chunks, the limit raises an
    HTTPException whose JSON does not name it."""
    if message["status"] < 400:
        return False
    if message["status"] == 413:
        return True
    for key, value in message.get("headers", []):
        if key.lower() == b"content-type":
            return value.lower().startswith(b"text/plain")
    return False


def _error_detail(code: int, text: str, scope: Scope) -> str:
    if code == 413:
        limit = scope.get(MAX_BODY_SIZE_SCOPE_KEY)
        detail = "Content Too Large: the body is larger than the service accepts"
        return f"{detail} ({limit} bytes)" if limit else detail
    try:
        phrase = HTTPStatus(code).phrase
    except ValueError:
        phrase = "Error"
    text = text.strip() or (
        "the Range asked for lies past the end of the file" if code == 416 else ""
    )
    if not text or text.lower().startswith(phrase.lower()):
        return text or phrase
    return f"{phrase}: {text}"
