"""The worker's hot path in SQL: claim, checkpoint, finish.

Each function is one statement (a CTE) and so one round trip and one commit:
the status change, the step row and their events land together or not at all.
A step's completion is written together with whatever the job does next (the
next step's start, a log line, the job's end), which halves the round trips
without widening what a crash can lose: nothing observable happens between a
step returning and the next write.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tasks import pg
from tasks.events import status_data
from tasks.status import IllegalTransition, JobStatus, can_transition, guard

S = JobStatus


@dataclass(frozen=True)
class RecordedStep:
    name: str
    status: str
    output: Any


@dataclass(frozen=True)
class ClaimedJob:
    id: uuid.UUID
    project_id: uuid.UUID
    job_type: str
    payload: dict[str, Any]
    attempt: int
    max_attempts: int
    timeout_seconds: int | None
    steps: tuple[RecordedStep, ...]
    # Asked to cancel before this attempt began (then reclaimed, or handed back at shutdown).
    cancel_requested: bool = False
    locked_at: datetime | None = None


@dataclass(frozen=True)
class Owner:
    """What proves this worker still owns this attempt of the job."""

    job_id: uuid.UUID
    worker: str
    attempt: int
    # The claim's time: unlike the attempt number (reset by a manual retry) it never
    # repeats, so a thread left over from an earlier run can never pass for this one.
    locked_at: datetime | None = None

    def params(self) -> dict[str, Any]:
        return {"id": self.job_id, "worker": self.worker, "attempt": self.attempt,
                "locked_at": self.locked_at}


@dataclass(frozen=True)
class PendingStep:
    """A step's outcome waiting to be written with the job's next write."""

    seq: int
    name: str
    status: str  # completed | failed
    output: str | None = None  # JSON text
    error: str | None = None
    # Set when the step's start was never written: when it really started.
    unwritten_start: datetime | None = None


_RUNNING_EVENT = status_data(S.RUNNING, S.QUEUED)

_CLAIM = f"""
WITH claimed AS (
    UPDATE agent_jobs SET status = 'running', attempts = attempts + 1, locked_by = %(worker)s,
        locked_at = now(), heartbeat_at = now(), started_at = COALESCE(started_at, now()),
        updated_at = now()
    WHERE id = %(id)s AND {guard(S.QUEUED, S.RUNNING)} AND run_after <= now()
      AND <concurrency>
    RETURNING id, project_id, job_type, payload, attempts, max_attempts, timeout_seconds,
        cancel_requested, locked_at
), ev AS (
    INSERT INTO agent_job_events (job_id, project_id, type, message, data)
    SELECT id, project_id, 'status', 'running', '{_RUNNING_EVENT}'::jsonb FROM claimed
)
SELECT c.id, c.project_id, c.job_type, c.payload, c.attempts, c.max_attempts, c.timeout_seconds,
    (SELECT COALESCE(jsonb_agg(jsonb_build_array(s.name, s.status, s.output) ORDER BY s.seq),
                     '[]'::jsonb)
     FROM job_steps s WHERE s.job_id = c.id), c.cancel_requested, c.locked_at
FROM claimed c
"""
CLAIM_UNKEYED = _CLAIM.replace("<concurrency>", "concurrency_key IS NULL")
# Taken under an advisory lock on the key, so the count cannot race.
CLAIM_KEYED = _CLAIM.replace(
    "<concurrency>",
    "concurrency_key = %(key)s AND (SELECT count(*) FROM agent_jobs r "
    "WHERE r.concurrency_key = %(key)s AND r.status = 'running') < concurrency_limit",
)


def _claimed(row: tuple[Any, ...]) -> ClaimedJob:
    steps = tuple(RecordedStep(n, st, out) for n, st, out in row[7])
    return ClaimedJob(row[0], row[1], row[2], row[3], row[4], row[5], row[6], steps, row[8],
                      row[9])


def claim(job_id: uuid.UUID | str, worker: str) -> ClaimedJob | None:
    """Compare-and-set queued -> running. None: a duplicate, stale or early delivery."""
    row = pg.fetch_one(CLAIM_UNKEYED, {"id": job_id, "worker": worker})
    if row is not None:
        return _claimed(row)
    probe = pg.fetch_one(
        "SELECT concurrency_key FROM agent_jobs WHERE id = %s AND status = 'queued' "
        "AND run_after <= now() AND concurrency_key IS NOT NULL",
        (job_id,),
    )
    if probe is None:
        return None
    with pg.transaction() as conn:
        conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (probe[0],))
        params = {"id": job_id, "worker": worker, "key": probe[0]}
        row = conn.execute(CLAIM_KEYED, params).fetchone()
    return _claimed(row) if row is not None else None


# A step's outcome: an update of the row its start wrote, or an upsert when its
# start was deferred (the first step after a claim, see tasks.start_watch).
DONE_STEP = """
    UPDATE job_steps SET status = %(done_status)s::text, output = %(done_output)s::jsonb,
        error = %(done_error)s::text, finished_at = now()
    WHERE job_id = (SELECT id FROM job) AND seq = %(done_seq)s::int
