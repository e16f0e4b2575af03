"""Recovery sweeps, run by beat every SWITCHYARD_SWEEP_SECONDS.

Each sweep is a bounded, idempotent query. Two guards make any number of beats
harmless: a PostgreSQL advisory lock (no two sweeps at once) and a row per
(sweep, tick) in `sweep_runs` (each sweep at most once per tick).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import psycopg
from psycopg.rows import dict_row

from tasks.engine import control, fair, lifecycle, pg
from tasks.engine.dispatch import broker_depth, dispatch_quietly
from tasks.engine.sql import due, heartbeat_stale, lit, moved_columns, ready_to_resume, status_event
from tasks.engine.status import JobStatus, guard
from tasks.engine.store import Finished
from tasks.settings import get_settings

log = logging.getLogger(__name__)
S = JobStatus
SWEEP_LOCK = 0x5357_4545  # "SWEE": the advisory lock every sweep run takes
BATCH = 500

def _dispatch(condition: str) -> str:
    """Mark queued jobs matching `condition` dispatched now; the caller publishes them."""
    return f"""
WITH due AS (
    SELECT id FROM agent_jobs
    WHERE {due()} AND {condition}
    ORDER BY priority DESC, run_after LIMIT {BATCH} FOR UPDATE SKIP LOCKED
)
UPDATE agent_jobs j SET dispatched_at = now() FROM due WHERE j.id = due.id
RETURNING {moved_columns("j")}
"""


# A published wake-up that is due again (a retry's) or went unanswered for a redispatch
# period; what was never published goes out through tasks.engine.fair, owner by owner.
DISPATCH_DUE = _dispatch(
    "dispatched_at IS NOT NULL AND (dispatched_at < run_after "
    "OR dispatched_at < now() - make_interval(secs => %(redispatch)s))")


def _dispatch_due(conn: psycopg.Connection, params: dict) -> list[dict]:
    cur = conn.cursor(row_factory=dict_row)
    again = list(cur.execute(DISPATCH_DUE, params))
    fresh = list(cur.execute(fair.REFILL_ALL, params | {"cap": fair.cap(), "batch": BATCH}))
    return again + fresh


# A job is "sent but not seen" when its wake-up went out a sweep interval ago and it
# is still queued. If the broker's queue is empty at the same time, the wake-ups were
# lost (a wiped or restarted broker): send them again now, not a redispatch period
# later. A wake-up a busy worker prefetched looks the same; its duplicate is harmless.
SENT_NOT_SEEN = ("dispatched_at < now() - make_interval(secs => %(lag)s) "
                 "AND run_after <= now() - make_interval(secs => %(lag)s)")
QUEUES_SENT_NOT_SEEN = (f"SELECT DISTINCT queue FROM agent_jobs "
                        f"WHERE status = 'queued' AND {SENT_NOT_SEEN}")
REDISPATCH_LOST = _dispatch(f"queue = ANY(%(queues)s) AND {SENT_NOT_SEEN}")


def _redispatch_lost(conn: psycopg.Connection, params: dict) -> list[dict]:
    queues = [row["queue"] for row in conn.cursor(row_factory=dict_row).execute(
        QUEUES_SENT_NOT_SEEN, params)]
    empty = []
    for queue in queues:
        try:
            if broker_depth(queue) == 0:
                empty.append(queue)
        except Exception:
            log.warning("could not read the broker's depth of %s", queue, exc_info=True,
                        extra={"action": "broker_depth_failed", "queue": queue})
    if not empty:
        return []
    return list(conn.cursor(row_factory=dict_row).execute(REDISPATCH_LOST,
                                                          params | {"queues": empty}))


def _move_running(condition: str, error: str, retry: bool) -> str:
    """Take running jobs that match `condition` away from their worker, with events.

    A crash costs the attempt its claim counted (no refund), so a job out of
    attempts fails instead of going round again.
    """
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
    RETURNING {moved_columns("j")}, j.last_error
), steps AS (
    UPDATE job_steps SET status = 'failed', error = 'interrupted: ' || moved.last_error,
        finished_at = now()
    FROM moved WHERE job_steps.job_id = moved.id AND job_steps.status = 'running'
), ev AS ({status_event("moved", "status", lit("running"), "last_error")})
SELECT * FROM moved
"""


