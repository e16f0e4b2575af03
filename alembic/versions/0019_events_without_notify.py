"""events without notify

The event hub reads the events' id sequence instead of waiting for a NOTIFY per
event-writing statement (app.streams.hub): a NOTIFY makes every such commit queue on
PostgreSQL's one notification lock, the hot path's worst contention under load.

Revision ID: 0019
Revises: 0018
"""
from collections.abc import Sequence

from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS agent_job_events_notify ON agent_job_events")
    op.execute("DROP FUNCTION IF EXISTS switchyard_notify_events()")


def downgrade() -> None:
    op.execute("""
        CREATE FUNCTION switchyard_notify_events() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_notify('switchyard_events', '');
            RETURN NULL;
        END $$
    """)
    op.execute("CREATE TRIGGER agent_job_events_notify AFTER INSERT ON agent_job_events "
               "FOR EACH STATEMENT EXECUTE FUNCTION switchyard_notify_events()")
