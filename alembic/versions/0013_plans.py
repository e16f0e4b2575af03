"""plans

The planner's tables, laid out as the Conductor lays them: a plan (name, goal, status, its
current version), its tasks per version (description, role, status, job, output) and their
dependencies; plan_versions says where each version came from (generated, edited, revised).

Revision ID: 0013
Revises: 0012
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

PLAN_STATUSES = "('generating', 'awaiting_approval', 'running', 'completed', 'failed', " \
    "'rejected', 'canceled')"
TASK_STATUSES = "('pending', 'ready', 'in_progress', 'completed', 'failed', 'blocked')"
ORIGINS = "('generated', 'edited', 'revised')"


def _now() -> sa.Column:
    return sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"),
                     nullable=False)


def _updated() -> sa.Column:
    return sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"),
                     nullable=False)


def upgrade() -> None:
    op.create_table(
        "plans",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("project_id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("goal", sa.Text(), nullable=False),
        sa.Column("repo_url", sa.Text(), nullable=True),
        sa.Column("github_repo", sa.Text(), nullable=True),
        sa.Column("status", sa.Text(), server_default=sa.text("'generating'"), nullable=False),
        sa.Column("version", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("auto_approve", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        sa.Column("complete_on_merge", sa.Boolean(), server_default=sa.text("false"),
                  nullable=False),
        sa.Column("job_id", sa.Uuid(), nullable=True),
        sa.Column("approval_id", sa.Uuid(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        _now(), _updated(),
        sa.CheckConstraint(f"status IN {PLAN_STATUSES}", name="ck_plans_status"),
        sa.CheckConstraint("version >= 0", name="ck_plans_version"),
        sa.ForeignKeyConstraint(["project_id"], ["projects.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_plans_project_created", "plans", ["project_id", "created_at"])
    op.create_table(
        "plan_versions",
        sa.Column("plan_id", sa.Uuid(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("origin", sa.Text(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        _now(),
        sa.CheckConstraint(f"origin IN {ORIGINS}", name="ck_plan_versions_origin"),
        sa.ForeignKeyConstraint(["plan_id"], ["plans.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("plan_id", "version"),
    )
    op.create_table(
        "plan_tasks",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("plan_id", sa.Uuid(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("task_key", sa.Text(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("assigned_to", sa.Text(), nullable=False),
        sa.Column("status", sa.Text(), server_default=sa.text("'pending'"), nullable=False),
        sa.Column("job_id", sa.Uuid(), nullable=True),
        sa.Column("output", postgresql.JSONB(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        _now(), _updated(),
        sa.CheckConstraint(f"status IN {TASK_STATUSES}", name="ck_plan_tasks_status"),
        sa.ForeignKeyConstraint(["plan_id", "version"],
                                ["plan_versions.plan_id", "plan_versions.version"],
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("plan_id", "version", "task_key", name="uq_plan_tasks_key"),
    )
    op.create_table(
        "plan_task_deps",
        sa.Column("plan_id", sa.Uuid(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("task_key", sa.Text(), nullable=False),
        sa.Column("depends_on_key", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["plan_id", "version", "task_key"],
                                ["plan_tasks.plan_id", "plan_tasks.version",
                                 "plan_tasks.task_key"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["plan_id", "version", "depends_on_key"],
                                ["plan_tasks.plan_id", "plan_tasks.version",
                                 "plan_tasks.task_key"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("plan_id", "version", "task_key", "depends_on_key"),
    )


def downgrade() -> None:
    op.drop_table("plan_task_deps")
    op.drop_table("plan_tasks")
    op.drop_table("plan_versions")
    op.drop_index("ix_plans_project_created", table_name="plans")
    op.drop_table("plans")
