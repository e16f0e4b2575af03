"""What the hot path costs PostgreSQL, asserted where a change could quietly bring it back
(bench/costs.py measures it; issue 26): checkpoints update the job row in place (HOT), and
an owner's refill reads a few index entries, not its whole backlog."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator

import psycopg

from tasks.engine import fair, pg

# Columns a running job's checkpoints and heartbeats write: no index may read them, or
# each such update writes a new entry into every index of the row (not HOT).
CHECKPOINT_COLUMNS = ("heartbeat_at", "write_seq", "updated_at")

# The indexes a job's own statements may read: its row and its steps by key, its owner's
# places and backlog project by project (tasks.engine.fair).
JOB_KEYS = {"agent_jobs_pkey", "uq_agent_jobs_project_key", "job_steps_pkey",
            "ix_agent_jobs_holding", "ix_agent_jobs_unpublished"}

INDEXED_COLUMNS = """
SELECT i.indexrelid::regclass::text AS index, pg_get_indexdef(i.indexrelid) AS def,
    COALESCE(pg_get_expr(i.indpred, i.indrelid), '') AS pred
FROM pg_index i WHERE i.indrelid = 'agent_jobs'::regclass
"""


def test_no_index_of_agent_jobs_reads_a_column_a_checkpoint_writes(db):
    for row in pg.fetch_dicts(INDEXED_COLUMNS):
        for column in CHECKPOINT_COLUMNS:
            assert column not in row["def"] and column not in row["pred"], row


def test_the_held_back_index_has_a_predicate_no_other_follows_from(db):
    # tasks.engine.fair.unpublished and migration 0022: the owner's pick proves this
    # predicate and not ix_agent_jobs_ready's `status = 'queued'` (alembic's comparison of
    # the models with the migrations does not read predicates).
    pred = pg.fetch_value("SELECT pg_get_expr(indpred, indrelid) FROM pg_index "
                          "WHERE indexrelid = 'ix_agent_jobs_unpublished'::regclass")
    assert pred == "(((status || ''::text) = 'queued'::text) AND (dispatched_at IS NULL))"
    assert fair.unpublished("j") == "(j.status || '') = 'queued' AND j.dispatched_at IS NULL"


def test_the_job_and_step_tables_leave_room_for_in_place_updates(db):
    options = {r["relname"]: r["reloptions"] or [] for r in pg.fetch_dicts(
        "SELECT relname, reloptions FROM pg_class WHERE relname IN ('agent_jobs', 'job_steps')")}
    assert "fillfactor=80" in options["agent_jobs"]
    assert "fillfactor=80" in options["job_steps"]


def _backlog(project: str, n: int, published: int, key: str = "k") -> None:
    pg.execute("INSERT INTO agent_jobs (id, project_id, job_type, idempotency_key, dispatched_at) "
               "SELECT gen_random_uuid(), %s, 'system.canary', %s || g, "
               "CASE WHEN g <= %s THEN now() END FROM generate_series(1, %s) g",
               (project, key, published, n))


def _statistics_of_ended_jobs(project: str) -> None:
    """200 ended jobs with their steps, measured: statistics that saw no job queued, waiting
    or running (a new database's first minutes, or a quiet one before a burst)."""
    _backlog(project, 200, 200)
    pg.execute("UPDATE agent_jobs SET status = 'completed', completed_at = now()")
    pg.execute("INSERT INTO job_steps (job_id, seq, name, status, output) "
               "SELECT id, s, 'step-' || s, 'completed', '{}' FROM agent_jobs, "
               "generate_series(1, 3) s")
    pg.execute("ANALYZE agent_jobs")
    pg.execute("ANALYZE job_steps")


def test_an_owners_refill_reads_a_few_index_pages_not_its_backlog(project):
    # Given an owner with 5,000 unpublished jobs and 15 of its 16 places taken
    _backlog(project, 5000, 15)
    pg.execute("ANALYZE agent_jobs")
    # When a place frees and its refill runs
    published, pages = _refill_with_room_for_one(project)
    # Then it publishes the one job that fits, reading tens of pages (a pass over the
    # backlog reads hundreds: 5,000 rows are ~150 heap pages and ~40 index pages; the pick
    # reads two or three index pages at each of the ten priority levels)
    assert published == 1
    assert pages < 80, pages


def _refill_with_room_for_one(project: str) -> tuple[int, int]:
    """The owner's refill (cap 16), explained as it runs: (jobs it published, pages it read)."""
    with pg.transaction() as conn:
        plan = conn.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + fair.REFILL_OWNER,
                            {"project": project, "cap": 16}).fetchone()[0]
    top = (plan if isinstance(plan, list) else json.loads(plan))[0]["Plan"]
    return top["Actual Rows"], top["Shared Hit Blocks"] + top["Shared Read Blocks"]


