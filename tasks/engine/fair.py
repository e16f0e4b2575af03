"""A fair share of the workers across owners: PostgreSQL decides what is published.

Celery's queues are first-in, first-out: 600 jobs one owner enqueued at once would stand
before a job another owner enqueues a moment later. So an owner has at most
SWITCHYARD_OWNER_MAX_ACTIVE jobs published or running at a time (0: no cap); the rest wait
in PostgreSQL, queued and unpublished (`dispatched_at` NULL), and are published as the
owner's jobs end (`refill`, after each move) or by the dispatch sweep (every owner with
room, a few of each in turn), highest priority then oldest first. Another owner's job
then waits behind at most that many of the first owner's, however long its backlog.
Jobs of the system's own project (no owner) are never held back.
"""

from __future__ import annotations

import uuid

from tasks.engine import pg
from tasks.engine.dispatch import dispatch_quietly
from tasks.engine.sql import moved_columns
from tasks.settings import get_settings

# A job that holds one of its owner's places: running, or queued with its wake-up published.
HOLDS_PLACE = "(h.status = 'running' OR (h.status = 'queued' AND h.dispatched_at IS NOT NULL))"
HELD = f"""
SELECT hp.owner_id, count(*) AS n FROM agent_jobs h JOIN projects hp ON hp.id = h.project_id
WHERE hp.owner_id IS NOT NULL AND {HOLDS_PLACE}
  <owner> GROUP BY hp.owner_id
"""


def held_by(owner: str) -> str:
    """SQL: how many places the owner `owner` (a uuid expression) holds now."""
    return (f"(SELECT count(*) FROM agent_jobs h JOIN projects hp ON hp.id = h.project_id "
            f"WHERE hp.owner_id = {owner} AND {HOLDS_PLACE})")


def publish_now(project: str, cap: str = "%(cap)s") -> str:
    """SQL: a new due job of `project` (a uuid expression) is published at once when its
    owner has room (or none is capped, or the project is the system's)."""
    owner = f"(SELECT owner_id FROM projects WHERE id = {project})"
    return f"({cap}::int = 0 OR {owner} IS NULL OR {held_by(owner)} < {cap}::int)"


# Owners' unpublished due jobs, each owner's ranked, taken while the owner has room: the
# n-th of an owner goes only if it holds fewer than cap - n + 1 places. `<owner>` narrows
# it to one owner (a job of theirs just ended).
# (Each step is materialized: a fresh backlog has no statistics yet, and the planner would
# otherwise re-run the counts once per candidate: 24 s for 600 jobs where this takes ms.)
REFILL = f"""
WITH held AS MATERIALIZED ({HELD}),
ranked AS MATERIALIZED (
    SELECT j.id, p.owner_id,
        row_number() OVER (PARTITION BY p.owner_id ORDER BY j.priority DESC, j.created_at) AS rn
    FROM agent_jobs j JOIN projects p ON p.id = j.project_id
    WHERE j.status = 'queued' AND j.dispatched_at IS NULL AND j.run_after <= now() <owner>
), chosen AS MATERIALIZED (
    SELECT r.id FROM ranked r LEFT JOIN held h ON h.owner_id = r.owner_id
    WHERE r.owner_id IS NULL OR %(cap)s::int = 0 OR r.rn <= %(cap)s::int - COALESCE(h.n, 0)
), pick AS (
    SELECT j.id FROM agent_jobs j JOIN chosen c ON c.id = j.id
    WHERE j.status = 'queued' AND j.dispatched_at IS NULL
    ORDER BY j.priority DESC, j.run_after LIMIT %(batch)s FOR UPDATE OF j SKIP LOCKED
)
UPDATE agent_jobs j SET dispatched_at = now() FROM pick WHERE j.id = pick.id
RETURNING {moved_columns("j")}
"""
OWNER_OF = "AND {a}.owner_id = (SELECT owner_id FROM projects WHERE id = %(project)s)"
REFILL_ALL = REFILL.replace("<owner>", "")
REFILL_OWNER = REFILL.replace(
    "<owner>", OWNER_OF.format(a="hp"), 1).replace("<owner>", OWNER_OF.format(a="p"), 1)


def cap() -> int:
    return get_settings().owner_max_active


def refill(project_id: uuid.UUID | str) -> None:
    """Publish the next waiting jobs of the project's owner, as far as it has room."""
    if cap() == 0:
        return  # nothing is ever held back
    rows = pg.persisting(lambda: pg.fetch_dicts(
        REFILL_OWNER, {"project": project_id, "cap": cap(), "batch": max(cap(), 1)}),
        what="publishing an owner's next jobs")
    for row in rows:
        dispatch_quietly(row["id"], row["queue"], row["priority"])
