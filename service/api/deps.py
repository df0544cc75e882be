"""Dependencies of the routes, as ``Annotated`` aliases, and the lookups routes share.

Routes are ``async def`` and do their database work through ``DbDep`` (a ``SessionRunner``): one
short session per unit of work on a bounded worker thread, never a session held across an
``await``. Ids and offsets are bounded to what a 64-bit SQL integer holds, so an out-of-range
number is a 422 naming it rather than a driver overflow.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any

from annotated_types import Ge, Le
from fastapi import Depends, HTTPException, Path, Query, Request, status
from fastapi.dependencies.models import Dependant
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from pydantic import AfterValidator, BeforeValidator
from sqlalchemy.orm import Session

from service.config import Settings
from service.db import studies as study_repo
from service.db import trials as trial_repo
from service.db.engine import SessionRunner
from service.db.models import StudyRow, TrialRow
from service.db.trials import PARAM_PREFIX, SORT_KEYS

if TYPE_CHECKING:
    from service.scheduler.scheduler import Scheduler

MAX_ID = 2**63 - 1
"""The largest id or offset a request may name: SQL's BIGINT, what ids are stored as."""
MAX_NUMBER = 2**31 - 1
"""The largest trial number a request may name: SQL's INTEGER (numbers stay below the budget)."""


async def get_db(request: Request) -> SessionRunner:
    return request.app.state.db


async def get_settings(request: Request) -> Settings:
    return request.app.state.settings


async def get_scheduler(request: Request) -> Scheduler | None:
    return request.app.state.scheduler


DbDep = Annotated[SessionRunner, Depends(get_db)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
SchedulerDep = Annotated["Scheduler | None", Depends(get_scheduler)]

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


def study_or_404(session: Session, study_id: int) -> StudyRow:
    """The study; a 404 too when its deletion was asked for (the scheduler carries it out)."""
    study = study_repo.get_study(session, study_id)
    if study is None or study.delete_requested:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"study {study_id} not found")
    return study


def trial_or_404(
    session: Session, study_id: int, number: int, *, with_folds: bool = True
) -> TrialRow:
    """The trial, by default with its fold runs and their epochs loaded."""
    trial = trial_repo.get_trial(session, study_id, number, with_folds=with_folds)
    if trial is None:
        raise HTTPException(
            status.HTTP_404_NOT_FOUND, f"trial {number} of study {study_id} not found"
        )
    return trial


def check_trial_sort(sort: str, space: Mapping[str, Any]) -> None:
    """A 422 naming `sort` unless it is a known key or one of the study's parameters."""
    key = sort.removeprefix("-")
    name = key.removeprefix(PARAM_PREFIX)
    if sort == "best" or key in SORT_KEYS or (name != key and name in space):
        return
    choices = ", ".join([*SORT_KEYS, *(PARAM_PREFIX + name for name in space)])
    raise RequestValidationError(
        [
            {
                "loc": ("query", "sort"),
                "msg": f"unknown sort: use best or one of {choices}, '-' for descending",
                "type": "value_error",
                "input": sort,
            }
        ]
    )


def trial_sort_options(study: StudyRow) -> dict[str, Any]:
    """How ``study``'s trials sort: ``maximize`` (for ``best``) and the ``numeric`` parameters
    (a categorical one sorts as text)."""
    space = study.spec.space
    return {
        "maximize": study.spec.objective.maximize,
        "numeric": frozenset(name for name, p in space.items() if p.type != "categorical"),
    }