def test_an_owners_refill_does_not_walk_its_jobs_scheduled_for_later(project):
    # Given an owner with 5,000 jobs scheduled for tomorrow (held back, as every job
    # enqueued with a future run_after is), one due job enqueued after them, and 15 of its
    # 16 places taken
    _backlog(project, 15, 15)
    pg.execute("INSERT INTO agent_jobs (id, project_id, job_type, idempotency_key, run_after, "
               "priority) SELECT gen_random_uuid(), %s, 'system.canary', 'later' || g, "
               "now() + interval '1 day', 9 FROM generate_series(1, 5000) g", (project,))
    _backlog(project, 1, 0, key="due")
    pg.execute("ANALYZE agent_jobs")
    # When a place frees and its refill runs (a finish's pick is the same statement's)
    published, pages = _refill_with_room_for_one(project)
    # Then it publishes the due job, reading tens of pages: the scheduled ones, all of a
    # higher priority and older, are not read one by one until the due one is found
    # (bench/plans.py: 5.1 ms a finish with 30,000 of them, 0.5 with none)
    assert published == 1
    assert pages < 80, pages


def test_the_refill_publishes_the_highest_priority_then_the_longest_due(project):
    _backlog(project, 50, 0)
    pg.execute("UPDATE agent_jobs SET priority = 7 WHERE project_id = %s AND idempotency_key "
               "IN ('k40', 'k30')", (project,))
    # Within a level, the order is the due time, whatever the order of creation
    for key, minutes in (("k5", 3), ("k6", 2), ("k1", 1)):
        pg.execute("UPDATE agent_jobs SET run_after = now() - make_interval(mins => %s) "
                   "WHERE project_id = %s AND idempotency_key = %s", (minutes, project, key))
    published = pg.fetch_dicts(fair.REFILL_OWNER, {"project": project, "cap": 4})
    rows = pg.fetch_dicts("SELECT idempotency_key FROM agent_jobs WHERE id = ANY(%s) "
                          "ORDER BY idempotency_key", ([r["id"] for r in published],))
    assert [r["idempotency_key"] for r in rows] == ["k30", "k40", "k5", "k6"]


def test_a_pick_locks_no_job_of_a_level_it_does_not_reach(project):
    # Given an owner holding back one job at priority 9 and one at 5, none published
    _backlog(project, 2, 0)
    pg.execute("UPDATE agent_jobs SET priority = CASE idempotency_key WHEN 'k1' THEN 9 ELSE 5 "
               "END WHERE project_id = %s", (project,))
    # When one finish's pick (room for one) has taken the 9 and not yet committed
    with pg.transaction() as first:
        taken = first.execute(fair.REFILL_OWNER, {"project": project, "cap": 1}).fetchall()
        assert len(taken) == 1
        # Then another's, beside it, takes the 5: the first locked nothing of level 5
        with pg.connect() as beside:
            also = beside.execute(fair.REFILL_OWNER, {"project": project, "cap": 1}).fetchall()
    assert len(also) == 1 and also[0][0] != taken[0][0]


