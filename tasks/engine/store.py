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
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import IntEnum
from typing import Any

from tasks.engine import fair, pg
from tasks.engine.events import step_data
from tasks.engine.sql import (
    MOVED_COLUMNS,
    compact,
    due,
    keyed_status,
    lit,
    moved_columns,
    owns_run,
    running_under_key,
    status_data,
    status_event,
)
from tasks.engine.status import (
    TERMINAL,
    IllegalTransition,
    JobStatus,
    can_transition,
    guard,
    sql_list,
)

S = JobStatus


@dataclass(frozen=True)
class RecordedStep:
    name: str
    status: str
    output: Any


@dataclass(frozen=True)
class DbClock:
    """The database's clock, read at the claim and carried forward by the monotonic clock.

    Every due time a run computes (a sleep's end) comes from here, never from the
    worker's wall clock, which may be seconds off the database's.
    """

    at_claim: datetime
    mono_at_claim: float = field(default_factory=time.monotonic)

    def now(self) -> datetime:
        return self.at_claim + timedelta(seconds=time.monotonic() - self.mono_at_claim)


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
    cancel_requested: bool
    token: uuid.UUID
    clock: DbClock
    # Retries so far that cost no attempt, and how long ago the first of them was.
    free_retries: int = 0
    free_retry_seconds: float = 0.0


@dataclass(frozen=True)
class Owner:
    """What proves a run still owns its job: the token its claim wrote on the row.

    A duplicate, stale or early delivery never gets this run's token, and a run
    handed back or reclaimed loses it, so no write of one run can land for another.
    """

    job_id: uuid.UUID
    token: uuid.UUID

    def params(self) -> dict[str, Any]:
        return {"id": self.job_id, "token": self.token}


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


# The claim writes a token of the claimant's making, so a claim retried after a lost
# connection finds its own committed claim (the second SELECT) instead of nothing.
_CLAIM = f"""
WITH claimed AS (
    UPDATE agent_jobs SET status = 'running', attempts = attempts + 1, locked_by = %(worker)s,
        claim_token = %(token)s, write_seq = 0,
        locked_at = now(), heartbeat_at = now(), started_at = COALESCE(started_at, now()),
        updated_at = now()
    WHERE id = %(id)s AND {guard(S.QUEUED, S.RUNNING, keyed_status())} AND {due(keyed=True)}
      AND <concurrency>
    RETURNING id, project_id, job_type, payload, attempts, max_attempts, timeout_seconds,
        cancel_requested, locked_at, free_retries, free_retry_since
), ev AS ({status_event("claimed", lit("running"), lit("queued"))}
), mine AS (
    SELECT * FROM claimed
    UNION ALL
    SELECT id, project_id, job_type, payload, attempts, max_attempts, timeout_seconds,
        cancel_requested, locked_at, free_retries, free_retry_since
    FROM agent_jobs WHERE {owns_run()} AND write_seq = 0
)
SELECT c.id, c.project_id, c.job_type, c.payload, c.attempts AS attempt, c.max_attempts,
    c.timeout_seconds, c.cancel_requested, c.locked_at, c.free_retries,
    COALESCE(extract(epoch FROM now() - c.free_retry_since), 0)::float8 AS free_retry_seconds,
    (SELECT COALESCE(jsonb_agg(jsonb_build_array(s.name, s.status, s.output) ORDER BY s.seq),
                     '[]'::jsonb)
     FROM job_steps s WHERE s.job_id = c.id) AS steps,
    NULL::jsonb AS why
FROM mine c
UNION ALL  -- nothing claimed: say why, so the delivery needs no second statement
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
    jsonb_build_object('status', j.status, 'queue', j.queue, 'priority', j.priority,
                       'key', j.concurrency_key,
                       'due_in', extract(epoch FROM j.run_after - now())::float8)
FROM agent_jobs j WHERE j.id = %(id)s AND NOT EXISTS (SELECT 1 FROM mine)
"""
CLAIM_UNKEYED = _CLAIM.replace("<concurrency>", "concurrency_key IS NULL")
# Taken under an advisory lock on the key, so the count cannot race.
CLAIM_KEYED = _CLAIM.replace(
    "<concurrency>",
    "concurrency_key = %(key)s AND (SELECT count(*) FROM agent_jobs r "
    f"WHERE {running_under_key('%(key)s')}) < concurrency_limit",
)


