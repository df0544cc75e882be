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
- A body past the limit is a 413 in the JSON every other error has, naming the limit: the body
  limiter (outside every other middleware) answered ``text/plain`` when the request declared
  its length (``TooLargeAsJson`` wraps the whole stack).
"""

from __future__ import annotations

import json

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
    """ASGI middleware applying the rules above to every HTTP request."""

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        refused = _refusal(scope)
        if refused is not None:
            await refused(scope, receive, send)
            return
        if scope["method"] == "HEAD":
            await self.app({**scope, "method": "GET"}, receive, _without_body(send))
            return
        await self.app(scope, receive, send)


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


def _without_body(send: Send) -> Send:
    """``send`` with every body chunk emptied (headers, Content-Length included, kept)."""

    async def send_head(message: Message) -> None:
        if message["type"] == "http.response.body":
            message = {**message, "body": b""}
        await send(message)

    return send_head


class TooLargeAsJson(HttpOnlyMiddleware):
    """ASGI wrapper answering every 413 as ``{"detail": ...}`` JSON that names the limit."""

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        replaced = False

        async def send_json(message: Message) -> None:
            nonlocal replaced
            if message["type"] == "http.response.start" and message["status"] == 413:
                replaced = True
                limit = scope.get(MAX_BODY_SIZE_SCOPE_KEY)
                detail = "Content Too Large: the body is larger than the service accepts"
                body = json.dumps({"detail": f"{detail} ({limit} bytes)" if limit else detail})
                headers = MutableHeaders(raw=list(message.get("headers", [])))
                headers["content-type"] = "application/json"
                headers["content-length"] = str(len(body))
                await send({**message, "headers": headers.raw})
                await send({"type": "http.response.body", "body": body.encode()})
            elif not replaced:  # the original 413's body is dropped
                await send(message)

        await self.app(scope, receive, send_json)