@contextlib.contextmanager
def generic_plans() -> Iterator[list[str]]:
    """The engine's connection planning each statement without its parameters' values, as a
    worker's long-lived connection does after a statement's first five runs (psycopg
    prepares each at its first use); the plans, as auto_explain reports them, in the list."""
    plans: list[str] = []

    def handler(diag: psycopg.errors.Diagnostic) -> None:
        plans.append(diag.message_primary or "")

    conn = pg.connection()
    try:
        conn.execute("LOAD 'auto_explain'")
        for setting in ("plan_cache_mode = force_generic_plan",
                        "auto_explain.log_min_duration = 0", "auto_explain.sample_rate = 1",
                        "auto_explain.log_level = notice", "client_min_messages = notice"):
            conn.execute(f"SET {setting}")
        conn.add_notice_handler(handler)
        yield plans
    finally:
        pg.reset()  # closed, with its settings and handler: the next test gets a fresh one


def _held_back(project: str, running: int, published: int, unpublished: int
               ) -> tuple[list, list]:
    """An owner's jobs: `running` claimed, `published` more queued and dispatched, and
    `unpublished` held back: (the claims, the held-back ids in the order they go)."""
    from tasks.engine import store
    from tests.integration.jobdb import new_job

    ids = [new_job(project, payload={"steps": 1}, publish=False)
           for _ in range(running + published)]
    pg.execute("UPDATE agent_jobs SET dispatched_at = now() WHERE id = ANY(%s)", (ids,))
    claims = [store.claim(i, "test-worker") for i in ids[:running]]
    assert all(claims)
    held = [new_job(project, payload={"steps": 1}, publish=False) for _ in range(unpublished)]
    pg.execute("UPDATE agent_jobs SET dispatched_at = NULL WHERE id = ANY(%s)", (held,))
    return claims, held


def test_a_finish_reads_the_owners_next_job_by_its_key_whatever_its_plan(project):
    # Issue 26: a worker's connection keeps the generic plan of its finish statement, made
    # on its first jobs while the table was small (PostgreSQL assumes 10 pages for a table
    # never vacuumed): `id = ANY(ARRAY(...))` of an array of unknown length was planned as a
    # pass over agent_jobs, repeated by every later finish on the grown table (0.3 of a
    # 0.5 ms finish with 1,700 jobs; bench/costs.py; 1.0 -> 0.55 ms a finish at 3,200).
    from tasks.engine import store
    from tasks.engine.status import JobStatus
    from tests.conftest import in_process_worker_paused

    with in_process_worker_paused():
        (claimed,), held = _held_back(project, 1, 15, 1)  # 16 places of 16 taken
        # agent_jobs as a new database has it (emptied by the db fixture's TRUNCATE, never
        # measured since): the planner assumes 10 pages, as on a worker's first jobs
        with generic_plans() as plans:
            done = store.finish(store.Owner(claimed.id, claimed.token), 1,
                                JobStatus.COMPLETED, None)
    assert done is not None and done.refilled is not None and not done.more_room
    assert [r[0] for r in done.refilled] == held
    (finish,) = [p for p in plans if "refill AS (" in p]
    assert "Seq Scan on agent_jobs" not in finish, finish
    assert not _index_walks(finish), finish


def _index_walks(plan: str) -> list[str]:
    """The scans of an index of agent_jobs in an auto_explain plan that have no Index Cond:
    passes over the whole index (every owner's rows), as bad as a Seq Scan on a big table."""
    nodes = re.split(r"\n\s*->\s*", plan)
    return [node.splitlines()[0] for node in nodes
            if re.search(r"(Index Scan|Index Only Scan) using \S+ on agent_jobs", node)
            and "Index Cond:" not in node]


