"""function data size

Each document's size in bytes of JSON, kept by PostgreSQL beside it, so an owner's quota of
function data (tasks.services.quotas) sums a column instead of serialising every document
at every write, and measures what was written, not what TOAST compressed it to.

Revision ID: 0016
Revises: 0015
"""
from collections.abc import Sequence

from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("ALTER TABLE function_data ADD COLUMN size integer NOT NULL "
               "GENERATED ALWAYS AS (octet_length(doc::text)) STORED")


def downgrade() -> None:
    op.execute("ALTER TABLE function_data DROP COLUMN size")