# Claim ahead (tasks.engine.claim_ahead): many unkeyed jobs in one statement, each under a
# token of the claimant's making; like _CLAIM, re-run after a lost connection it returns
# the claims that landed (their token, nothing written since). A job it does not claim
# (keyed, early, a duplicate) is claimed, or refused with its reason, by claim_or_why.
CLAIM_MANY = compact(f"""
WITH want AS (SELECT * FROM unnest(%(ids)s::uuid[], %(tokens)s::uuid[]) AS w(id, token)
), claimed AS (
    UPDATE agent_jobs j SET status = 'running', attempts = j.attempts + 1,
        locked_by = %(worker)s, claim_token = w.token, write_seq = 0, locked_at = now(),
        heartbeat_at = now(), started_at = COALESCE(j.started_at, now()), updated_at = now()
    FROM want w
    WHERE j.id = w.id AND {guard(S.QUEUED, S.RUNNING, keyed_status("j"))}
      AND {due("j", keyed=True)}
      AND j.concurrency_key IS NULL
    RETURNING j.id, j.project_id, j.job_type, j.payload, j.attempts, j.max_attempts,
        j.timeout_seconds, j.cancel_requested, j.locked_at, j.free_retries,
        j.free_retry_since, w.token
), ev AS ({status_event("claimed", lit("running"), lit("queued"))}
), mine AS (
    SELECT * FROM claimed
    UNION ALL
    SELECT j.id, j.project_id, j.job_type, j.payload, j.attempts, j.max_attempts,
        j.timeout_seconds, j.cancel_requested, j.locked_at, j.free_retries,
        j.free_retry_since, w.token
    FROM agent_jobs j JOIN want w ON j.id = w.id AND j.claim_token = w.token
    WHERE {keyed_status("j")} = 'running' AND j.write_seq = 0
)
SELECT c.id, c.project_id, c.job_type, c.payload, c.attempts AS attempt, c.max_attempts,
    c.timeout_seconds, c.cancel_requested, c.locked_at, c.free_retries, c.token,
    COALESCE(extract(epoch FROM now() - c.free_retry_since), 0)::float8 AS free_retry_seconds,
    (SELECT COALESCE(jsonb_agg(jsonb_build_array(s.name, s.status, s.output) ORDER BY s.seq),
                     '[]'::jsonb)
     FROM job_steps s WHERE s.job_id = c.id) AS steps
FROM mine c
""")

# A claim made ahead and not started gives the job back, fenced by its token and by no
# write of the run yet; the attempt is given back. The caller follows each move
# (control.after_transition: a fresh wake-up, or the cancel asked meanwhile).
HANDED_BACK = "claimed ahead, not started in time"
HAND_BACK = compact(f"""
WITH back AS (
    UPDATE agent_jobs j SET status = 'queued', attempts = j.attempts - 1, run_after = now(),
        dispatched_at = now(), updated_at = now()
    FROM unnest(%(ids)s::uuid[], %(tokens)s::uuid[]) AS w(id, token)
    WHERE j.id = w.id AND j.claim_token = w.token AND {keyed_status("j")} = 'running'
      AND j.write_seq = 0
    RETURNING {moved_columns("j")}
), ev AS ({status_event("back", lit("queued"), lit("running"), lit(HANDED_BACK))}
)
SELECT * FROM back
""")


def claim_many(job_ids: list[str], tokens: list[uuid.UUID], worker: str
               ) -> dict[str, ClaimedJob]:
    """Claim every due, unkeyed, queued job of `job_ids` in one statement, each under its
    token of `tokens`: job id -> claim."""
    rows = pg.persisting(lambda: pg.fetch_dicts(CLAIM_MANY, {
        "ids": job_ids, "tokens": tokens, "worker": worker}))
    return {str(row["id"]): _claimed(row, row["token"]) for row in rows}


