"""Headers every answer carries, and the Content-Security-Policy of the dashboard's pages.

The dashboard renders text users wrote (study names, parameter names, choices, fold errors) and
holds a token in a cookie; these are the second line of defence behind its escaping:
``nosniff`` keeps a browser from reading a JSON or CSV answer as HTML or script, no page may be
framed (clickjacking), a link out sends no URL, and a page runs only its own scripts (the one
inline script of a page carries that answer's nonce).
"""

from __future__ import annotations

import secrets

from starlette.datastructures import MutableHeaders
from starlette.types import Message, Receive, Scope, Send

from foldwise.service.hardening.http_rules import HttpOnlyMiddleware

EVERY_ANSWER = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
}


class SecurityHeaders(HttpOnlyMiddleware):
    """ASGI middleware adding ``EVERY_ANSWER`` to each HTTP answer that does not set them."""

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in EVERY_ANSWER.items():
                    headers.setdefault(name, value)
            await send(message)

        await self.app(scope, receive, send_with_headers)


def page_policy() -> tuple[str, dict[str, str]]:
    """A fresh nonce for a dashboard page's inline scripts, and the headers that go with it:
    its scripts come only from here (Plotly sets inline styles, so styles may be inline), it
    talks only to this service, and being signed in it is never stored by a cache."""
    nonce = secrets.token_urlsafe(16)
    policy = "; ".join(
        [
            "default-src 'self'",
            f"script-src 'self' 'nonce-{nonce}'",
            "style-src 'self' 'unsafe-inline'",
            "img-src 'self' data: blob:",
            "connect-src 'self'",
            "object-src 'none'",
            "base-uri 'none'",
            "form-action 'self'",
            "frame-ancestors 'none'",
        ]
    )
    return nonce, {"Content-Security-Policy": policy, "Cache-Control": "no-store"}
