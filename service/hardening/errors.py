"""Error answers: every 422 in one shape, never echoing a large input back; the documented error
responses; and a 405 whose ``Allow`` header is true.

FastAPI's own handler returns each error's whole ``input``: a 1 MB name came back as a 1 MB
error, a 10,000-parameter space as 400 kB. Here each error keeps its type, location and message,
and its input or context only when small; at most ``MAX_ERRORS`` errors are listed.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import Request, Response, status
from fastapi.encoders import jsonable_encoder
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match, Mount
from starlette.staticfiles import StaticFiles

from foldwise.service.admission.task_policy import task_choices

MAX_ERRORS = 20
MAX_ECHO = 200
"""Characters of an input (as JSON) an error may echo; longer inputs are summarised."""
MAX_MESSAGE = 500
MAX_LOC_PART = 64
_TASK_LOC = ("body", "trainer", "task")


async def validation_error_handler(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    task_modules = request.app.state.settings.task_modules
    errors = [
        compact_error(_with_task_choices(error, task_modules))
        for error in exc.errors()[:MAX_ERRORS]
    ]
    return JSONResponse({"detail": errors}, status_code=status.HTTP_422_UNPROCESSABLE_CONTENT)


def _with_task_choices(error: dict[str, Any], task_modules: list[str]) -> dict[str, Any]:
    """A malformed ``trainer.task`` also gets the names this service's tasks may have, which
    only the service knows (the spec's own message says what a name looks like)."""
    if tuple(error.get("loc", ())) != _TASK_LOC or error.get("type") != "string_pattern_mismatch":
        return error
    message = f"{error.get('input')!r} is not a task name: {task_choices(task_modules)}"
    return {**error, "msg": message, "ctx": None}


def compact_error(error: dict[str, Any]) -> dict[str, Any]:
    """One validation error with its location, message, and only a short input and context."""
    out: dict[str, Any] = {
        "type": str(error.get("type", "value_error")),
        "loc": [_short_loc(part) for part in error.get("loc", ())],
        "msg": _cut(str(error.get("msg", "")), MAX_MESSAGE),
    }
    if "input" in error:
        out["input"] = summarize(error["input"])
    ctx = jsonable_encoder(error.get("ctx"), custom_encoder=_ENCODERS)
    if ctx and len(json.dumps(ctx, default=str)) <= MAX_ECHO:
        out["ctx"] = ctx
    return _as_text(out)


_ENCODERS = {Exception: str, bytes: lambda raw: raw.decode("utf-8", "backslashreplace")}
"""What an echoed input or context may hold that JSON does not: raw bytes (a body that is not
UTF-8) are shown with their undecodable bytes escaped."""


def _as_text(value: Any) -> Any:
    """The (short) error with every string UTF-8 can encode: a lone surrogate echoed from the
    input is written ``\\udc00``, as the answer must be UTF-8 JSON."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {_as_text(k): _as_text(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_as_text(v) for v in value]
    return value


def summarize(value: Any) -> Any:
    """``value`` itself when short as JSON, else a short description of it."""
    encoded = jsonable_encoder(value, custom_encoder=_ENCODERS)
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


class ErrorMessage(BaseModel):
    """Every error but a 422: one line saying what went wrong."""

    detail: str


_DESCRIPTIONS = {
    400: "The body is not UTF-8 JSON",
    401: "No token, or a token that is unknown or revoked",
    403: "The token's role or ownership does not allow this, or a cross-site request",
    404: "No such study, trial, fold or model",
    409: "The study is still running, or its score is being computed",
    413: "The body is larger than the service accepts (FOLDWISE_MAX_BODY_BYTES)",
    415: "The body is not sent as application/json, or in a content coding (gzip)",
    503: "A store the service needs did not answer (the artifact store, for a task's code)",
}


def invalid_field(loc: tuple[str | int, ...], message: str, value: Any) -> RequestValidationError:
    """A 422 naming the field of the body at ``loc``, as a body's own validation error does."""
    return RequestValidationError(
        [{"type": "value_error", "loc": ("body", *loc), "msg": message, "input": value}]
    )


def documented(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for these error codes, each with the ``ErrorMessage`` model."""
    return {code: {"model": ErrorMessage, "description": _DESCRIPTIONS[code]} for code in codes}


async def method_not_allowed_handler(request: Request, exc: Exception) -> Response:
    """Starlette's 405 names only the methods of the first route that matches the path;
    ``Allow`` here lists those of every route that does."""
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code != status.HTTP_405_METHOD_NOT_ALLOWED:
        return await http_exception_handler(request, exc)
    headers = {**(exc.headers or {}), "Allow": ", ".join(allowed_methods(request))}
    return JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=headers)


_METHODS = ("DELETE", "GET", "PATCH", "POST", "PUT")


def allowed_methods(request: Request) -> list[str]:
    """The methods some route answers at this request's path, HEAD wherever GET is
    (``service.api.http_rules``), asking each route as the router does: included routers
    are not plain routes, so a walk over ``APIRoute``s found none."""
    allowed: set[str] = set()
    root_path = request.scope.get("app_root_path", request.scope.get("root_path", ""))
    for method in _METHODS:  # a mount's scope has its own root path: route from the app's
        scope = {**request.scope, "method": method, "root_path": root_path}
        for route in request.app.router.routes:
            match, _child = route.matches(scope)
            if match == Match.FULL:
                static = isinstance(route, Mount) and isinstance(route.app, StaticFiles)
                allowed |= {"GET"} if static else {method}
                break
    if "GET" in allowed:
        allowed.add("HEAD")
    return sorted(allowed)
