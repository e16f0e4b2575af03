"""Retention: terminal jobs and their events are kept SWITCHYARD_RETENTION_DAYS, then go.

The event log is partitioned by UTC day (migration 0006), so its retention drops
whole days: a catalog operation whose cost does not grow with the table and that
takes no lock an insert waits on for long (DETACH … CONCURRENTLY under a lock
timeout). A day is kept while a job that is not yet terminal has an event in it.
Jobs (their steps go with them), LLM usage and dead workers' heartbeat rows are
deleted in bounded batches by index, oldest first; the minute email sweep's
jobs that found nothing to do go after a day. A chat reply's deltas are folded away a
minute after the reply is stored (`fold_deltas`).

`maintain()` is the one entry point, run by beat (`tasks.maintain`) every
SWITCHYARD_MAINTENANCE_SECONDS; workers make the coming days' partitions at
start too, so a system that was down for a while never meets a missing day.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from datetime import date, datetime, timedelta

import psycopg
from psycopg.rows import dict_row

from tasks.engine import pg
from tasks.engine.status import TERMINAL
from tasks.settings import get_settings

log = logging.getLogger(__name__)

AHEAD_DAYS = 14  # migration 0006 makes as many
BATCH = 1000
MAX_BATCHES = 50  # per table per run: a backlog is worked off over several runs
LOCK = 0x5245_5445  # "RETE": one maintainer at a time
IDLE_KEEP_DAYS = 1
IDLE_SWEEP_TYPES = ("email.process_due",)  # every minute: 1,440 jobs a day, most idle
HEARTBEAT_KEEP_DAYS = 1
PARTITION_PREFIX = "agent_job_events_"
TERMINAL_SQL = "(" + ", ".join(f"'{s.value}'" for s in sorted(TERMINAL)) + ")"

DELETE_OLD_JOBS = f"""
WITH old AS (
    SELECT id FROM agent_jobs
    WHERE status IN {TERMINAL_SQL} AND completed_at < now() - make_interval(days => %(days)s)
    ORDER BY completed_at LIMIT {BATCH} FOR UPDATE SKIP LOCKED
)
DELETE FROM agent_jobs j USING old WHERE j.id = old.id
"""
# "Did nothing": a result with no number other than 0 in it ({"sent": 0, ...} or {}).
DELETE_IDLE_SWEEP_JOBS = f"""
WITH idle AS (
    SELECT id FROM agent_jobs
    WHERE status = 'completed' AND job_type = ANY(%(types)s)
      AND completed_at < now() - make_interval(days => {IDLE_KEEP_DAYS})
      AND NOT jsonb_path_exists(COALESCE(result, '{{}}'::jsonb),
                                'strict $.** ? (@.type() == "number" && @ != 0)')
    LIMIT {BATCH} FOR UPDATE SKIP LOCKED
)
DELETE FROM agent_jobs j USING idle WHERE j.id = idle.id
"""
DELETE_OLD_USAGE = f"""
DELETE FROM llm_usage WHERE id IN (
    SELECT id FROM llm_usage WHERE created_at < now() - make_interval(days => %(days)s)
    ORDER BY id LIMIT {BATCH})
"""
DELETE_DEAD_WORKERS = (f"DELETE FROM worker_heartbeats WHERE last_seen_at < "
                       f"now() - make_interval(days => {HEARTBEAT_KEEP_DAYS})")
PARTITIONS = """
SELECT c.relname AS name, i.inhdetachpending AS pending
FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
WHERE i.inhparent = 'agent_job_events'::regclass ORDER BY c.relname
"""
# Jobs not yet terminal that wrote to the day: the day stays until they end.
HELD_BY_LIVE_JOBS = f"""
SELECT count(*) AS held FROM agent_jobs j
WHERE j.status NOT IN {TERMINAL_SQL} AND j.created_at < %(upper)s
  AND EXISTS (SELECT 1 FROM {{partition}} e WHERE e.job_id = j.id)
"""


@dataclass
class Report:
    partitions_made: int = 0
    partitions_dropped: list[str] = field(default_factory=list)
    partitions_held: dict[str, int] = field(default_factory=dict)  # name -> live jobs in it
    jobs_deleted: int = 0
    idle_sweep_jobs_deleted: int = 0
    usage_deleted: int = 0
    heartbeats_deleted: int = 0
    deltas_folded: int = 0
    skipped: bool = False  # another process held the maintenance lock

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def ensure_partitions(conn: psycopg.Connection | None = None) -> int:
    """Make the event log's partitions from today to AHEAD_DAYS ahead; returns how many."""
    conn = conn or pg.connection()
    with conn.transaction():
        # Never queue behind a long reader for long: the days ahead leave time to try again.
        conn.execute("SET LOCAL lock_timeout = '5s'")
        row = conn.cursor(row_factory=dict_row).execute(
            "SELECT switchyard_event_partitions((now() AT TIME ZONE 'UTC')::date, "
            "(now() AT TIME ZONE 'UTC')::date + %s) AS made", (AHEAD_DAYS,)).fetchone()
    return int(row["made"]) if row else 0


