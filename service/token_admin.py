"""Creating, listing and revoking API tokens: the operator's side (``foldwise token ...``).

A token is ``fw_`` and 256 random bits, shown once when created; the database keeps only its
SHA-256 hash. A token has a name (a study created with it records that name as its owner, so a
token replaced under the same name keeps its studies) and a role (``foldwise.schemas.Role``).
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from foldwise.schemas import Role
from foldwise.service.db import tokens as token_repo
from foldwise.service.db.engine import make_engine, make_session_factory

PREFIX = "fw_"
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}")
"""A token's name: letters, digits and _ . @ -, at most 64 characters."""


class TokenError(ValueError):
    """A token request that cannot be done; the message says why in one line."""


@dataclass(frozen=True)
class TokenInfo:
    name: str
    role: Role
    created_at: datetime
    revoked_at: datetime | None


def new_secret() -> str:
    return PREFIX + secrets.token_urlsafe(32)


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def create_token(database_url: str, name: str, role: Role, *, replace: bool = False) -> str:
    """A new token's secret (the only time it is seen); ``replace`` revokes the tokens of that
    name first, else a name in use is refused."""
    if not NAME.fullmatch(name):
        raise TokenError(
            f"token name {name!r}: use letters, digits and _ . @ - (at most 64 characters)"
        )
    secret = new_secret()
    for attempt in range(REPLACE_TRIES):
        try:
            with _session(database_url, write=True) as session:
                if replace:
                    token_repo.revoke_tokens(session, name)
                elif name in token_repo.active_names(session):
                    raise _name_in_use(name)
                token_repo.create_token(session, name, role, hash_secret(secret))
            return secret
        except IntegrityError as exc:  # another create of this name committed first
            if not replace or attempt == REPLACE_TRIES - 1:
                raise _name_in_use(name) from exc
    raise AssertionError("unreachable")


REPLACE_TRIES = 3
"""Tries of a ``replace`` that another create of the same name overtook (it revokes that one)."""


def _name_in_use(name: str) -> TokenError:
    return TokenError(f"a token named {name!r} exists: revoke it or use --replace")


def list_tokens(database_url: str, *, revoked: bool = False) -> list[TokenInfo]:
    with _session(database_url, write=False) as session:
        rows = token_repo.list_tokens(session, revoked=revoked)
        return [TokenInfo(r.name, r.role, r.created_at, r.revoked_at) for r in rows]


def revoke_token(database_url: str, name: str) -> int:
    """Revoke the active tokens called ``name``; a name with none is refused."""
    with _session(database_url, write=True) as session:
        revoked = token_repo.revoke_tokens(session, name)
    if not revoked:
        raise TokenError(f"no active token named {name!r}")
    return revoked


@contextmanager
def _session(database_url: str, *, write: bool) -> Iterator[Session]:
    """One session (a transaction when ``write``) on an engine disposed afterwards."""
    engine = make_engine(database_url)
    try:
        sessions = make_session_factory(engine)
        with sessions.begin() if write else sessions() as session:
            yield session
    finally:
        engine.dispose()
