"""ended web sessions

A browser session's id is recorded at sign-out, so a copy of its cookie no longer
authenticates (app.http.web_sessions); rows go once every such cookie has expired.

Revision ID: 0007
Revises: 0006
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "ended_web_sessions",
        sa.Column("session_id", sa.Text(), nullable=False),
        sa.Column("forget_after", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("session_id"),
    )
    op.create_index("ix_ended_web_sessions_forget_after", "ended_web_sessions",
                    ["forget_after"])


def downgrade() -> None:
    op.drop_index("ix_ended_web_sessions_forget_after", table_name="ended_web_sessions")
    op.drop_table("ended_web_sessions")