def hand_back(claims: list[tuple[str, uuid.UUID]]) -> list[Finished]:
    """Give back claims (job id, token) made ahead that no run started: the moves made."""
    rows = pg.persisting(lambda: pg.fetch_dicts(HAND_BACK, {
        "ids": [job_id for job_id, _ in claims], "tokens": [token for _, token in claims]}))
    return [Finished.of(row) for row in rows]


@dataclass(frozen=True)
class NotClaimed:
    """Why a delivery claimed nothing, from the claim's own statement.

    `status` None: the job is gone. A queued job with `due_in` > 0 came early (a retry's
    countdown ran on a worker's clock); otherwise it is a duplicate or stale delivery,
    or its concurrency key has no free slot.
    """

    status: str | None = None
    queue: str = ""
    priority: int = 0
    key: str | None = None
    due_in: float = 0.0

    @property
    def early(self) -> bool:
        return self.status == JobStatus.QUEUED and self.due_in > 0

    @property
    def keyed_and_due(self) -> bool:
        return self.status == JobStatus.QUEUED and self.due_in <= 0 and self.key is not None


def _claimed(row: dict[str, Any], token: uuid.UUID) -> ClaimedJob:
    steps = tuple(RecordedStep(n, st, out) for n, st, out in row["steps"])
    return ClaimedJob(
        id=row["id"], project_id=row["project_id"], job_type=row["job_type"],
        payload=row["payload"], attempt=row["attempt"], max_attempts=row["max_attempts"],
        timeout_seconds=row["timeout_seconds"], steps=steps,
        cancel_requested=row["cancel_requested"], token=token, clock=DbClock(row["locked_at"]),
        free_retries=row["free_retries"], free_retry_seconds=row["free_retry_seconds"])


def claim(job_id: uuid.UUID | str, worker: str) -> ClaimedJob | None:
    """Compare-and-set queued -> running under a fresh claim token (None: not claimed)."""
    outcome = claim_or_why(job_id, worker)
    return outcome if isinstance(outcome, ClaimedJob) else None


def claim_or_why(job_id: uuid.UUID | str, worker: str) -> ClaimedJob | NotClaimed:
    """Claim the job, or say why not, in one statement; a job under a concurrency key
    takes a second one, under the key's lock, so the count of its running jobs cannot race.
    """
    token = uuid.uuid4()
    params: dict[str, Any] = {"id": job_id, "worker": worker, "token": token}
    outcome = _claim_row(pg.persist_one(CLAIM_UNKEYED, params), token)
    if not (isinstance(outcome, NotClaimed) and outcome.keyed_and_due):
        return outcome
    params["key"] = outcome.key

    def keyed() -> dict[str, Any] | None:
        with pg.transaction() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (params["key"],))
            return pg.as_dict(conn.execute(CLAIM_KEYED, params))

    return _claim_row(pg.persisting(keyed), token)


def _claim_row(row: dict[str, Any] | None, token: uuid.UUID) -> ClaimedJob | NotClaimed:
    if row is None:
        return NotClaimed()
    if row["why"] is not None:
        return NotClaimed(**row["why"])
    return _claimed(row, token)


def has_ended(job_id: uuid.UUID | str) -> bool:
    """Whether the job is in a terminal state now (or gone)."""
    row = pg.persist_one("SELECT status FROM agent_jobs WHERE id = %s", (job_id,))
    return row is None or JobStatus(row["status"]) in TERMINAL