def partition_day(name: str) -> date | None:
    try:
        return datetime.strptime(name.removeprefix(PARTITION_PREFIX), "%Y%m%d").date()
    except ValueError:
        return None


def expired(names: list[str], today: date, days: int) -> list[tuple[str, date]]:
    """The partitions whose whole day lies more than `days` days before `today`, oldest
    first, with the first instant after them (pure: the rule, apart from the catalog)."""
    out = []
    for name in names:
        day = partition_day(name)
        if day is not None and day + timedelta(days=1) <= today - timedelta(days=days):
            out.append((name, day + timedelta(days=1)))
    return sorted(out, key=lambda item: item[1])


# A finished reply's `delta` events go once its stored message says it all, a while after
# it finished: a stream still catching up must see them first (folding at once lost them
# to a page whose stream was a moment behind). Replies older than two days are left to the
# day partitions' own retention, which bounds the jobs this statement visits.
DELTA_GRACE_SECONDS = 60.0
FOLD_DELTAS = """
DELETE FROM agent_job_events e USING agent_jobs j
WHERE j.job_type = 'chat.reply' AND j.status = 'completed'
  AND j.completed_at < now() - make_interval(secs => %(grace)s)
  AND j.completed_at > now() - interval '2 days'
  AND e.job_id = j.id AND e.type = 'delta' AND e.created_at >= j.created_at
"""


def fold_deltas(conn: psycopg.Connection | None = None,
                grace_seconds: float = DELTA_GRACE_SECONDS) -> int:
    """Delete the `delta` events of replies finished over `grace_seconds` ago."""
    conn = conn or pg.connection()
    return conn.execute(FOLD_DELTAS, {"grace": grace_seconds}).rowcount


def maintain(days: int | None = None) -> Report:
    """One maintenance pass (idempotent; any number of processes may call it)."""
    days = get_settings().retention_days if days is None else days
    conn = pg.connection()
    report = Report()
    locked = conn.cursor(row_factory=dict_row).execute(
        "SELECT pg_try_advisory_lock(%s) AS locked", (LOCK,)).fetchone()
    if not (locked and locked["locked"]):
        report.skipped = True
        return report
    try:
        report.partitions_made = ensure_partitions(conn)
        _drop_expired_days(conn, days, report)
        report.jobs_deleted = _batches(conn, DELETE_OLD_JOBS, {"days": days})
        report.idle_sweep_jobs_deleted = _batches(conn, DELETE_IDLE_SWEEP_JOBS,
                                                  {"types": list(IDLE_SWEEP_TYPES)})
        report.usage_deleted = _batches(conn, DELETE_OLD_USAGE, {"days": days})
        report.heartbeats_deleted = conn.execute(DELETE_DEAD_WORKERS).rowcount
        report.deltas_folded = fold_deltas(conn)
    finally:
        conn.execute("SELECT pg_advisory_unlock(%s)", (LOCK,))
    log.info("retention pass", extra={"action": "retention", **report.as_dict()})
    return report


def _batches(conn: psycopg.Connection, sql: str, params: dict[str, object]) -> int:
    total = 0
    for _ in range(MAX_BATCHES):
        n = conn.execute(sql, params).rowcount
        total += n
        if n < BATCH:
            break
    return total


def _drop_expired_days(conn: psycopg.Connection, days: int, report: Report) -> None:
    cur = conn.cursor(row_factory=dict_row)
    found = cur.execute("SELECT (now() AT TIME ZONE 'UTC')::date AS today").fetchone()
    assert found is not None
    today = found["today"]
    rows = cur.execute(PARTITIONS).fetchall()
    for row in rows:
        if row["pending"]:  # a detach cut short (a lost connection): finish it
            _detach_and_drop(conn, row["name"], finalize=True)
    for name, upper in expired([r["name"] for r in rows if not r["pending"]], today, days):
        counted = cur.execute(HELD_BY_LIVE_JOBS.format(partition=_ident(name)),
                              {"upper": upper}).fetchone()
        held = counted["held"] if counted else 0
        if held:
            report.partitions_held[name] = int(held)
            continue
        if _detach_and_drop(conn, name):
            report.partitions_dropped.append(name)


def _detach_and_drop(conn: psycopg.Connection, name: str, *, finalize: bool = False) -> bool:
    """Detach without blocking inserts (CONCURRENTLY waits for readers instead of locking
    them out), then drop the now separate table. A lock not had in time: next pass."""
    how = "FINALIZE" if finalize else "CONCURRENTLY"
    try:
        conn.execute("SET lock_timeout = '5s'")
        conn.execute(f"ALTER TABLE agent_job_events DETACH PARTITION {_ident(name)} {how}")
        conn.execute(f"DROP TABLE {_ident(name)}")
        return True
    except psycopg.errors.LockNotAvailable:
        log.warning("retention: %s stays until the next pass (lock not available)", name)
        return False
    finally:
        conn.execute("RESET lock_timeout")


def _ident(name: str) -> str:
    if partition_day(name) is None:  # only our own day partitions are ever named here
        raise ValueError(f"not an event partition: {name!r}")
    return name
