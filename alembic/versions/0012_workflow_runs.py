"""workflow runs: wait for any child or approval, and each run's step states

A DAG driver parks until *one* of its children ends or one of its approval gates
is decided (agent_jobs.wait_any, wait_approvals); workflow_run_steps mirrors each
step's state so a run can be read while it is under way.

Revision ID: 0012
Revises: 0011
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("agent_jobs", sa.Column("wait_any", sa.Boolean(),
                                          server_default=sa.text("false"), nullable=False))
    op.add_column("agent_jobs", sa.Column("wait_approvals", postgresql.ARRAY(sa.Uuid()),
                                          nullable=True))
    op.create_table(
        "workflow_run_steps",
        sa.Column("run_job_id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("job_id", sa.Uuid(), nullable=True),
        sa.Column("approval_id", sa.Uuid(), nullable=True),
        sa.Column("output", postgresql.JSONB(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"),
                  nullable=False),
        sa.ForeignKeyConstraint(["run_job_id"], ["agent_jobs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("run_job_id", "name"),
    )


def downgrade() -> None:
    op.drop_table("workflow_run_steps")
    op.drop_column("agent_jobs", "wait_approvals")
    op.drop_column("agent_jobs", "wait_any")
