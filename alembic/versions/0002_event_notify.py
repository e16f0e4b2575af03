"""notify listeners when events are written

One NOTIFY per statement that inserts events (not per row): each web
process's event hub wakes up and reads what is new past its cursor.

Revision ID: 0002
Revises: 0001
"""
from collections.abc import Sequence

from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("""
        CREATE FUNCTION switchyard_notify_events() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_notify('switchyard_events', '');
            RETURN NULL;
        END $$
    """)
    op.execute("""
        CREATE TRIGGER agent_job_events_notify AFTER INSERT ON agent_job_events
        FOR EACH STATEMENT EXECUTE FUNCTION switchyard_notify_events()
    """)


def downgrade() -> None:
    op.execute("DROP TRIGGER agent_job_events_notify ON agent_job_events")
    op.execute("DROP FUNCTION switchyard_notify_events()")
