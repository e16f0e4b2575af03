"""Recovery sweeps, run by beat every SWITCHYARD_SWEEP_SECONDS.

Each sweep is a bounded, idempotent query. Two guards make any number of beats
harmless: a PostgreSQL advisory lock (no two sweeps at once) and a row per
(sweep, tick) in `sweep_runs` (each sweep at most once per tick).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import psycopg

from tasks import approvals, control, lifecycle, pg
from tasks.dispatch import dispatch_quietly
from tasks.settings import get_settings
from tasks.status import TERMINAL, JobStatus, guard, sql_list

log = logging.getLogger(__name__)
S = JobStatus
SWEEP_LOCK = 0x5357_4545  # "SWEE": the advisory lock every sweep run takes
BATCH = 500

DISPATCH_DUE = f"""
WITH due AS (
    SELECT id FROM agent_jobs
    WHERE status = 'queued' AND run_after <= now()
      AND (dispatched_at IS NULL OR dispatched_at < run_after
           OR dispatched_at < now() - make_interval(secs => %(redispatch)s))
    ORDER BY priority DESC, run_after LIMIT {BATCH} FOR UPDATE SKIP LOCKED
)
UPDATE agent_jobs j SET dispatched_at = now() FROM due WHERE j.id = due.id
RETURNING j.id, j.queue, j.priority
"""


def _move_running(condition: str, error: str, retry: bool) -> str:
    """Take running jobs that match `condition` away from their worker, with events."""
    new = "CASE WHEN attempts < max_attempts THEN 'queued' ELSE 'failed' END" if retry \
        else "'failed'"
    assert guard(S.RUNNING, S.QUEUED) and guard(S.RUNNING, S.FAILED)  # both edges exist
    return f"""
WITH picked AS (
    SELECT id FROM agent_jobs WHERE status = 'running' AND {condition}
    LIMIT {BATCH} FOR UPDATE SKIP LOCKED
), moved AS (
    UPDATE agent_jobs j SET status = {new}, last_error = {error}, run_after = now(),
        dispatched_at = now(), updated_at = now(),
        completed_at = CASE WHEN {new} = 'failed' THEN now() END
    FROM picked WHERE j.id = picked.id
    RETURNING j.id, j.project_id, j.queue, j.priority, j.status, j.parent_job_id,
        j.concurrency_key, j.last_error
), steps AS (
    UPDATE job_steps SET status = 'failed', error = 'interrupted: ' || moved.last_error,
        finished_at = now()
    FROM moved WHERE job_steps.job_id = moved.id AND job_steps.status = 'running'
), ev AS (
    INSERT INTO agent_job_events (job_id, project_id, type, message, data)
    SELECT id, project_id, 'status', status,
        jsonb_build_object('status', status, 'from', 'running', 'reason', last_error)
    FROM moved
)
SELECT id, queue, priority, status, parent_job_id, concurrency_key FROM moved
"""


RECLAIM_STALE = _move_running(
    "heartbeat_at < now() - make_interval(secs => %(stale)s)",
    "'worker lost: no heartbeat since ' || to_char(heartbeat_at, 'YYYY-MM-DD\"T\"HH24:MI:SSOF')",
    retry=True,
)
EXPIRE_TIMEOUTS = _move_running(
    "timeout_seconds IS NOT NULL "
    "AND locked_at + make_interval(secs => timeout_seconds + %(stale)s) < now()",
    "'JobTimeout: still running ' || timeout_seconds || 's after it started'",
    retry=False,
)
READY_TO_RESUME = f"""
SELECT id FROM agent_jobs p WHERE status = 'waiting'
  AND (p.wake_at IS NULL OR p.wake_at <= now())
  AND NOT EXISTS (SELECT 1 FROM agent_jobs c WHERE c.id = ANY(p.wait_for)
                  AND c.status NOT IN {sql_list(TERMINAL)})
LIMIT {BATCH}
"""


@dataclass(frozen=True)
class Sweep:
    name: str
    run: Callable[[psycopg.Connection, dict], list[tuple]]


def _query(sql: str) -> Callable[[psycopg.Connection, dict], list[tuple]]:
    return lambda conn, params: conn.execute(sql, params).fetchall()


SWEEPS: tuple[Sweep, ...] = (
    Sweep("reclaim_stale", _query(RECLAIM_STALE)),
    Sweep("expire_timeouts", _query(EXPIRE_TIMEOUTS)),
    Sweep("dispatch_due", _query(DISPATCH_DUE)),
    Sweep("resume_waiting", _query(READY_TO_RESUME)),
    Sweep("expire_approvals", _query(approvals.EXPIRE_DUE)),
)


def current_tick(now: float | None = None) -> int:
    return int((time.time() if now is None else now) // get_settings().sweep_seconds)


def run_sweeps(tick: int | None = None) -> dict[str, int | None]:
    """Run every sweep not yet run this tick. Returns rows touched per sweep (None: skipped)."""
    settings = get_settings()
    tick = current_tick() if tick is None else tick
    params = {"stale": settings.stale_after_seconds,
              "redispatch": settings.redispatch_after_seconds}
    found: dict[str, list[tuple]] = {}
    with pg.transaction() as conn:
        if not conn.execute("SELECT pg_try_advisory_xact_lock(%s)", (SWEEP_LOCK,)).fetchone()[0]:
            return {s.name: None for s in SWEEPS}
        for sweep in SWEEPS:
            first = conn.execute(
                "INSERT INTO sweep_runs (sweep, tick, ran_by) VALUES (%s, %s, %s) "
                "ON CONFLICT DO NOTHING RETURNING 1", (sweep.name, tick, lifecycle.worker_id()),
            ).fetchone()
            if first is not None:
                found[sweep.name] = sweep.run(conn, params)
                conn.execute("UPDATE sweep_runs SET stats = jsonb_build_object('rows', %s::int) "
                             "WHERE sweep = %s AND tick = %s",
                             (len(found[sweep.name]), sweep.name, tick))
        conn.execute("DELETE FROM sweep_runs WHERE tick < %s", (tick - 17280,))  # keep ~a day
    _after_commit(found)
    return {s.name: len(found[s.name]) if s.name in found else None for s in SWEEPS}


def _after_commit(found: dict[str, list[tuple]]) -> None:
    """Publish and wake only once the sweep's changes are committed."""
    for name in ("reclaim_stale", "expire_timeouts"):
        for job_id, queue, priority, status, parent, key in found.get(name, []):
            log.warning("%s: %s is now %s", name, job_id, status,
                        extra={"action": name, "job_id": str(job_id), "status": status})
            if status == S.QUEUED:
                dispatch_quietly(job_id, queue, priority)
            if parent is not None and status in TERMINAL:
                control.resume_if_ready(parent)
            if key is not None:
                control.wake_next_for_key(key)
    for job_id, queue, priority in found.get("dispatch_due", []):
        dispatch_quietly(job_id, queue, priority)
    waiting = [row[0] for row in found.get("resume_waiting", [])]
    if waiting:
        control.resume_if_ready(*waiting)
