"""rerun of

A job rerun from one of its steps (POST /api/jobs/<jid>/rerun) is a new job that names the
job it reruns; deleting the original keeps the rerun.

Revision ID: 0020
Revises: 0019
"""
from collections.abc import Sequence

from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # No default and nullable: adding the column rewrites nothing (PostgreSQL 11+).
    op.execute("ALTER TABLE agent_jobs ADD COLUMN rerun_of uuid "
               "REFERENCES agent_jobs (id) ON DELETE SET NULL")


def downgrade() -> None:
    op.execute("ALTER TABLE agent_jobs DROP COLUMN rerun_of")
