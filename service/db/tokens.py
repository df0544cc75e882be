"""Queries on API tokens. Functions take the caller's session and never commit."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from foldwise.schemas import Role
from foldwise.service.db.models import TokenRow, utcnow


def create_token(session: Session, name: str, role: Role, secret_hash: str) -> TokenRow:
    token = TokenRow(name=name, role=role, secret_hash=secret_hash)
    session.add(token)
    session.flush()
    return token


def active_token(session: Session, secret_hash: str) -> TokenRow | None:
    """The unrevoked token whose secret hashes to ``secret_hash``."""
    query = select(TokenRow).where(
        TokenRow.secret_hash == secret_hash, TokenRow.revoked_at.is_(None)
    )
    return session.scalars(query).first()


def active_names(session: Session) -> set[str]:
    query = select(TokenRow.name).where(TokenRow.revoked_at.is_(None))
    return set(session.scalars(query))


def list_tokens(session: Session, *, revoked: bool = False) -> Sequence[TokenRow]:
    query = select(TokenRow).order_by(TokenRow.id)
    if not revoked:
        query = query.where(TokenRow.revoked_at.is_(None))
    return session.scalars(query).all()


def revoke_tokens(session: Session, name: str) -> int:
    """Revoke every active token called ``name``; returns how many there were."""
    result = session.execute(
        update(TokenRow)
        .where(TokenRow.name == name, TokenRow.revoked_at.is_(None))
        .values(revoked_at=utcnow())
    )
    return result.rowcount or 0
