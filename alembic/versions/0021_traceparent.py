"""traceparent

The W3C trace context a job was enqueued in (tasks.engine.telemetry): its runs continue
that trace on any worker, after any retry or re-sent wake-up. Written only when tracing is on.

Revision ID: 0021
Revises: 0020
"""
from collections.abc import Sequence

from alembic import op

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("ALTER TABLE agent_jobs ADD COLUMN traceparent text")


def downgrade() -> None:
    op.execute("ALTER TABLE agent_jobs DROP COLUMN traceparent")
