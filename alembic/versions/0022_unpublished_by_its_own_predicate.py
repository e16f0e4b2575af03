"""unpublished by its own predicate

ix_agent_jobs_unpublished (an owner's held-back jobs in the order they go out) says
"queued" as `(status || '')`, the form tasks.engine.fair.unpublished reads: a predicate
from which `status = 'queued'` does not follow, so an owner's pick can use this index and
no other. With the bare form, a plan made on statistics that saw no queued job (the hot
path's statements keep their first generic plan) chose ix_agent_jobs_ready, whose rows are
every owner's due jobs, and walked them at each finish.

The index is rebuilt concurrently under another name and swapped in (models.online_ddl):
agent_jobs takes every enqueue and checkpoint, and a plain rebuild would hold them all for
as long as the build reads the table.

Revision ID: 0022
Revises: 0021
"""
from collections.abc import Sequence

from models import online_ddl

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COLUMNS = "(project_id, priority DESC, created_at)"


def _recreate(status: str) -> None:
    online_ddl.replace_index("ix_agent_jobs_unpublished", "agent_jobs", COLUMNS,
                             f"{status} = 'queued' AND dispatched_at IS NULL")


def upgrade() -> None:
    _recreate("(status || '')")


def downgrade() -> None:
    _recreate("status")
