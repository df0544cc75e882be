"""Error answers: every 422 in one shape, never echoing a large input back.

FastAPI's own handler returns each error's whole ``input``: a 1 MB name came back as a 1 MB
error, a 10,000-parameter space as 400 kB. Here each error keeps its type, location and message,
and its input or context only when small; at most ``MAX_ERRORS`` errors are listed.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import Request, status
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

MAX_ERRORS = 20
MAX_ECHO = 200
"""Characters of an input (as JSON) an error may echo; longer inputs are summarised."""
MAX_MESSAGE = 500
MAX_LOC_PART = 64


async def validation_error_handler(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = [compact_error(error) for error in exc.errors()[:MAX_ERRORS]]
    return JSONResponse({"detail": errors}, status_code=status.HTTP_422_UNPROCESSABLE_CONTENT)


def compact_error(error: dict[str, Any]) -> dict[str, Any]:
    """One validation error with its location, message, and only a short input and context."""
    out: dict[str, Any] = {
        "type": str(error.get("type", "value_error")),
        "loc": [_short_loc(part) for part in error.get("loc", ())],
        "msg": _cut(str(error.get("msg", "")), MAX_MESSAGE),
    }
    if "input" in error:
        out["input"] = summarize(error["input"])
    ctx = jsonable_encoder(error.get("ctx"), custom_encoder={Exception: str})
    if ctx and len(json.dumps(ctx, default=str)) <= MAX_ECHO:
        out["ctx"] = ctx
    return out


def summarize(value: Any) -> Any:
    """``value`` itself when short as JSON, else a short description of it."""
    encoded = jsonable_encoder(value, custom_encoder={Exception: str})
    try:
        text = json.dumps(encoded, allow_nan=False)
    except ValueError:  # NaN or an infinity: not JSON
        return repr(value)
    if len(text) <= MAX_ECHO:
        return encoded
    if isinstance(value, str):
        return f"{value[:64]}... ({len(value)} characters)"
    if isinstance(value, dict | list | tuple):
        return f"a {type(value).__name__} of {len(value)} items ({len(text)} bytes as JSON)"
    return f"{text[:64]}... ({len(text)} bytes as JSON)"


def _short_loc(part: Any) -> str | int:
    if isinstance(part, int) and not isinstance(part, bool):
        return part
    return _cut(str(part), MAX_LOC_PART)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[:limit]}..."
