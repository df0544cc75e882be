"""API tokens, study owners and deletion requests, and the scheduler's lease.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "api_tokens",
        sa.Column("id", BigId, nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column(
            "role",
            sa.Enum("admin", "member", "viewer", name="role", native_enum=False, length=16),
            nullable=False,
        ),
        sa.Column("secret_hash", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_tokens")),
        sa.UniqueConstraint("secret_hash", name=op.f("uq_api_tokens_secret_hash")),
        sqlite_autoincrement=True,
    )
    with op.batch_alter_table("api_tokens") as batch_op:
        batch_op.create_index(batch_op.f("ix_api_tokens_name"), ["name"], unique=False)
    op.create_table(
        "scheduler_leases",
        sa.Column("name", sa.String(length=32), nullable=False),
        sa.Column("holder", sa.String(length=128), nullable=False),
        sa.Column("epoch", sa.Integer(), nullable=False),
        sa.Column("expires_ms", sa.BigInteger(), nullable=False),
        sa.Column("acquired_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_scheduler_leases")),
    )
    # A plain ADD COLUMN: a batch rebuild on SQLite would drop the table's AUTOINCREMENT.
    op.add_column(
        "studies",
        sa.Column("delete_requested", sa.Boolean(), server_default=sa.false(), nullable=False),
    )
    op.add_column("studies", sa.Column("owner", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table(
        "studies", recreate="auto", table_kwargs={"sqlite_autoincrement": True}
    ) as batch_op:
        batch_op.drop_column("owner")
        batch_op.drop_column("delete_requested")
    op.drop_table("scheduler_leases")
    with op.batch_alter_table("api_tokens") as batch_op:
        batch_op.drop_index(batch_op.f("ix_api_tokens_name"))
    op.drop_table("api_tokens")
