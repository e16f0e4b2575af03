"""function data doc index

A function's table of its own naming is a collection of documents (tasks.functions
.collections): `eq` on a field is containment, `doc @> {"field": value}`, which this index
answers without reading the collection.

Revision ID: 0017
Revises: 0016
"""
from collections.abc import Sequence

from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("CREATE INDEX ix_function_data_doc ON function_data "
               "USING gin (doc jsonb_path_ops)")


def downgrade() -> None:
    op.execute("DROP INDEX ix_function_data_doc")
