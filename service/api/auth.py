"""Who is asking: a bearer token (SDK, CLI, scripts) or the dashboard's cookie, and what they
may do. Every route but /health, the API docs and static files depends on ``get_principal``.

A cookie comes with every request a browser makes to the service, including those a hostile
page makes it send, so a request authenticated by cookie that changes anything must also carry
the CSRF token the dashboard read from its own cookie (``X-CSRF-Token``) and come from the
service's own origin. A bearer token is never sent by a browser on its own.
"""

from __future__ import annotations

import hmac
import time
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, HTTPException, Request, status
from fastapi.security import APIKeyCookie, HTTPAuthorizationCredentials, HTTPBearer

from foldwise.schemas import Role
from foldwise.service.api.deps import DbDep
from foldwise.service.config import ip_address, is_loopback
from foldwise.service.db import tokens as token_repo
from foldwise.service.token_admin import hash_secret

TOKEN_COOKIE = "foldwise_token"
CSRF_COOKIE = "foldwise_csrf"
CSRF_HEADER = "X-CSRF-Token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
TOKEN_CACHE_SECONDS = 5.0
"""How long a checked token is trusted without asking the database: a revoked token stops
working within this long."""

bearer_scheme = HTTPBearer(auto_error=False, description="A token from `foldwise token create`")
cookie_scheme = APIKeyCookie(
    name=TOKEN_COOKIE, auto_error=False, description="Set by the dashboard's sign-in page"
)


@dataclass(frozen=True)
class Principal:
    """The token's name (studies it creates are owned by that name) and role."""

    name: str
    role: Role

    def may_change(self, owner: str | None) -> bool:
        """Whether this principal may stop or delete a study owned by ``owner``."""
        return self.role is Role.ADMIN or (self.role is Role.MEMBER and owner == self.name)


ANONYMOUS_ADMIN = Principal("local", Role.ADMIN)
"""Who everyone is when auth is off (allowed on loopback only)."""


def anonymous_admin(request: Request) -> Principal:
    """``ANONYMOUS_ADMIN`` for a request from this machine, when auth is off; a 403 for one from
    elsewhere. Settings refuse auth off on a host that is not loopback, but an app served
    some other way (``uvicorn --factory foldwise.service.app:create_app --host 0.0.0.0``)
    listens where its server says: the connection tells. Its client and the address it
    reached must be loopback (a server that trusts ``X-Forwarded-For`` from anywhere rewrites
    the client, never the address reached), and a request a proxy relayed is refused, as it
    may come from anywhere."""
    problem = _not_from_this_machine(request)
    if problem is not None:
        raise HTTPException(
            status.HTTP_403_FORBIDDEN,
            f"auth is off (FOLDWISE_AUTH=false), so only this machine is answered: {problem}",
        )
    return ANONYMOUS_ADMIN


_RELAYED = ("forwarded", "x-forwarded-for", "x-real-ip")
"""Headers a proxy adds to a request it relays."""


def _not_from_this_machine(request: Request) -> str | None:
    client, server = request.client, request.scope.get("server")
    if client is None or not is_loopback(client.host):
        return f"not {'an unknown address' if client is None else client.host}"
    if server and ip_address(str(server[0])) is not None and not is_loopback(str(server[0])):
        return f"the request reached {server[0]}"
    relayed = [name for name in _RELAYED if name in request.headers]
    if relayed:
        return f"a request a proxy relayed ({relayed[0]}) may come from anywhere"
    return None


class TokenCache:
    """Checked tokens by hash, each for ``TOKEN_CACHE_SECONDS``: a poller's every request does
    not cost a database query."""

    def __init__(self) -> None:
        self._known: dict[str, tuple[Principal | None, float]] = {}

    def get(self, digest: str) -> tuple[bool, Principal | None]:
        entry = self._known.get(digest)
        if entry is None or entry[1] < time.monotonic():
            return False, None
        return True, entry[0]

    def put(self, digest: str, principal: Principal | None) -> None:
        if len(self._known) > 10_000:  # a flood of made-up tokens must not grow it for ever
            self._known.clear()
        self._known[digest] = (principal, time.monotonic() + TOKEN_CACHE_SECONDS)


