"""functions

Functions (issue 13): one row per immutable version of a project's named JavaScript function,
and function_data, the per-project document store functions reach as the table
"function_data". A trigger refuses any UPDATE of a function version: a version, once saved,
is what every run that names it executes.

Revision ID: 0014
Revises: 0013
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

IMMUTABLE = """
CREATE FUNCTION functions_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'function versions are immutable: save a new version instead';
END $$;
CREATE TRIGGER functions_immutable BEFORE UPDATE ON functions
    FOR EACH ROW EXECUTE FUNCTION functions_immutable();
"""


def upgrade() -> None:
    op.create_table(
        "functions",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("project_id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("code", sa.Text(), nullable=False),
        sa.Column("language", sa.Text(), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        # No foreign key: retention may delete the job; the version keeps saying who wrote it.
        sa.Column("created_by_job", sa.Uuid(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"),
                  nullable=False),
        sa.CheckConstraint("version >= 1", name="ck_functions_version"),
        sa.CheckConstraint("language IN ('javascript')", name="ck_functions_language"),
        sa.ForeignKeyConstraint(["project_id"], ["projects.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("project_id", "name", "version", name="uq_functions_version"),
    )
    op.execute(IMMUTABLE)
    op.create_table(
        "function_data",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("project_id", sa.Uuid(), nullable=False),
        sa.Column("collection", sa.Text(), nullable=False),
        sa.Column("doc", postgresql.JSONB(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"),
                  nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"),
                  nullable=False),
        sa.ForeignKeyConstraint(["project_id"], ["projects.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_function_data_project_collection", "function_data",
                    ["project_id", "collection", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_function_data_project_collection", table_name="function_data")
    op.drop_table("function_data")
    op.drop_table("functions")
    op.execute("DROP FUNCTION functions_immutable()")
