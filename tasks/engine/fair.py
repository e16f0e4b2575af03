"""A fair share of the workers across owners: PostgreSQL decides what is published.

Celery's queues are first-in, first-out: 600 jobs one owner enqueued at once would stand
before a job another owner enqueues a moment later. So an owner has at most
SWITCHYARD_OWNER_MAX_ACTIVE jobs published or running at a time (0: no cap); the rest wait
in PostgreSQL, queued and unpublished (`dispatched_at` NULL), and are published as the
owner's jobs end (`refill`, after each move) or by the dispatch sweep (every owner with
room, a few of each in turn), highest priority first, then the one due longest. Another
owner's job then waits behind at most that many of the first owner's, however long its backlog.
Jobs of the system's own project (no owner) are never held back.
"""

from __future__ import annotations

import uuid

from tasks.engine import pg
from tasks.engine.dispatch import dispatch_quietly
from tasks.engine.queues import MAX_PRIORITY
from tasks.engine.sql import keyed_status, moved_columns
from tasks.engine.status import TERMINAL, JobStatus
from tasks.settings import get_settings


def unpublished(alias: str) -> str:
    """Held back: queued with no wake-up published. The predicate of ix_agent_jobs_unpublished
    (migration 0022), status read through keyed_status so that no other index's predicate
    follows from it: planned on statistics that saw no job queued, an owner's pick went
    through ix_agent_jobs_ready (every owner's due jobs) instead, at each finish."""
    return f"{keyed_status(alias)} = 'queued' AND {alias}.dispatched_at IS NULL"


# A job that holds one of its owner's places: running, or queued with its wake-up published.
HOLDS_PLACE = "(h.status = 'running' OR (h.status = 'queued' AND h.dispatched_at IS NOT NULL))"
HELD = f"""
SELECT hp.owner_id, count(*) AS n FROM agent_jobs h JOIN projects hp ON hp.id = h.project_id
WHERE hp.owner_id IS NOT NULL AND {HOLDS_PLACE}
GROUP BY hp.owner_id
"""


def held_by(owner: str) -> str:
    """SQL: how many places the owner `owner` (a uuid expression) holds now.

    Project by project (the aggregate keeps the planner from flattening the subquery into
    a join): each count is an index scan of ix_agent_jobs_holding on its project_id. As a
    join, a plan made on a small table (the hot path's statements are prepared once per
    connection) read the places of every owner at each enqueue and finish."""
    return held_in("projects", f"WHERE hp.owner_id = {owner}")


def held_in(projects: str, where: str = "") -> str:
    """SQL: how many places the jobs of `projects` (a table or CTE of project ids, `where`
    choosing among them) hold now; held_by's count. A statement that already holds its
    owner's projects (a CTE `mine`) counts through it and says the owner once."""
    return (f"(SELECT COALESCE(sum(hn.n), 0)::bigint FROM {projects} hp CROSS JOIN LATERAL "
            f"(SELECT count(*) AS n FROM agent_jobs h WHERE h.project_id = hp.id "
            f"AND {HOLDS_PLACE}) hn {where})")


def free_places(owner: str, cap: str = "%(cap)s") -> str:
    """SQL: how many more jobs the owner `owner` (a uuid expression) may have published now;
    unbounded when nothing is capped or the project is the system's (no owner)."""
    return (f"(CASE WHEN {cap}::int = 0 OR {owner} IS NULL THEN 2147483647 "
            f"ELSE {cap}::int - {held_by(owner)} END)")


def publish_now(project: str, cap: str = "%(cap)s") -> str:
    """SQL: a new due job of `project` (a uuid expression) is published at once when its
    owner has room (or none is capped, or the project is the system's)."""
    return f"({free_places(f'(SELECT owner_id FROM projects WHERE id = {project})', cap)} > 0)"


# A move to one of these gives the job's place back (HOLDS_PLACE: running, or queued and
# published), so the owner's next job may go out.
FREES_PLACE: frozenset[JobStatus] = TERMINAL | {JobStatus.WAITING}