RECLAIM_STALE = _move_running(
    heartbeat_stale(),
    "'worker lost: no heartbeat since ' || to_char(heartbeat_at, 'YYYY-MM-DD\"T\"HH24:MI:SSOF')"
    " || ' from ' || coalesce(locked_by, 'an unknown worker')",
    retry=True,
)
EXPIRE_TIMEOUTS = _move_running(
    "timeout_seconds IS NOT NULL "
    "AND locked_at + make_interval(secs => timeout_seconds + %(stale)s) < now()",
    "'JobTimeout: still running ' || timeout_seconds || 's after it started'",
    retry=False,
)
READY_TO_RESUME = f"SELECT id FROM agent_jobs p WHERE {ready_to_resume('p')} LIMIT {BATCH}"


@dataclass(frozen=True)
class Sweep:
    name: str
    run: Callable[[psycopg.Connection, dict], list[dict]]


def query(sql: str) -> Callable[[psycopg.Connection, dict], list[dict]]:
    return lambda conn, params: list(conn.cursor(row_factory=dict_row).execute(sql, params))


# The engine's own sweeps, then those a service adds (tasks.catalog adds them, so every
# beat runs the same list).
SWEEPS: list[Sweep] = [
    Sweep("reclaim_stale", query(RECLAIM_STALE)),
    Sweep("expire_timeouts", query(EXPIRE_TIMEOUTS)),
    Sweep("dispatch_due", _dispatch_due),
    Sweep("redispatch_lost", _redispatch_lost),
    Sweep("resume_waiting", query(READY_TO_RESUME)),
]


def add(sweep: Sweep) -> None:
    if any(s.name == sweep.name for s in SWEEPS):
        raise ValueError(f"sweep {sweep.name} is added twice")
    SWEEPS.append(sweep)

# The tick by the database's clock: beats on hosts whose clocks disagree still agree
# on which tick it is, so a sweep runs once per tick whoever runs it.
DB_TICK = "SELECT floor(extract(epoch FROM now()) / %s)::bigint AS tick"


def current_tick(now: float | None = None) -> int:
    """The tick of `now` (seconds since the epoch); without it, the database's tick."""
    if now is not None:
        return int(now // get_settings().sweep_seconds)
    return int(pg.fetch_value(DB_TICK, (get_settings().sweep_seconds,)))


def run_sweeps(tick: int | None = None) -> dict[str, int | None]:
    """Run every sweep not yet run this tick. Returns rows touched per sweep (None: skipped)."""
    settings = get_settings()
    tick = current_tick() if tick is None else tick
    params = {"stale": settings.stale_after_seconds,
              "redispatch": settings.redispatch_after_seconds, "lag": settings.sweep_seconds}
    found: dict[str, list[dict]] = {}
    with pg.transaction() as conn:
        locked = conn.cursor(row_factory=dict_row).execute(
            "SELECT pg_try_advisory_xact_lock(%s) AS locked", (SWEEP_LOCK,)).fetchone()
        if not (locked and locked["locked"]):
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


def _after_commit(found: dict[str, list[dict]]) -> None:
    """Publish and wake only once the sweep's changes are committed."""
    for name in ("reclaim_stale", "expire_timeouts"):
        for row in found.get(name, []):
            log.warning("%s: %s is now %s", name, row["id"], row["status"],
                        extra={"action": name, "job_id": str(row["id"]), "status": row["status"]})
            control.after_transition(Finished.of(row))
    for name in ("dispatch_due", "redispatch_lost"):
        for row in found.get(name, []):
            dispatch_quietly(row["id"], row["queue"], row["priority"])
    waiting = [row["id"] for row in found.get("resume_waiting", [])]
    if waiting:
        control.resume_if_ready(*waiting)
