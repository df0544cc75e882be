"""The input rules of paths and queries: ids, numbers and offsets in plain decimal digits
within what SQL stores, a sort key the schema names, RFC 3339 times, and each query parameter
given once. Each break is a 422 that names the parameter, never a driver error or a 500."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any

from annotated_types import Ge, Le
from fastapi import Path, Query, Request
from fastapi.dependencies.models import Dependant
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from pydantic import AfterValidator, BeforeValidator

MAX_ID = 2**63 - 1
"""The largest id or offset a request may name: SQL's BIGINT, what ids are stored as."""
MAX_NUMBER = 2**31 - 1
"""The largest trial number a request may name: SQL's INTEGER (numbers stay below the budget)."""


_DECIMAL = re.compile(r"0|-?[1-9][0-9]*")


def _decimal_text(value: object) -> object:
    if isinstance(value, str) and not _DECIMAL.fullmatch(value):
        raise ValueError("not an integer in decimal digits (no +, spaces, _, . or leading 0)")
    return value


def decimal_int(ge: int, le: int) -> Any:
    """An integer in ``[ge, le]`` written in a path or query as plain decimal digits: pydantic's
    lax mode also reads ``1_0``, ``+5``, `` 5``, ``05`` and ``1.0``, which gave one study many
    URLs (and the read cache an entry for each). The bounds come before the check so that the
    OpenAPI document keeps them as ``minimum`` and ``maximum``."""
    return Annotated[int, Ge(ge), Le(le), BeforeValidator(_decimal_text)]


StudyId = Annotated[decimal_int(1, MAX_ID), Path(description="The study's id")]
TrialNumber = Annotated[
    decimal_int(0, MAX_NUMBER), Path(description="The trial's number in its study")
]
Offset = Annotated[decimal_int(0, MAX_ID), Query(description="Rows to skip")]
Limit = Annotated[decimal_int(1, 1000), Query(description="Rows to return at most")]
TrialSortQuery = Annotated[
    str,
    Query(
        max_length=200,
        pattern=r"^(best|-?(number|value|duration|params\.[A-Za-z_][A-Za-z0-9_]*))$",
        description="number, value, duration or params.<name>; a leading - sorts descending; "
        "best is the best value first",
    ),
]


def check_query_once(request: Request) -> None:
    """A query parameter of the route given twice is a 422 at it: each takes a single value,
    and reading only the last (``?status=failed&status=pending``) answered a question the
    client may not have asked (a proxy that appends a parameter, say)."""
    params = request.query_params
    if len(params) == len(params.multi_items()):
        return
    route = request.scope.get("route")
    declared = _query_names(route.dependant) if isinstance(route, APIRoute) else set()
    for name in dict.fromkeys(params.keys()):
        given = params.getlist(name)
        if len(given) > 1 and name in declared:
            message = f"the query parameter {name!r} is given {len(given)} times"
            error = {"type": "query_repeated", "loc": ("query", name), "msg": message}
            raise RequestValidationError([{**error, "input": given[:5]}])


def _query_names(dependant: Dependant) -> set[str]:
    names = {field.alias for field in dependant.query_params}
    for sub in dependant.dependencies:
        names |= _query_names(sub)
    return names


def _as_utc(value: datetime) -> datetime:
    """A naive datetime is read as UTC; an aware one is converted to UTC, or to the first or
    last moment there is when its offset takes it past the calendar's ends."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except OverflowError:
        edge = datetime.min if value.year == datetime.min.year else datetime.max
        return edge.replace(tzinfo=UTC)


RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})")


def _rfc3339(value: object) -> object:
    """Only an RFC 3339 date-time with its offset, as the schema's ``date-time`` says (pydantic
    alone also reads ``0.5`` as a Unix time and a bare date as midnight)."""
    if isinstance(value, str) and not RFC3339.fullmatch(value):
        raise ValueError("use an RFC 3339 date-time with an offset, e.g. 2026-11-23T10:00:00Z")
    return value


UtcDatetime = Annotated[datetime, BeforeValidator(_rfc3339), AfterValidator(_as_utc)]
