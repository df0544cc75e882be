"""One active token a name: a unique index on the names of tokens not revoked.

Creating a token checked that its name was free and then inserted it; two creates at the same
time both passed the check. Names that already hold several active tokens keep their newest one;
the older ones are revoked (as ``foldwise token create --replace`` would have done).

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-26
"""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
ACTIVE = sa.text("revoked_at IS NULL")


def upgrade() -> None:
    tokens = sa.table(
        "api_tokens",
        sa.column("id", BigId),
        sa.column("name", sa.String),
        sa.column("revoked_at", sa.DateTime(timezone=True)),
    )
    bind = op.get_bind()
    active = sa.select(tokens.c.id, tokens.c.name).where(tokens.c.revoked_at.is_(None))
    newest: dict[str, int] = {}
    older: list[int] = []
    for token_id, name in bind.execute(active.order_by(tokens.c.id.desc())):
        if name in newest:
            older.append(token_id)
        else:
            newest[name] = token_id
    if older:
        now = datetime.now(UTC)
        bind.execute(tokens.update().where(tokens.c.id.in_(older)).values(revoked_at=now))
    op.create_index(
        "ix_api_tokens_active_name",
        "api_tokens",
        ["name"],
        unique=True,
        sqlite_where=ACTIVE,
        postgresql_where=ACTIVE,
    )


def downgrade() -> None:
    op.drop_index("ix_api_tokens_active_name", table_name="api_tokens")