# A step's outcome: an update of the row its start wrote, or an upsert when its
# start was deferred (the first step after a claim, see tasks.engine.start_watch).
DONE_STEP = """
    UPDATE job_steps SET status = %(done_status)s::text, output = %(done_output)s::jsonb,
        error = %(done_error)s::text, finished_at = now()
    WHERE job_id = (SELECT id FROM <JOB>) AND seq = %(done_seq)s::int
"""
DONE_DEFERRED_STEP = """
    INSERT INTO job_steps (job_id, seq, name, status, output, error, attempts, started_at,
        finished_at)
    SELECT id, %(done_seq)s::int, %(done_name)s::text, %(done_status)s::text,
        %(done_output)s::jsonb, %(done_error)s::text, 1,
        COALESCE(%(done_started)s::timestamptz, now()), now()
    FROM <JOB> WHERE %(done_seq)s::int IS NOT NULL
    ON CONFLICT (job_id, seq) DO UPDATE SET status = EXCLUDED.status, output = EXCLUDED.output,
        error = EXCLUDED.error, finished_at = now(),
        attempts = job_steps.attempts + %(done_bump)s::int,
        started_at = CASE WHEN %(done_bump)s::int = 1 THEN EXCLUDED.started_at
                          ELSE job_steps.started_at END
"""

# One statement for every write a running job makes between claim and finish:
# an optional pending step outcome, an optional new step start, optional extra
# events. It locks the job's row and writes nothing unless the row still says this
# run owns it (a reclaim that committed after this statement began is seen), and
# it tells the caller whether a cancel was requested. `write_seq` makes it
# idempotent: re-run after a lost connection, a write that already landed writes
# nothing more. A write without a number (the start watcher's) always applies.
CHECKPOINT = f"""
WITH job AS (
    SELECT id, project_id, cancel_requested,
        (%(wseq)s::int IS NULL OR write_seq < %(wseq)s::int) AS fresh
    FROM agent_jobs WHERE {owns_run()}
    FOR NO KEY UPDATE
), bump AS (
    UPDATE agent_jobs SET write_seq = COALESCE(%(wseq)s::int, write_seq), heartbeat_at = now()
    WHERE id = (SELECT id FROM job WHERE fresh)
), fresh AS (SELECT * FROM job WHERE fresh
), done AS (<DONE>), started AS (
    INSERT INTO job_steps (job_id, seq, name, status, attempts, started_at)
    SELECT id, %(seq)s::int, %(name)s::text, 'running', 1,
        COALESCE(%(started_at)s::timestamptz, now()) FROM fresh
    WHERE %(seq)s::int IS NOT NULL AND NOT cancel_requested
    ON CONFLICT (job_id, seq) DO UPDATE SET status = 'running', name = EXCLUDED.name,
        attempts = job_steps.attempts + 1, started_at = EXCLUDED.started_at, finished_at = NULL,
        output = NULL, error = NULL
), ev AS (
    INSERT INTO agent_job_events (job_id, project_id, type, message, data)
    SELECT f.id, f.project_id, e.type, e.message, e.data::jsonb
    FROM fresh f CROSS JOIN jsonb_to_recordset(%(events)s::jsonb)
        AS e(ord int, type text, message text, data text, unless_canceled bool)
    WHERE NOT (e.unless_canceled AND f.cancel_requested)
    ORDER BY e.ord
)
SELECT cancel_requested FROM job
"""
CHECKPOINTS = tuple(CHECKPOINT.replace("<DONE>", done.replace("<JOB>", "fresh"))
                    for done in (DONE_STEP, DONE_DEFERRED_STEP))


class Order(IntEnum):
    """Where an event goes among those one statement writes (the feed's order)."""

    EARLIER_START = 0  # a step's start whose write was deferred to its outcome's statement
    OUTCOME = 1  # the step that just ended
    NEXT = 2  # what happens next: the following step's start, a log line, a delta


def event(ord_: Order, type_: str, message: str, data: str, *,
          unless_canceled: bool = False) -> dict:
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
    owner: Owner, wseq: int | None, pending: PendingStep | None, *, seq: int | None = None,
    name: str | None = None, events: list[dict] | None = None,
    started_at: datetime | None = None,
) -> bool | None:
    """Write; return cancel_requested, or None when this run no longer owns the job.

    `wseq`: this write's number in the run (None: unnumbered, applied every time).
    A lost connection is retried (tasks.engine.pg.persist_one): the write is idempotent.
    """
    params = owner.params() | _done_params(pending)
    params |= {"wseq": wseq, "seq": seq, "name": name, "events": json.dumps(events or []),
               "started_at": started_at}
    row = pg.persist_one(CHECKPOINTS[_deferred(pending)], params)
    return None if row is None else bool(row["cancel_requested"])


