"""Headless Chromium for the dashboard's tests and benchmarks: Debian's browser, driven by
Playwright (which never downloads one), a signed-in context, and a wait that works under the
dashboard's Content-Security-Policy."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from foldwise.service.api.auth import CSRF_COOKIE, TOKEN_COOKIE

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def wait_until(page: Any, expression: str, timeout: float = 15_000) -> None:
    """Wait until ``expression`` is true in ``page``, polled from here every 10 ms: Playwright's
    ``wait_for_function`` compiles it inside the page, which the dashboard's
    Content-Security-Policy refuses (no string is evaluated as script there)."""
    deadline = time.monotonic() + timeout / 1000
    while True:
        try:
            if page.evaluate(expression):
                return
            why = "false"
        except Exception as exc:  # what it reads is not on the page yet
            why = str(exc).splitlines()[0]
        if time.monotonic() > deadline:
            raise TimeoutError(f"not true after {timeout / 1000:g} s ({why}): {expression}")
        time.sleep(0.01)


def sign_in(context: Any, url: str, token: str) -> None:
    """Give a browser context the cookies the sign-in page would (the token, a CSRF token)."""
    context.add_cookies(
        [
            {"name": TOKEN_COOKIE, "value": token, "url": url, "httpOnly": True},
            {"name": CSRF_COOKIE, "value": "test-csrf-token", "url": url},
        ]
    )


def require_chromium() -> None:
    """Skip the calling test when ``/usr/bin/chromium`` is missing (``make browser`` installs
    it), except under ``CI=true``, where a missing browser is an error."""
    if Path(CHROMIUM).exists():
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI needs Chromium at {CHROMIUM}: run `make browser`")
    pytest.skip(f"no Chromium at {CHROMIUM} (install it with `make browser`)")
