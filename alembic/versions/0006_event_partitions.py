"""the event log partitioned by day, so retention drops whole days; finished jobs indexed

agent_job_events becomes a table partitioned by RANGE (created_at), one
partition a day named agent_job_events_YYYYMMDD (UTC days), made ahead by
switchyard_event_partitions(first, last) — the one home of the naming rule,
called by the migration, the workers at start and the maintenance task. The id
stays the stream cursor: a sequence shared by every partition (an identity
column cannot live on a partitioned table before PostgreSQL 17). Existing
events are copied over, in id order (about a minute per few million rows).

Revision ID: 0006
Revises: 0005
"""
from collections.abc import Sequence

from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

AHEAD_DAYS = 14  # tasks.engine.retention.AHEAD_DAYS: keep the two in step

# A day is made as a table of its own, then attached: ATTACH takes only a SHARE UPDATE
# EXCLUSIVE lock on the log (CREATE … PARTITION OF would take ACCESS EXCLUSIVE, and wait
# behind, and hold up, every engine write); the CHECK spares it the validation scan.
ENSURE = """
CREATE FUNCTION switchyard_event_partitions(first_day date, last_day date)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    day date;
    name text;
    low timestamptz;
    high timestamptz;
    made integer := 0;
BEGIN
    -- One maker at a time: two workers starting together must not race on a name.
    PERFORM pg_advisory_xact_lock(hashtext('switchyard_event_partitions'));
    FOR day IN SELECT d::date FROM generate_series(first_day, last_day, interval '1 day') d
    LOOP
        name := 'agent_job_events_' || to_char(day, 'YYYYMMDD');
        IF to_regclass(name) IS NULL THEN
            low := day::timestamp AT TIME ZONE 'UTC';
            high := (day + 1)::timestamp AT TIME ZONE 'UTC';
            EXECUTE format('CREATE TABLE %I (LIKE agent_job_events INCLUDING DEFAULTS, '
                           'CONSTRAINT %I CHECK (created_at >= %L AND created_at < %L))',
                           name, name || '_day', low, high);
            EXECUTE format('ALTER TABLE agent_job_events ATTACH PARTITION %I '
                           'FOR VALUES FROM (%L) TO (%L)', name, low, high);
            made := made + 1;
        END IF;
    END LOOP;
    RETURN made;
END $$
"""

NOTIFY = """
CREATE TRIGGER agent_job_events_notify AFTER INSERT ON agent_job_events
FOR EACH STATEMENT EXECUTE FUNCTION switchyard_notify_events()
"""

COLUMNS = "id, job_id, project_id, type, message, data, created_at"


def upgrade() -> None:
    op.execute("""
        CREATE TABLE agent_job_events_partitioned (
            id bigint NOT NULL,
            job_id uuid,
            project_id uuid NOT NULL,
            type text NOT NULL,
            message text DEFAULT '' NOT NULL,
            data jsonb DEFAULT '{}'::jsonb NOT NULL,
            created_at timestamptz DEFAULT now() NOT NULL,
            CONSTRAINT agent_job_events_partitioned_pkey PRIMARY KEY (id, created_at)
        ) PARTITION BY RANGE (created_at)
    """)
    op.execute("ALTER TABLE agent_job_events RENAME TO agent_job_events_unpartitioned")
    op.execute("ALTER TABLE agent_job_events_partitioned RENAME TO agent_job_events")
    op.execute("ALTER TABLE agent_job_events RENAME CONSTRAINT agent_job_events_partitioned_pkey "
               "TO agent_job_events_pkey_p")
    op.execute(ENSURE)
    op.execute(f"""
        SELECT switchyard_event_partitions(
            LEAST((SELECT min(created_at) FROM agent_job_events_unpartitioned), now())::date,
            (now() + interval '{AHEAD_DAYS} days')::date)
    """)
    op.execute(f"INSERT INTO agent_job_events ({COLUMNS}) "
               f"SELECT {COLUMNS} FROM agent_job_events_unpartitioned ORDER BY id")
    op.execute("CREATE SEQUENCE agent_job_events_id_seq_p OWNED BY agent_job_events.id")
    op.execute("SELECT setval('agent_job_events_id_seq_p', "
               "GREATEST((SELECT max(id) FROM agent_job_events_unpartitioned), 0) + 1, false)")
    op.execute("DROP TABLE agent_job_events_unpartitioned")  # its identity sequence with it
    op.execute("ALTER SEQUENCE agent_job_events_id_seq_p RENAME TO agent_job_events_id_seq")
    op.execute("ALTER TABLE agent_job_events ALTER COLUMN id "
               "SET DEFAULT nextval('agent_job_events_id_seq')")
    op.execute("ALTER TABLE agent_job_events RENAME CONSTRAINT agent_job_events_pkey_p "
               "TO agent_job_events_pkey")
    op.execute("CREATE INDEX ix_agent_job_events_project_id ON agent_job_events (project_id, id)")
    op.execute("CREATE INDEX ix_agent_job_events_job_id ON agent_job_events (job_id, id)")
    op.execute(NOTIFY)
    op.execute("CREATE INDEX ix_agent_jobs_finished ON agent_jobs (completed_at) "
               "WHERE status IN ('canceled', 'completed', 'failed')")


def downgrade() -> None:
    op.execute("DROP INDEX ix_agent_jobs_finished")
    op.execute("""
        CREATE TABLE agent_job_events_plain (
            id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            job_id uuid,
            project_id uuid NOT NULL,
            type text NOT NULL,
            message text DEFAULT '' NOT NULL,
            data jsonb DEFAULT '{}'::jsonb NOT NULL,
            created_at timestamptz DEFAULT now() NOT NULL
        )
    """)
    op.execute(f"INSERT INTO agent_job_events_plain ({COLUMNS}) OVERRIDING SYSTEM VALUE "
               f"SELECT {COLUMNS} FROM agent_job_events ORDER BY id")
    op.execute("SELECT setval(pg_get_serial_sequence('agent_job_events_plain', 'id'), "
               "GREATEST((SELECT max(id) FROM agent_job_events_plain), 0) + 1, false)")
    op.execute("DROP TABLE agent_job_events")  # its partitions and sequence with it
    op.execute("DROP FUNCTION switchyard_event_partitions(date, date)")
    op.execute("ALTER TABLE agent_job_events_plain RENAME TO agent_job_events")
    op.execute("ALTER TABLE agent_job_events RENAME CONSTRAINT agent_job_events_plain_pkey "
               "TO agent_job_events_pkey")
    op.execute("CREATE INDEX ix_agent_job_events_project_id ON agent_job_events (project_id, id)")
    op.execute("CREATE INDEX ix_agent_job_events_job_id ON agent_job_events (job_id, id)")
    op.execute(NOTIFY)
