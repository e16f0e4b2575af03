"""Operations on jobs from outside their worker: cancel, retry, resume a suspended parent."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from tasks import pg
from tasks.dispatch import dispatch_quietly
from tasks.status import TERMINAL, JobStatus, guard, sql_list

S = JobStatus

# Queued and waiting jobs in the tree are canceled at once; running ones are
# asked to stop at their next step boundary. The updates test `old.status`, the
# row as locked (its latest version), not `j.status`, the statement's snapshot:
# a running job that moved to waiting or queued while we waited for its lock
# would otherwise match neither update, and the cancel would be lost.
CANCEL_TREE = f"""
WITH RECURSIVE tree AS (
    SELECT id FROM agent_jobs WHERE id = %(id)s
    UNION
    SELECT c.id FROM agent_jobs c JOIN tree t ON c.parent_job_id = t.id
), old AS (
    SELECT id, status FROM agent_jobs WHERE id IN (SELECT id FROM tree) ORDER BY id FOR UPDATE
), canceled AS (
    UPDATE agent_jobs j SET status = 'canceled', cancel_requested = true, completed_at = now(),
        updated_at = now(), wake_at = NULL
    FROM old WHERE j.id = old.id AND old.{guard({S.QUEUED, S.WAITING}, S.CANCELED)}
    RETURNING j.id, j.project_id, j.parent_job_id, old.status AS was
), requested AS (
    UPDATE agent_jobs j SET cancel_requested = true, updated_at = now()
    FROM old WHERE j.id = old.id AND old.status = 'running'
), ev AS (
    INSERT INTO agent_job_events (job_id, project_id, type, message, data)
    SELECT id, project_id, 'status', 'canceled',
           jsonb_build_object('status', 'canceled', 'from', was) FROM canceled
)
SELECT id, parent_job_id FROM canceled
"""


def cancel_tree(job_id: uuid.UUID | str) -> list[uuid.UUID]:
    """Cancel a job and its descendants; returns the ids canceled at once."""
    rows = pg.fetch(CANCEL_TREE, {"id": job_id})
    for _, parent in rows:
        if parent is not None:
            resume_if_ready(parent)
    return [r[0] for r in rows]


RETRY = f"""
WITH job AS (
    UPDATE agent_jobs SET status = 'queued', attempts = 0, run_after = now(), completed_at = NULL,
        dispatched_at = now(), cancel_requested = false, updated_at = now()
    WHERE id = %(id)s AND {guard(S.FAILED, S.QUEUED)}
    RETURNING id, project_id, queue, priority
), ev AS (
    INSERT INTO agent_job_events (job_id, project_id, type, message, data)
    SELECT id, project_id, 'status', 'queued', '{{"status": "queued", "from": "failed"}}'::jsonb
    FROM job
)
SELECT id, queue, priority FROM job
"""


def retry_failed(job_id: uuid.UUID | str) -> bool:
    """failed -> queued with a fresh set of attempts; completed steps still replay."""
    row = pg.fetch_one(RETRY, {"id": job_id})
    if row is None:
        return False
    dispatch_quietly(row[0], row[1], row[2])
    return True


# A waiting job resumes when its timer is due and every child it waits for is terminal.
RESUME = f"""
WITH job AS (
    UPDATE agent_jobs p SET status = 'queued', run_after = now(), wake_at = NULL,
        wait_for = NULL, wait_reason = NULL, dispatched_at = now(), updated_at = now()
    WHERE p.id = ANY(%(ids)s::uuid[]) AND p.{guard(S.WAITING, S.QUEUED)}
      AND (p.wake_at IS NULL OR p.wake_at <= now())
      AND NOT EXISTS (SELECT 1 FROM agent_jobs c WHERE c.id = ANY(p.wait_for)
                      AND c.status NOT IN {sql_list(TERMINAL)})
    RETURNING p.id, p.project_id, p.queue, p.priority
), ev AS (
    INSERT INTO agent_job_events (job_id, project_id, type, message, data)
    SELECT id, project_id, 'status', 'queued', '{{"status": "queued", "from": "waiting"}}'::jsonb
    FROM job
)
SELECT id, queue, priority FROM job
"""


@dataclass(frozen=True)
class Resumed:
    id: uuid.UUID
    queue: str
    priority: int


def resume_if_ready(*job_ids: uuid.UUID | str) -> list[Resumed]:
    rows = pg.fetch(RESUME, {"ids": [str(j) for j in job_ids]})
    resumed = [Resumed(*r) for r in rows]
    for r in resumed:
        dispatch_quietly(r.id, r.queue, r.priority)
    return resumed


# Wake as many waiters as there are free slots, not just one: two slots freed
# before the first woken job is claimed would otherwise wake the same job twice
# and leave the second slot idle until the dispatch sweep. Waking a job that
# then finds no slot is harmless (its claim is a no-op).
NEXT_FOR_KEY = """
UPDATE agent_jobs SET dispatched_at = now()
WHERE id IN (
    SELECT id FROM agent_jobs WHERE concurrency_key = %(key)s AND status = 'queued'
        AND run_after <= now() ORDER BY priority DESC, created_at
        LIMIT GREATEST(1, (SELECT max(concurrency_limit) FROM agent_jobs
                           WHERE concurrency_key = %(key)s AND status = 'queued')
                          - (SELECT count(*) FROM agent_jobs
                             WHERE concurrency_key = %(key)s AND status = 'running'))
        FOR UPDATE SKIP LOCKED)
RETURNING id, queue, priority
"""


def wake_next_for_key(key: str) -> None:
    """Slots under a concurrency key came free: wake the next jobs waiting for them."""
    for row in pg.fetch(NEXT_FOR_KEY, {"key": key}):
        dispatch_quietly(*row)
