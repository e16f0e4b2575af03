"""llm usage by step

Which step of its job made each model call, so a job's page can show tokens and
cost per step as well as in total. Nullable: calls made outside a step (and
rows from before) count towards the job's total only.

Revision ID: 0008
Revises: 0007
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("llm_usage", sa.Column("step_seq", sa.Integer(), nullable=True))
    op.create_index("ix_llm_usage_job", "llm_usage", ["job_id"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_llm_usage_job", table_name="llm_usage")
    op.drop_column("llm_usage", "step_seq")
