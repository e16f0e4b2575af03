"""hot rows and fair-share indexes

Two costs the hot path paid per job (bench/costs.py, issue 26):

- Every checkpoint bumped `heartbeat_at`, a column of an index, so every step's update
  of the job row was a non-HOT update writing a new entry into each of the row's eight
  indexes. The stale-run sweep finds running jobs through `ix_agent_jobs_status_type`
  (there are as many as the workers run), so the heartbeat index goes, and the row and
  its steps leave room on their pages (fillfactor) for the new versions to stay there.
- The fair share counted an owner's places and ranked its backlog by scanning every one
  of its jobs at each enqueue and each job's end: a 3,000-job burst of one owner cost
  PostgreSQL 6 ms of CPU per job. These two partial indexes make both a short index scan.

The indexes are built and dropped concurrently (models.online_ddl), after the fillfactor
change: agent_jobs takes every enqueue and checkpoint, and a plain build would hold them all
for as long as it reads the table.

Revision ID: 0018
Revises: 0017
"""
from collections.abc import Sequence

from alembic import op

from models import online_ddl

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

HOLDS_PLACE = "status = 'running' OR (status = 'queued' AND dispatched_at IS NOT NULL)"


def upgrade() -> None:
    # SHARE UPDATE EXCLUSIVE, as the concurrent builds: writers go on.
    op.execute("ALTER TABLE agent_jobs SET (fillfactor = 80)")
    op.execute("ALTER TABLE job_steps SET (fillfactor = 80)")
    online_ddl.create_index("ix_agent_jobs_unpublished", "agent_jobs",
                            "(project_id, priority DESC, created_at)",
                            "status = 'queued' AND dispatched_at IS NULL")
    online_ddl.create_index("ix_agent_jobs_holding", "agent_jobs", "(project_id)", HOLDS_PLACE)
    online_ddl.drop_index("ix_agent_jobs_running_heartbeat")


def downgrade() -> None:
    op.execute("ALTER TABLE job_steps RESET (fillfactor)")
    op.execute("ALTER TABLE agent_jobs RESET (fillfactor)")
    op.execute("DROP INDEX ix_agent_jobs_holding")
    op.execute("DROP INDEX ix_agent_jobs_unpublished")
    op.execute("CREATE INDEX ix_agent_jobs_running_heartbeat ON agent_jobs (heartbeat_at) "
               "WHERE status = 'running'")
