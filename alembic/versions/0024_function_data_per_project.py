"""function data keyed per project

A function's row was keyed by `id` alone, across every project: an insert or upsert whose id
another project already used did nothing (ON CONFLICT (id) DO NOTHING), so the write vanished
and the empty answer told whether that id existed in someone else's project. The key is now
(project_id, id): each project has the table to itself (tasks.functions.collections).

`made_by` names the call (its seed-derived key) whose insert made the row, so the same call
repeated after a crash finds its own rows while any other insert of an existing id is
PostgREST's duplicate key error (23505). Nullable, no default: adding it rewrites nothing.

Safe on existing data: ids unique across projects are unique within each. The new key's
index is built concurrently, then swapped in (models.online_ddl.replace_primary_key).
Downgrading fails while two projects hold the same id, as it must.

Revision ID: 0024
Revises: 0023
"""
from collections.abc import Sequence

from alembic import op

from models import online_ddl

revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Committed before the concurrent build (online_ddl's autocommit block): IF NOT EXISTS
    # lets a run stopped after it go again.
    op.execute("ALTER TABLE function_data ADD COLUMN IF NOT EXISTS made_by uuid")
    online_ddl.replace_primary_key("function_data", "(project_id, id)")


def downgrade() -> None:
    online_ddl.replace_primary_key("function_data", "(id)")
    op.execute("ALTER TABLE function_data DROP COLUMN made_by")
