"""What moves jobs from outside their run (cancel, retry, resume, wake a key's waiters),
and `after_transition`, the one place that says what follows any move of a job.
"""

from __future__ import annotations

import logging
import uuid

from tasks.engine import fair, pg
from tasks.engine.dispatch import dispatch_quietly
from tasks.engine.sql import (
    MOVED_COLUMNS,
    due,
    keyed_status,
    lit,
    moved_columns,
    ready_to_resume,
    running_under_key,
    status_event,
)
from tasks.engine.status import TERMINAL, JobStatus, guard
from tasks.engine.store import Finished

log = logging.getLogger(__name__)
S = JobStatus


def after_transition(moved: Finished, *, cascade: bool = True) -> None:
    """Everything that follows a job's move, whoever moved it (run, sweep, shutdown, API).

    Called after the move committed. Each action is idempotent and the sweeps redo
    any that is lost (a crash right here), so a failure is logged, never raised.
    """
    try:
        _follow(moved, cascade)
    except Exception:
        log.warning("after_transition failed; the sweeps will catch up", exc_info=True,
                    extra={"action": "after_transition_failed", "job_id": str(moved.id)})


def _follow(m: Finished, cascade: bool) -> None:
    parked = m.status in (S.QUEUED, S.WAITING)
    if parked and m.cancel_requested:
        # A cancel landed during the run's last step, with no boundary left to see it:
        # queued or waiting, the job can be canceled at once.
        cancel_tree(m.id)
    elif m.status == S.QUEUED:
        dispatch_quietly(m.id, m.queue, m.priority, countdown=m.countdown)
    elif m.status == S.WAITING:
        resume_if_ready(m.id)  # children may have finished before the row said `waiting`
    if cascade and m.status in (S.FAILED, S.CANCELED):
        cancel_tree(m.id)  # nobody is left to use the children's results
    if m.status in TERMINAL and m.parent_job_id is not None:
        resume_if_ready(m.parent_job_id)
    if m.was == S.RUNNING and m.concurrency_key is not None:
        wake_next_for_key(m.concurrency_key)
    if m.status in fair.FREES_PLACE:
        # The owner has a place free: its next job goes out (chosen by the move's own
        # statement when a run finished, tasks.engine.store.finish).
        for job_id, queue, priority in m.refilled or ():
            dispatch_quietly(job_id, queue, priority)
        if m.refilled is None or m.more_room:
            fair.refill(m.project_id)


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
    RETURNING {moved_columns("j")}, old.status AS was
), requested AS (
    UPDATE agent_jobs j SET cancel_requested = true, updated_at = now()
    FROM old WHERE j.id = old.id AND old.status = 'running'
), ev AS ({status_event("canceled", lit("canceled"), "was")})
SELECT * FROM canceled
"""


def cancel_tree(job_id: uuid.UUID | str) -> list[uuid.UUID]:
    """Cancel a job and its descendants; returns the ids canceled at once."""
    rows = pg.fetch_dicts(CANCEL_TREE, {"id": job_id})
    for row in rows:
        # The whole tree was handled by this one statement: no cascade from each row.
        after_transition(Finished.of(row, was=S(row["was"])), cascade=False)
    return [r["id"] for r in rows]


RETRY = f"""
WITH job AS (
    UPDATE agent_jobs SET status = 'queued', attempts = 0, run_after = now(), completed_at = NULL,
        dispatched_at = now(), cancel_requested = false, free_retries = 0,
        free_retry_since = NULL, updated_at = now()
    WHERE id = %(id)s AND {guard(S.FAILED, S.QUEUED, keyed_status())}
    RETURNING {MOVED_COLUMNS}
), ev AS ({status_event("job", lit("queued"), lit("failed"))})
SELECT * FROM job
"""


def retry_failed(job_id: uuid.UUID | str) -> bool:
    """failed -> queued with a fresh set of attempts; completed steps still replay."""
    row = pg.fetch_one_dict(RETRY, {"id": job_id})
    if row is None:
        return False
    after_transition(Finished.of(row, was=S.FAILED))
    return True


# A waiting job resumes when its timer is due and every child it waits for is terminal.
RESUME = f"""
WITH job AS (
    UPDATE agent_jobs p SET status = 'queued', run_after = now(), wake_at = NULL,
        wait_for = NULL, wait_reason = NULL, wait_any = false, wait_approvals = NULL,
        dispatched_at = now(), updated_at = now()
    WHERE p.id = %(id)s AND {guard(S.WAITING, S.QUEUED, keyed_status("p"))}
      AND {ready_to_resume("p", keyed=True)}
    RETURNING {MOVED_COLUMNS}
), ev AS ({status_event("job", lit("queued"), lit("waiting"))})
SELECT * FROM job
"""


def resume_if_ready(*job_ids: uuid.UUID | str) -> list[uuid.UUID]:
    """Resume each job that is ready, one statement each: a statement on one id is planned
    to read that row (and its children) by key, whatever the table's statistics."""
    resumed = []
    for job_id in job_ids:
        row = pg.fetch_one_dict(RESUME, {"id": str(job_id)})
        if row is not None:
            after_transition(Finished.of(row, was=S.WAITING))
            resumed.append(row["id"])
    return resumed


# Wake as many waiters as there are free slots, not just one: two slots freed
# before the first woken job is claimed would otherwise wake the same job twice
# and leave the second slot idle until the dispatch sweep. Waking a job that
# then finds no slot is harmless (its claim is a no-op).
NEXT_FOR_KEY = f"""
UPDATE agent_jobs SET dispatched_at = now()
WHERE id IN (
    SELECT id FROM agent_jobs WHERE concurrency_key = %(key)s AND {due()}
        ORDER BY priority DESC, created_at
        LIMIT GREATEST(1, (SELECT max(concurrency_limit) FROM agent_jobs
                           WHERE concurrency_key = %(key)s AND status = 'queued')
                          - (SELECT count(*) FROM agent_jobs r
                             WHERE {running_under_key("%(key)s")}))
        FOR UPDATE SKIP LOCKED)
RETURNING id, queue, priority
"""


def wake_next_for_key(key: str) -> None:
    """Slots under a concurrency key came free: wake the next jobs waiting for them."""
    for row in pg.fetch_dicts(NEXT_FOR_KEY, {"key": key}):
        dispatch_quietly(row["id"], row["queue"], row["priority"])
