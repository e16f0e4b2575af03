"""run fencing and bounded free retries

Each run of a job holds a claim token: every write of the run is fenced by it,
and `write_seq` makes a write retried after a lost connection apply once.
`free_retries` / `free_retry_since` bound the retries that cost no attempt.

Revision ID: 0004
Revises: 0003
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("agent_jobs", sa.Column("claim_token", sa.Uuid(), nullable=True))
    op.add_column("agent_jobs", sa.Column("write_seq", sa.Integer(),
                                          server_default=sa.text("0"), nullable=False))
    op.add_column("agent_jobs", sa.Column("free_retries", sa.Integer(),
                                          server_default=sa.text("0"), nullable=False))
    op.add_column("agent_jobs", sa.Column("free_retry_since", sa.DateTime(timezone=True),
                                          nullable=True))


def downgrade() -> None:
    for column in ("free_retry_since", "free_retries", "write_seq", "claim_token"):
        op.drop_column("agent_jobs", column)