_FINISHED_COLUMNS = MOVED_COLUMNS
_JOB_OWNER = "(SELECT owner_id FROM projects WHERE id = (SELECT project_id FROM job))"

# Like CHECKPOINT, fenced by the run's token and idempotent: re-run after it landed,
# the UPDATE finds the job no longer running and the second SELECT returns the row
# this run's own finish left (its token and this write's number), so the caller
# still learns the outcome. (Both SELECTs read the statement's snapshot: on the
# first run the row still says running, and only the first returns it.)
_FINISH = f"""
WITH job AS (
    UPDATE agent_jobs SET status = %(status)s::text, updated_at = now(),
        write_seq = %(wseq)s::int,
        result = COALESCE(%(result)s::jsonb, result),
        last_error = COALESCE(%(error)s::text, last_error),
        completed_at = CASE WHEN %(terminal)s::bool THEN now() END,
        run_after = CASE WHEN %(delay)s::float8 IS NULL THEN run_after
                         ELSE now() + make_interval(secs => %(delay)s::float8) END,
        dispatched_at = CASE WHEN %(delay)s::float8 IS NULL THEN dispatched_at
                             ELSE now() + make_interval(secs => %(delay)s::float8) END,
        attempts = attempts - %(refund)s::int,
        free_retries = free_retries + %(free)s::int,
        free_retry_since = CASE WHEN %(free)s::int = 1 THEN COALESCE(free_retry_since, now())
                                ELSE free_retry_since END,
        wake_at = %(wake_at)s::timestamptz, wait_for = %(wait_for)s::uuid[],
        wait_reason = %(wait_reason)s::text, wait_any = %(wait_any)s::bool,
        wait_approvals = %(wait_approvals)s::uuid[]
    WHERE {owns_run()} AND {guard(S.RUNNING, S.COMPLETED, keyed_status())}
    RETURNING {_FINISHED_COLUMNS}
), done AS (<DONE>), ev AS (  -- the job's move, carrying its last step's outcome
    INSERT INTO agent_job_events (job_id, project_id, type, message, data)
    SELECT job.id, job.project_id, 'status', job.status,
        {status_data("job.status", lit("running"), "%(error)s::text", "%(step)s::jsonb")}
    FROM job
), mine AS MATERIALIZED (  -- the fair share's refill, when the move frees the owner a place
    SELECT p.id FROM projects p
    WHERE %(cap)s::int > 0 AND (SELECT status FROM job) IN {sql_list(fair.FREES_PLACE)}
      AND p.owner_id = {_JOB_OWNER}
), free AS MATERIALIZED (  -- + 1: the statement's snapshot still counts this job's place
    -- (counted through mine: when mine is empty nothing is picked, and free counts for
    -- nothing)
    SELECT GREATEST(%(cap)s::int + 1 - {fair.held_in("mine")}, 0) AS n
), room AS (  -- the move frees one place: one job here, any more by the owner's refill
    SELECT LEAST(n, 1) AS n FROM free
), pick AS ({fair.PICK}
), refill AS (
    -- By its key, a scalar: a worker's connection keeps this statement's generic plan,
    -- made on its first jobs, and `= ANY(<an array of unknown length>)` planned there on a
    -- small table was a pass over agent_jobs that every later finish repeated (issue 26).
    UPDATE agent_jobs r SET dispatched_at = now() WHERE r.id = (SELECT id FROM pick LIMIT 1)
    RETURNING r.id, r.queue, r.priority
)
SELECT {_FINISHED_COLUMNS}, (SELECT COALESCE(jsonb_agg(jsonb_build_array(id, queue, priority)),
                                           '[]'::jsonb) FROM refill) AS refilled,
    -- more room and a job published: there may be more to publish (none published: none)
    EXISTS (SELECT 1 FROM refill) AND (SELECT n FROM free) > 1 AS more_room
FROM job
UNION ALL  -- a replay: its refill landed with it, or is the owner's refill's to do now
SELECT {_FINISHED_COLUMNS}, NULL::jsonb, false FROM agent_jobs
WHERE id = %(id)s AND claim_token = %(token)s AND write_seq = %(wseq)s::int
  AND status <> 'running'
"""
FINISHES = tuple(compact(_FINISH.replace("<DONE>", done.replace("<JOB>", "job")))
                 for done in (DONE_STEP, DONE_DEFERRED_STEP))