"""
DONE_DEFERRED_STEP = """
    INSERT INTO job_steps (job_id, seq, name, status, output, error, attempts, started_at,
        finished_at)
    SELECT id, %(done_seq)s::int, %(done_name)s::text, %(done_status)s::text,
        %(done_output)s::jsonb, %(done_error)s::text, 1,
        COALESCE(%(done_started)s::timestamptz, now()), now()
    FROM job WHERE %(done_seq)s::int IS NOT NULL
    ON CONFLICT (job_id, seq) DO UPDATE SET status = EXCLUDED.status, output = EXCLUDED.output,
        error = EXCLUDED.error, finished_at = now(),
        attempts = job_steps.attempts + %(done_bump)s::int,
        started_at = CASE WHEN %(done_bump)s::int = 1 THEN EXCLUDED.started_at
                          ELSE job_steps.started_at END
"""

# One statement for every write a running job makes between claim and finish:
# an optional pending step outcome, an optional new step start, optional extra
# events. It writes nothing unless the row still says we own this attempt, and
# it tells the caller whether a cancel was requested.
CHECKPOINT = """
WITH job AS (
    SELECT id, project_id, cancel_requested FROM agent_jobs
    WHERE id = %(id)s AND status = 'running' AND locked_by = %(worker)s AND attempts = %(attempt)s
      AND locked_at IS NOT DISTINCT FROM %(locked_at)s::timestamptz
), done AS (<DONE>), started AS (
    INSERT INTO job_steps (job_id, seq, name, status, attempts, started_at)
    SELECT id, %(seq)s::int, %(name)s::text, 'running', 1,
        COALESCE(%(started_at)s::timestamptz, now()) FROM job
    WHERE %(seq)s::int IS NOT NULL AND NOT cancel_requested
    ON CONFLICT (job_id, seq) DO UPDATE SET status = 'running', name = EXCLUDED.name,
        attempts = job_steps.attempts + 1, started_at = EXCLUDED.started_at, finished_at = NULL,
        output = NULL, error = NULL
), ev AS (
    INSERT INTO agent_job_events (job_id, project_id, type, message, data)
    SELECT job.id, job.project_id, e.type, e.message, e.data::jsonb
    FROM job CROSS JOIN jsonb_to_recordset(%(events)s::jsonb)
        AS e(ord int, type text, message text, data text, unless_canceled bool)
    WHERE NOT (e.unless_canceled AND job.cancel_requested)
    ORDER BY e.ord
)
SELECT cancel_requested FROM job
"""
CHECKPOINTS = (CHECKPOINT.replace("<DONE>", DONE_STEP),
               CHECKPOINT.replace("<DONE>", DONE_DEFERRED_STEP))


def event(ord_: int, type_: str, message: str, data: str, *, unless_canceled: bool = False) -> dict:
    return {"ord": ord_, "type": type_, "message": message, "data": data,
            "unless_canceled": unless_canceled}


def _deferred(pending: PendingStep | None) -> int:
    """Which statement variant: 1 when the pending step's start was never written."""
    return int(pending is not None and pending.unwritten_start is not None)


def _done_params(pending: PendingStep | None) -> dict[str, Any]:
    if pending is None:
        return {"done_seq": None, "done_name": None, "done_status": None, "done_output": None,
                "done_error": None, "done_started": None, "done_bump": 0}
    return {"done_seq": pending.seq, "done_name": pending.name, "done_status": pending.status,
            "done_output": pending.output, "done_error": pending.error,
            "done_started": pending.unwritten_start,
            "done_bump": 0 if pending.unwritten_start is None else 1}