def test_a_claim_finds_its_job_by_key_with_a_backlog_the_statistics_never_saw(project):
    # Issue 26: statistics taken when few jobs were queued make `status = 'queued'` look as
    # selective as the primary key; a claim planned on them (and kept: prepared statements)
    # went through an index on status (ix_agent_jobs_status_type in bench/costs.py: 0.19 of
    # a 0.33 ms claim at 3,000 queued; ix_agent_jobs_ready here: 0.5 ms, 643 buffers for 300)
    # and walked the whole backlog at every claim: quadratic in a burst.
    from tasks.engine import store
    from tests.conftest import in_process_worker_paused

    _statistics_of_ended_jobs(project)
    with in_process_worker_paused():
        _, backlog = _held_back(project, 0, 0, 300)
        pg.execute("UPDATE agent_jobs SET dispatched_at = now() WHERE id = ANY(%s)", (backlog,))
        with generic_plans() as plans:
            claims = [store.claim(job, "test-worker") for job in backlog[-3:]]
    assert all(claims)
    (claim, *_) = [p for p in plans if "WITH claimed AS" in p]
    assert "using agent_jobs_pkey on agent_jobs" in claim.split("CTE ev")[0], claim
    assert "Seq Scan on agent_jobs" not in claim, claim


def test_an_owners_places_are_counted_through_its_own_projects_only(project):
    # The fair share counts an owner's places at each enqueue and each finish. Planned on
    # a small table, the count read every place of every owner (ix_agent_jobs_holding
    # whole, then a join to the owner's projects): a cost that grew with the other owners.
    import uuid

    from tasks.engine import store
    from tests.conftest import in_process_worker_paused
    from tests.integration.jobdb import new_job

    other_owner, other = str(uuid.uuid4()), str(uuid.uuid4())
    pg.execute("INSERT INTO owners (id, name) VALUES (%s, 'other')", (other_owner,))
    pg.execute("INSERT INTO projects (id, owner_id, name) VALUES (%s, %s, 'other')",
               (other, other_owner))
    _backlog(other, 400, 400)  # another owner's 400 places, all published
    with in_process_worker_paused(), generic_plans() as plans:
        job = new_job(project, payload={"steps": 1}, publish=False)
        claimed = store.claim(job, "test-worker")
        assert claimed is not None
        store.finish(store.Owner(claimed.id, claimed.token), 1, store.S.COMPLETED, None)
    counts = [p for p in plans if "WITH ins AS" in p or "refill AS (" in p]
    assert len(counts) == 2, plans
    for plan in counts:
        # the places are read by project, through the holding index: 1 page, not 400 places
        places = plan.split("on agent_jobs h ", 1)[1].split("\n")
        assert "using ix_agent_jobs_holding" in plan, plan
        assert places[1].strip() == "Index Cond: (project_id = hp.id)", plan


def test_a_finish_with_room_for_more_than_one_job_leaves_the_rest_to_the_owners_refill(
        project, settings_env):
    # The finish publishes one job (it frees one place); an owner with more room (a raised
    # cap, a place freed by a move that published nothing) gets the rest from its refill.
    from tasks.engine import control, store
    from tasks.engine.status import JobStatus
    from tests.conftest import in_process_worker_paused

    settings_env(SWITCHYARD_OWNER_MAX_ACTIVE="16")
    with in_process_worker_paused():
        (claimed,), held = _held_back(project, 1, 13, 3)  # 14 places of 16 taken
        done = store.finish(store.Owner(claimed.id, claimed.token), 1, JobStatus.COMPLETED,
                            None)
        assert done is not None and done.refilled is not None and done.more_room
        assert [r[0] for r in done.refilled] == held[:1]
        control.after_transition(done)
    published = pg.fetch_dicts("SELECT id FROM agent_jobs WHERE id = ANY(%s) "
                               "AND dispatched_at IS NOT NULL", (held,))
    assert {r["id"] for r in published} == set(held)  # 13 + 3 = 16 places of 16


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


def test_a_finish_with_nothing_held_back_asks_for_no_refill(project, settings_env):
    # An owner under its cap has no backlog (its jobs went out as they came): the finish
    # published nothing, and no second statement goes looking.
    from tasks.engine import store
    from tasks.engine.status import JobStatus
    from tests.conftest import in_process_worker_paused

    settings_env(SWITCHYARD_OWNER_MAX_ACTIVE="16")
    with in_process_worker_paused():
        (claimed,), _ = _held_back(project, 1, 2, 0)  # 3 places of 16 taken
        done = store.finish(store.Owner(claimed.id, claimed.token), 1, JobStatus.COMPLETED,
                            None)
    assert done is not None and done.refilled == () and not done.more_room


