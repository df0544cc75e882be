"""Signing in to the dashboard: a token pasted once becomes an HttpOnly cookie.

The token cookie is HttpOnly and SameSite=Strict: page scripts cannot read it and other sites'
requests do not carry it. A second cookie, readable by the dashboard's scripts, holds a random
CSRF token they send back in ``X-CSRF-Token`` with every request that changes something
(``service.api.auth``). Pages of a browser that is not signed in redirect here.
"""

from __future__ import annotations

import secrets
from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Depends, HTTPException, Request, Response, status
from pydantic import BaseModel, Field

from foldwise.service.api.auth import (
    CSRF_COOKIE,
    TOKEN_COOKIE,
    Principal,
    anonymous_admin,
    check_same_origin_only,
    check_token,
)
from foldwise.service.api.deps import DbDep
from foldwise.service.hardening.strict_json import StrictJSONRoute

SESSION_SECONDS = 7 * 24 * 3600
SIGN_IN = "/dashboard/sign-in"

router = APIRouter(prefix="/dashboard", include_in_schema=False, route_class=StrictJSONRoute)


class SignIn(BaseModel):
    token: str = Field(..., min_length=1, max_length=200)


async def signed_in(request: Request, db: DbDep) -> Principal:
    """The principal of a page's browser (its cookie, or a bearer token for a script); one not
    signed in is sent to the sign-in page."""
    if not request.app.state.settings.auth:
        return anonymous_admin(request)
    scheme, _, bearer = request.headers.get("authorization", "").partition(" ")
    secret = bearer if scheme.lower() == "bearer" and bearer else request.cookies.get(TOKEN_COOKIE)
    principal = None if not secret else await check_token(request, db, secret)
    if principal is None:
        target = f"{SIGN_IN}?next={quote(request.url.path)}"
        raise HTTPException(status.HTTP_303_SEE_OTHER, headers={"Location": target})
    return principal


SignedInDep = Annotated[Principal, Depends(signed_in)]


@router.post("/session", status_code=status.HTTP_204_NO_CONTENT)
async def sign_in(body: SignIn, request: Request, db: DbDep) -> Response:
    """Check the token and keep it in the browser's cookies; only from the service's pages."""
    check_same_origin_only(request)
    principal = await check_token(request, db, body.token)
    if principal is None:
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "the token is not valid")
    response = Response(status_code=status.HTTP_204_NO_CONTENT)
    secure = request.url.scheme == "https"
    for name, value, http_only in (
        (TOKEN_COOKIE, body.token, True),
        (CSRF_COOKIE, secrets.token_urlsafe(24), False),
    ):
        response.set_cookie(
            name,
            value,
            max_age=SESSION_SECONDS,
            httponly=http_only,
            samesite="strict",
            secure=secure,
        )
    return response


@router.delete("/session", status_code=status.HTTP_204_NO_CONTENT)
async def sign_out(request: Request) -> Response:
    """Clear the cookies; only from the service's pages (a page of another site signed its
    visitors out). No CSRF token is asked: a session whose cookies expired can still end."""
    check_same_origin_only(request)
    response = Response(status_code=status.HTTP_204_NO_CONTENT)
    for name in (TOKEN_COOKIE, CSRF_COOKIE):
        response.delete_cookie(name, samesite="strict")
    return response
