"""admin tokens

An admin token sees the whole fleet in the monitor and in diagnosis; every other
token sees its owner's jobs only. Existing tokens stay ordinary.

Revision ID: 0009
Revises: 0008
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("api_tokens", sa.Column("is_admin", sa.Boolean(),
                                          server_default=sa.text("false"), nullable=False))


def downgrade() -> None:
    op.drop_column("api_tokens", "is_admin")