def test_a_resume_finds_its_parent_and_children_by_key_whatever_its_plan(project):
    # Each child's finish asks its parent to resume (tasks.engine.control._follow), on the
    # worker's long-lived connection. Planned generically on statistics that saw no job
    # waiting, `id = ANY(%(ids)s)` and a bare `status = 'waiting'` went through the
    # waiting index or over the whole table: every child's finish walked every waiting
    # parent (a workflow fan-out is quadratic).
    from tasks.engine import control

    _statistics_of_ended_jobs(project)
    _backlog(project, 300, 300, key="w")
    pg.execute("UPDATE agent_jobs p SET status = 'waiting', wait_reason = 'children', "
               "wait_for = ARRAY(SELECT c.id FROM agent_jobs c WHERE c.status = 'completed' "
               "ORDER BY c.id LIMIT 2) WHERE p.status = 'queued'")
    parents = [r["id"] for r in pg.fetch_dicts(
        "SELECT id FROM agent_jobs WHERE status = 'waiting' ORDER BY id LIMIT 3")]
    with generic_plans() as plans:
        resumed = [control.resume_if_ready(p) for p in parents]
    assert resumed == [[p] for p in parents]
    (resume, *_) = [p for p in plans if "WITH job AS" in p and "wait_for = NULL" in p]
    assert "Seq Scan on agent_jobs" not in resume, resume
    assert "ix_agent_jobs_waiting" not in resume and "ix_agent_jobs_status" not in resume, resume
    assert "using agent_jobs_pkey on agent_jobs p" in resume, resume


def test_a_jobs_hot_path_planned_on_statistics_of_ended_jobs_reads_no_table_whole(project):
    # Every statement of a job's life on a worker's connection (enqueue, claim, the
    # checkpoints, the finish), planned without its parameters on tables the statistics
    # measured when they held only ended jobs: none may read agent_jobs or job_steps whole.
    # (On a table of a few pages a pass is what the planner should choose; the plan is made
    # again at the next ANALYZE, so only a plan that stays wrong on measured tables counts.)
    from tasks.engine import store
    from tasks.engine.enqueue import EnqueueRequest, enqueue
    from tasks.engine.status import JobStatus
    from tests.conftest import in_process_worker_paused

    _statistics_of_ended_jobs(project)
    _backlog(project, 300, 300, key="q")  # a backlog the statistics never saw
    with in_process_worker_paused(), generic_plans() as plans:
        for _ in range(3):
            job = enqueue(EnqueueRequest(project_id=project, job_type="system.canary",
                                         payload={"steps": 3}), publish=False)
            claimed = store.claim(job.job_id, "test-worker")
            assert claimed is not None
            owner, pending = store.Owner(claimed.id, claimed.token), None
            for seq in (1, 2, 3):
                assert store.checkpoint(owner, seq, pending, seq=seq, name=f"step-{seq}",
                                        events=[]) is False
                pending = store.PendingStep(seq, f"step-{seq}", "completed", output="{}")
            assert store.finish(owner, 4, JobStatus.COMPLETED, pending, result="{}")
    assert len(plans) >= 15, plans
    for plan in plans:
        assert "Seq Scan on agent_jobs" not in plan and "Seq Scan on job_steps" not in plan, plan
        # and reach them by key, or through an index of the owner's own rows: not one whose
        # rows are every owner's (ix_agent_jobs_ready: every due job; the status index)
        used = set(re.findall(r"Scan using (\S+) on (?:agent_jobs|job_steps)\b", plan))
        used |= {i for i in re.findall(r"Bitmap Index Scan on (\S+)", plan)
                 if i.startswith(("agent_jobs", "ix_agent_jobs", "job_steps"))}
        assert used <= JOB_KEYS, (used - JOB_KEYS, plan)