# The dispatch sweep's pass over every owner: owners' unpublished due jobs, each owner's
# ranked, taken while the owner has room: the n-th of an owner goes only if it holds fewer
# than cap - n + 1 places.
# (Each step is materialized: a fresh backlog has no statistics yet, and the planner would
# otherwise re-run the counts once per candidate: 24 s for 600 jobs where this takes ms.)
REFILL_ALL = f"""
WITH held AS MATERIALIZED ({HELD}),
ranked AS MATERIALIZED (
    SELECT j.id, p.owner_id,
        row_number() OVER (PARTITION BY p.owner_id ORDER BY j.priority DESC, j.run_after) AS rn
    FROM agent_jobs j JOIN projects p ON p.id = j.project_id
    WHERE {unpublished("j")} AND j.run_after <= now()
), chosen AS MATERIALIZED (
    SELECT r.id FROM ranked r LEFT JOIN held h ON h.owner_id = r.owner_id
    WHERE r.owner_id IS NULL OR %(cap)s::int = 0 OR r.rn <= %(cap)s::int - COALESCE(h.n, 0)
), pick AS (
    SELECT j.id FROM agent_jobs j JOIN chosen c ON c.id = j.id
    WHERE {unpublished("j")}
    ORDER BY j.priority DESC, j.run_after LIMIT %(batch)s FOR UPDATE OF j SKIP LOCKED
)
UPDATE agent_jobs j SET dispatched_at = now() FROM pick WHERE j.id = pick.id
RETURNING {moved_columns("j")}
"""

_OWNER = "(SELECT owner_id FROM projects WHERE id = %(project)s)"
# The projects of the owner of project %(project)s (a CTE `mine` for held_in and PICK).
MINE = f"SELECT p.id FROM projects p WHERE p.owner_id = {_OWNER}"

# An owner's next unpublished due jobs, as many as `room` (a CTE: n) allows, from its
# projects (`mine`: a CTE of ids), highest priority then longest due first; locked as read
# (a row another refill holds is skipped), and the same lock re-checks the row's latest
# version against the WHERE. The owner's refill and a run's finish (tasks.engine.store, which
# frees a place and fills it in one statement) use it.
#
# Level by level, highest first, each level one short range of ix_agent_jobs_unpublished
# (project, priority, run_after) per project that holds anything back: only due jobs are
# read. Walked in priority order by creation instead, each look passed every job of a higher
# level scheduled for later, row by row (bench/plans.py: 5.1 ms a finish with 30,000 of them
# scheduled for tomorrow, 0.5 ms with none).
#
# No ORDER BY outside the levels, on purpose: the levels come out of generate_series in
# order, each sorted within, and the LIMIT stops pulling once it has n, so the levels below
# are never read or locked (sorted as a whole, every level's first n would be locked, and a
# finish running beside this one would find them all taken). Within the level it reaches,
# each holding project's first n are locked before the level's sort keeps n of them: an owner
# with several projects can still have a finish beside this one find nothing, and its place
# waits for the dispatch sweep.
PICK = f"""
    WITH hm AS MATERIALIZED (  -- the projects holding something back: one probe each
        -- (lateral, not EXISTS: a semi-join planned on a table never measured walked the
        -- whole index, every owner's held-back jobs)
        SELECT m.id FROM mine m CROSS JOIN LATERAL (
            SELECT FROM agent_jobs h WHERE h.project_id = m.id AND {unpublished("h")} LIMIT 1
        ) h
    )
    SELECT l.id FROM generate_series({MAX_PRIORITY}, 0, -1) v(p) CROSS JOIN LATERAL (
        SELECT j.id FROM hm CROSS JOIN LATERAL (
            SELECT j.id, j.run_after FROM agent_jobs j
            WHERE j.project_id = hm.id AND j.priority = v.p AND {unpublished("j")}
              AND j.run_after <= now()
            ORDER BY j.run_after LIMIT (SELECT n FROM room) FOR UPDATE SKIP LOCKED
        ) j
        ORDER BY j.run_after LIMIT (SELECT n FROM room)
    ) l
    LIMIT (SELECT n FROM room)
"""

# One owner's refill, after each of its jobs ends: both reads are short index scans
# (migration 0018: ix_agent_jobs_holding for its places, ix_agent_jobs_unpublished for
# its backlog in order), never a pass over its whole backlog.
REFILL_OWNER = f"""
WITH mine AS MATERIALIZED ({MINE}), room AS MATERIALIZED (
    SELECT GREATEST(%(cap)s::int - {held_in("mine")}, 0) AS n
), pick AS ({PICK})
UPDATE agent_jobs j SET dispatched_at = now() WHERE j.id = ANY(ARRAY(SELECT id FROM pick))
RETURNING {moved_columns("j")}
"""


def cap() -> int:
    return get_settings().owner_max_active


def refill(project_id: uuid.UUID | str) -> None:
    """Publish the next waiting jobs of the project's owner, as far as it has room."""
    if cap() == 0:
        return  # nothing is ever held back
    rows = pg.persisting(lambda: pg.fetch_dicts(
        REFILL_OWNER, {"project": project_id, "cap": cap()}),
        what="publishing an owner's next jobs")
    for row in rows:
        dispatch_quietly(row["id"], row["queue"], row["priority"])