def checkpoint(
    owner: Owner, pending: PendingStep | None, *, seq: int | None = None, name: str | None = None,
    events: list[dict] | None = None, started_at: datetime | None = None,
) -> bool | None:
    """Write; return cancel_requested, or None when this worker no longer owns the job."""
    params = owner.params() | _done_params(pending)
    params |= {"seq": seq, "name": name, "events": json.dumps(events or []),
               "started_at": started_at}
    row = pg.fetch_one(CHECKPOINTS[_deferred(pending)], params)
    return None if row is None else bool(row[0])


_FINISH = f"""
WITH job AS (
    UPDATE agent_jobs SET status = %(status)s::text, updated_at = now(),
        result = COALESCE(%(result)s::jsonb, result),
        last_error = COALESCE(%(error)s::text, last_error),
        completed_at = CASE WHEN %(terminal)s::bool THEN now() END,
        run_after = CASE WHEN %(delay)s::float8 IS NULL THEN run_after
                         ELSE now() + make_interval(secs => %(delay)s::float8) END,
        dispatched_at = CASE WHEN %(delay)s::float8 IS NULL THEN dispatched_at
                             ELSE now() + make_interval(secs => %(delay)s::float8) END,
        attempts = attempts - %(refund)s::int,
        wake_at = %(wake_at)s::timestamptz, wait_for = %(wait_for)s::uuid[],
        wait_reason = %(wait_reason)s::text
    WHERE id = %(id)s AND {guard(S.RUNNING, S.COMPLETED)} AND locked_by = %(worker)s
      AND attempts = %(attempt)s AND locked_at IS NOT DISTINCT FROM %(locked_at)s::timestamptz
    RETURNING id, project_id, parent_job_id, concurrency_key, queue, priority, cancel_requested
), done AS (<DONE>), ev AS (
    INSERT INTO agent_job_events (job_id, project_id, type, message, data)
    SELECT job.id, job.project_id, e.type, e.message, e.data::jsonb
    FROM job CROSS JOIN jsonb_to_recordset(%(events)s::jsonb)
        AS e(ord int, type text, message text, data text)
    ORDER BY e.ord
)
SELECT id, project_id, parent_job_id, concurrency_key, queue, priority, cancel_requested FROM job
"""
FINISHES = (_FINISH.replace("<DONE>", DONE_STEP), _FINISH.replace("<DONE>", DONE_DEFERRED_STEP))


@dataclass(frozen=True)
class Finished:
    id: uuid.UUID
    project_id: uuid.UUID
    parent_job_id: uuid.UUID | None
    concurrency_key: str | None
    queue: str
    priority: int
    # A cancel that landed after the last checkpoint: the runner must not park or retry.
    cancel_requested: bool = False


def finish(
    owner: Owner, new: JobStatus, pending: PendingStep | None, events: list[dict], *,
    result: str | None = None, error: str | None = None, delay: float | None = None,
    refund_attempt: bool = False, wake_at: datetime | None = None,
    wait_for: list[str] | None = None, wait_reason: str | None = None,
) -> Finished | None:
    """Move a running job on (completed, failed, canceled, queued, waiting). None: not ours."""
    if not can_transition(S.RUNNING, new):
        raise IllegalTransition(f"running -> {new}")
    params = owner.params() | _done_params(pending) | {
        "status": new.value, "result": result, "error": error,
        "terminal": new in (S.COMPLETED, S.FAILED, S.CANCELED), "delay": delay,
        "refund": 1 if refund_attempt else 0, "wake_at": wake_at, "wait_for": wait_for,
        "wait_reason": wait_reason,
        "events": json.dumps(events),
    }
    row = pg.fetch_one(FINISHES[_deferred(pending)], params)
    return Finished(*row) if row is not None else None


def peek_queue(job_id: uuid.UUID | str) -> tuple[str, int] | None:
    """(queue, priority) of a job that is still queued."""
    row = pg.fetch_one("SELECT queue, priority FROM agent_jobs WHERE id = %s AND status = 'queued'",
                       (job_id,))
    return (row[0], row[1]) if row else None
