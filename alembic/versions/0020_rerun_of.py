"""rerun of

A job rerun from one of its steps (POST /api/jobs/<jid>/rerun) is a new job that names the
job it reruns; deleting the original keeps the rerun.

Revision ID: 0020
Revises: 0019
"""
from collections.abc import Sequence

from alembic import op

from models.online_ddl import validate_constraint

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # No default and nullable: adding the column rewrites nothing (PostgreSQL 11+). Added
    # with the column, the foreign key would be checked over every row while the ALTER holds
    # ACCESS EXCLUSIVE (every writer waits): NOT VALID at first, checked afterwards under a
    # lock writers pass. Safe to run again if stopped before the check (the two statements
    # before it are committed by then).
    op.execute("ALTER TABLE agent_jobs ADD COLUMN IF NOT EXISTS rerun_of uuid")
    op.execute("ALTER TABLE agent_jobs DROP CONSTRAINT IF EXISTS agent_jobs_rerun_of_fkey, "
               "ADD CONSTRAINT agent_jobs_rerun_of_fkey FOREIGN KEY (rerun_of) "
               "REFERENCES agent_jobs (id) ON DELETE SET NULL NOT VALID")
    validate_constraint("agent_jobs", "agent_jobs_rerun_of_fkey")


def downgrade() -> None:
    op.execute("ALTER TABLE agent_jobs DROP COLUMN rerun_of")