async def check_token(request: Request, db: DbDep, secret: str) -> Principal | None:
    """The principal of an active token, or None."""
    digest = hash_secret(secret)
    cache: TokenCache = request.app.state.token_cache
    known, principal = cache.get(digest)
    if not known:

        def lookup(session) -> Principal | None:  # noqa: ANN001 - a Session
            row = token_repo.active_token(session, digest)
            return None if row is None else Principal(row.name, row.role)

        principal = await db.read(lookup)
        cache.put(digest, principal)
    return principal


async def get_principal(
    request: Request,
    db: DbDep,
    bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer_scheme)],
    cookie: Annotated[str | None, Depends(cookie_scheme)],
) -> Principal:
    """401 without a valid token; 403 for a cookie-authenticated write from another origin or
    without the CSRF token."""
    known = request.scope.get(PRINCIPAL_SCOPE_KEY)
    if isinstance(known, Principal):  # found before the body was read (``authenticate_first``)
        return known
    if not request.app.state.settings.auth:
        return anonymous_admin(request)
    secret = bearer.credentials if bearer is not None else cookie
    if not secret:
        raise _unauthorized(
            "this needs a token: send Authorization: Bearer <token> (foldwise token create)"
        )
    principal = await check_token(request, db, secret)
    if principal is None:
        raise _unauthorized("the token is not valid: unknown or revoked")
    if bearer is None and request.method not in SAFE_METHODS:
        check_same_origin(request)
    return principal


PRINCIPAL_SCOPE_KEY = "foldwise.principal"


async def authenticate_first(request: Request) -> None:
    """Find the request's principal before its body is read: FastAPI reads and parses a body
    before a route's dependencies run, so a request without a valid token got the 422 of its
    body (and made the service parse it) instead of a 401. ``get_principal`` then answers
    with the principal found here."""
    bearer, cookie = await bearer_scheme(request), await cookie_scheme(request)
    principal = await get_principal(request, request.app.state.db, bearer, cookie)
    request.scope[PRINCIPAL_SCOPE_KEY] = principal


def check_same_origin_only(request: Request) -> None:
    """A 403 unless the browser says the request comes from the service's own pages."""
    origin = request.headers.get("origin")
    expected = f"{request.url.scheme}://{request.headers.get('host', '')}"
    if origin != expected:
        raise HTTPException(
            status.HTTP_403_FORBIDDEN, f"refused a cross-site request (Origin {origin!r})"
        )


def check_same_origin(request: Request) -> None:
    """A browser request that changes something: same origin and the CSRF token, or a 403."""
    check_same_origin_only(request)
    sent = request.headers.get(CSRF_HEADER, "")
    kept = request.cookies.get(CSRF_COOKIE, "")
    # As bytes: compare_digest refuses str with non-ASCII characters, which headers may hold.
    if not kept or not hmac.compare_digest(sent.encode(), kept.encode()):
        raise HTTPException(status.HTTP_403_FORBIDDEN, f"the {CSRF_HEADER} header is missing")


def _unauthorized(detail: str) -> HTTPException:
    return HTTPException(
        status.HTTP_401_UNAUTHORIZED, detail, headers={"WWW-Authenticate": "Bearer"}
    )


PrincipalDep = Annotated[Principal, Depends(get_principal)]


async def get_member(principal: PrincipalDep) -> Principal:
    """A principal that may create studies (a member or an admin), else a 403."""
    if principal.role is Role.VIEWER:
        raise HTTPException(
            status.HTTP_403_FORBIDDEN, f"token {principal.name!r} is a viewer: it only reads"
        )
    return principal


MemberDep = Annotated[Principal, Depends(get_member)]


def forbid_unless_may_change(principal: Principal, study_id: int, owner: str | None) -> None:
    if not principal.may_change(owner):
        whose = f"it belongs to {owner!r}" if owner else "it has no owner"
        raise HTTPException(
            status.HTTP_403_FORBIDDEN,
            f"token {principal.name!r} ({principal.role}) may not change study {study_id}: "
            f"{whose}",
        )