@dataclass(frozen=True)
class Finished:
    """A job that just left `running` (or any other status): what follows the move needs this."""

    id: uuid.UUID
    project_id: uuid.UUID
    parent_job_id: uuid.UUID | None
    concurrency_key: str | None
    queue: str
    priority: int
    # A cancel that landed after the last checkpoint: the runner must not park or retry.
    cancel_requested: bool
    status: JobStatus
    was: JobStatus = S.RUNNING
    countdown: float | None = None  # a retry's delay: its wake-up is published with it
    # The owner's jobs the move published in its own statement (job id, queue, priority);
    # None: not done there (another mover, or a replayed finish): the owner's refill's.
    refilled: tuple[tuple[uuid.UUID, str, int], ...] | None = None
    # The owner had room for more than the one job the statement publishes: the owner's
    # refill publishes the rest (after a raised cap, say).
    more_room: bool = False

    @classmethod
    def of(cls, row: dict[str, Any], was: JobStatus = S.RUNNING, **extra: Any) -> Finished:
        return cls(id=row["id"], project_id=row["project_id"], parent_job_id=row["parent_job_id"],
                   concurrency_key=row["concurrency_key"], queue=row["queue"],
                   priority=row["priority"], cancel_requested=row["cancel_requested"],
                   status=JobStatus(row["status"]), was=was, **extra)


def finish(
    owner: Owner, wseq: int, new: JobStatus, pending: PendingStep | None, *,
    result: str | None = None, error: str | None = None, delay: float | None = None,
    refund_attempt: bool = False, free_retry: bool = False, wake_at: datetime | None = None,
    wait_for: list[str] | None = None, wait_reason: str | None = None,
    wait_any: bool = False, wait_approvals: list[str] | None = None,
) -> Finished | None:
    """Move a running job on (completed, failed, canceled, queued, waiting). None: not ours.

    The statement writes one event, the job's `status` (with `error` as its reason), which
    carries the outcome of the `pending` step as `data.step` (issue 26: a step's outcome
    and the job's move are one row, not two).
    """
    if not can_transition(S.RUNNING, new):
        raise IllegalTransition(f"running -> {new}")
    params = owner.params() | _done_params(pending) | {
        "wseq": wseq, "status": new.value, "result": result, "error": error,
        "terminal": new in (S.COMPLETED, S.FAILED, S.CANCELED), "delay": delay,
        "refund": 1 if refund_attempt else 0, "free": 1 if free_retry else 0,
        "wake_at": wake_at, "wait_for": wait_for, "wait_reason": wait_reason,
        "wait_any": wait_any, "wait_approvals": wait_approvals,
        "step": None if pending is None else step_data(pending.name, pending.seq,
                                                       pending.status),
    }
    row = pg.persist_one(FINISHES[_deferred(pending)], params | {"cap": fair.cap()})
    if row is None:
        return None
    refilled, more_room = row.pop("refilled"), row.pop("more_room")
    return Finished.of(row, countdown=delay, more_room=more_room,
                       refilled=None if refilled is None else tuple(
                           (uuid.UUID(i), q, int(p)) for i, q, p in refilled))


def peek_queue(job_id: uuid.UUID | str) -> tuple[str, int] | None:
    """(queue, priority) of a job that is still queued."""
    row = pg.fetch_one_dict("SELECT queue, priority FROM agent_jobs "
                            "WHERE id = %s AND status = 'queued'", (job_id,))
    return (row["queue"], row["priority"]) if row else None
