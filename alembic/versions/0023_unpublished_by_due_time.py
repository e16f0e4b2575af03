"""unpublished by due time

ix_agent_jobs_unpublished keys an owner's held-back jobs by (project, priority, run_after)
instead of (project, priority, created_at): an owner's pick (tasks.engine.fair.PICK) reads,
level by level, only the jobs already due. Keyed by creation, the jobs scheduled for later
(held back like any other until due) stood in each level among the due ones, and every
finish of the owner read them row by row to find the next due job: 5.1 ms a finish with
30,000 scheduled for tomorrow, 0.5 ms with none (bench/plans.py). A job due at once has
run_after = created_at (both the enqueue's now()), so its place in the order is unchanged.

Rebuilt concurrently under another name and swapped in (models.online_ddl).

Revision ID: 0023
Revises: 0022
"""
from collections.abc import Sequence

from models import online_ddl

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

HELD_BACK = "(status || '') = 'queued' AND dispatched_at IS NULL"


def _recreate(last: str) -> None:
    online_ddl.replace_index("ix_agent_jobs_unpublished", "agent_jobs",
                             f"(project_id, priority DESC, {last})", HELD_BACK)


def upgrade() -> None:
    _recreate("run_after")


def downgrade() -> None:
    _recreate("created_at")
