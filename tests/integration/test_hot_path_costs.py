"""What the hot path costs PostgreSQL, asserted where a change could quietly bring it back
(bench/costs.py measures it; issue 26): checkpoints update the job row in place (HOT), and
an owner's refill reads a few index entries, not its whole backlog."""

from __future__ import annotations

import json

from tasks.engine import fair, pg

# Columns a running job's checkpoints and heartbeats write: no index may read them, or
# each such update writes a new entry into every index of the row (not HOT).
CHECKPOINT_COLUMNS = ("heartbeat_at", "write_seq", "updated_at")

INDEXED_COLUMNS = """
SELECT i.indexrelid::regclass::text AS index, pg_get_indexdef(i.indexrelid) AS def,
    COALESCE(pg_get_expr(i.indpred, i.indrelid), '') AS pred
FROM pg_index i WHERE i.indrelid = 'agent_jobs'::regclass
"""


def test_no_index_of_agent_jobs_reads_a_column_a_checkpoint_writes(db):
    for row in pg.fetch_dicts(INDEXED_COLUMNS):
        for column in CHECKPOINT_COLUMNS:
            assert column not in row["def"] and column not in row["pred"], row


def test_the_job_and_step_tables_leave_room_for_in_place_updates(db):
    options = {r["relname"]: r["reloptions"] or [] for r in pg.fetch_dicts(
        "SELECT relname, reloptions FROM pg_class WHERE relname IN ('agent_jobs', 'job_steps')")}
    assert "fillfactor=80" in options["agent_jobs"]
    assert "fillfactor=80" in options["job_steps"]


def _backlog(project: str, n: int, published: int) -> None:
    pg.execute("INSERT INTO agent_jobs (id, project_id, job_type, idempotency_key, dispatched_at) "
               "SELECT gen_random_uuid(), %s, 'system.canary', 'k' || g, "
               "CASE WHEN g <= %s THEN now() END FROM generate_series(1, %s) g",
               (project, published, n))


def test_an_owners_refill_reads_a_few_index_pages_not_its_backlog(project):
    # Given an owner with 5,000 unpublished jobs and 15 of its 16 places taken
    _backlog(project, 5000, 15)
    pg.execute("ANALYZE agent_jobs")
    # When a place frees and its refill runs
    with pg.transaction() as conn:
        plan = conn.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + fair.REFILL_OWNER,
                            {"project": project, "cap": 16}).fetchone()[0]
    top = (plan if isinstance(plan, list) else json.loads(plan))[0]["Plan"]
    # Then it publishes the one job that fits, reading tens of pages (a pass over the
    # backlog reads hundreds: 5,000 rows are ~150 heap pages and ~40 index pages)
    assert top["Actual Rows"] == 1
    pages = top["Shared Hit Blocks"] + top["Shared Read Blocks"]
    assert pages < 60, pages


def test_the_refill_publishes_the_highest_priority_then_the_oldest(project):
    _backlog(project, 50, 0)
    pg.execute("UPDATE agent_jobs SET priority = 7 WHERE project_id = %s AND idempotency_key "
               "IN ('k40', 'k30')", (project,))
    published = pg.fetch_dicts(fair.REFILL_OWNER, {"project": project, "cap": 4})
    keys = {r["id"]: None for r in published}
    rows = pg.fetch_dicts("SELECT idempotency_key FROM agent_jobs WHERE id = ANY(%s) "
                          "ORDER BY idempotency_key", (list(keys),))
    assert [r["idempotency_key"] for r in rows] == ["k1", "k2", "k30", "k40"]


def test_writing_events_sends_no_notification(db):
    # A NOTIFY makes each event-writing commit queue on PostgreSQL's one notification
    # lock; the event hub reads the id sequence instead (app.streams.hub).
    triggers = pg.fetch_dicts("SELECT tgname FROM pg_trigger "
                              "WHERE tgrelid = 'agent_job_events'::regclass AND NOT tgisinternal")
    assert triggers == []
    functions = pg.fetch_dicts("SELECT proname FROM pg_proc WHERE prosrc ILIKE '%%pg_notify(%%'")
    assert functions == []


def test_a_finishing_run_publishes_its_owners_next_job_in_its_own_statement(project):
    from tasks.engine import store
    from tasks.engine.status import JobStatus
    from tests.conftest import in_process_worker_paused
    from tests.integration.jobdb import new_job

    with in_process_worker_paused():
        # Given an owner with its 16 places taken and one job held back
        ids = [new_job(project, payload={"steps": 1}, publish=False) for _ in range(17)]
        held = pg.fetch_dicts("SELECT id FROM agent_jobs WHERE id = ANY(%s) "
                              "AND dispatched_at IS NULL", (ids,))
        assert len(held) == 1
        # When one of the running ones finishes
        first = next(i for i in ids if i != held[0]["id"])
        claimed = store.claim(first, "test-worker")
        assert claimed is not None
        done = store.finish(store.Owner(claimed.id, claimed.token), 1, JobStatus.COMPLETED,
                            None)
    # Then the same statement published the held one, and says so to the caller
    assert done is not None and done.refilled is not None
    assert [r[0] for r in done.refilled] == [held[0]["id"]]
    assert pg.fetch_value("SELECT dispatched_at IS NOT NULL FROM agent_jobs WHERE id = %s",
                          (held[0]["id"],))
