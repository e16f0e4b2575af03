"""Monitor reads: queues and workers from PostgreSQL (the truth, so history survives restarts).

Scoped by viewer (tasks.engine.sql.visible_to): a tenant sees the queues of its own jobs and
only the workers running them, counted by its own jobs; an admin token (viewer None)
sees the fleet.
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import text
from sqlalchemy.orm import Session

from app.api import responses
from tasks.engine.fair import unpublished
from tasks.engine.sql import due, visible_to
from tasks.settings import get_settings

VISIBLE = visible_to("j", ":viewer")

QUEUE_STATS = text(f"""
SELECT j.queue, j.job_type,
    count(*) FILTER (WHERE {due("j")}) AS queued,
    count(*) FILTER (WHERE {due("j")} AND {unpublished("j")}) AS held_back,
    count(*) FILTER (WHERE j.status = 'queued' AND j.run_after > now()) AS scheduled,
    count(*) FILTER (WHERE j.status = 'running') AS running,
    count(*) FILTER (WHERE j.status = 'waiting') AS waiting,
    count(*) FILTER (WHERE j.status = 'failed' AND j.completed_at > now() - interval '1 hour')
        AS failed_last_hour,
    extract(epoch FROM now() - min(j.run_after)
            FILTER (WHERE {due("j")})) AS oldest_queued_seconds,
    count(*) FILTER (WHERE j.status = 'completed' AND j.completed_at > now() - interval '1 minute')
        AS completed_last_minute,
    count(*) FILTER (WHERE j.status = 'completed' AND j.completed_at > now() - interval '1 hour')
        AS completed_last_hour
FROM agent_jobs j
WHERE {VISIBLE}
  AND (j.status IN ('queued', 'running', 'waiting') OR j.completed_at > now() - interval '1 hour')
GROUP BY j.queue, j.job_type
ORDER BY j.queue, j.job_type
""")

COMPLETED_SERIES = text(f"""
SELECT j.queue, date_trunc('minute', j.completed_at) AS minute, count(*)
FROM agent_jobs j
WHERE {VISIBLE} AND j.status = 'completed' AND j.completed_at > now() - interval '1 hour'
GROUP BY 1, 2 ORDER BY 1, 2
""")

# `running` counts only the viewer's jobs; a tenant is shown only the workers holding one.
WORKERS = text(f"""
SELECT w.worker, w.hostname, w.pid, w.queues, w.started_at, w.last_seen_at, w.stopped_at,
    extract(epoch FROM now() - w.last_seen_at) AS seconds_since_heartbeat,
    COALESCE(r.running, 0) AS running
FROM worker_heartbeats w
LEFT JOIN (SELECT j.locked_by, count(*) AS running FROM agent_jobs j
           WHERE j.status = 'running' AND {VISIBLE} GROUP BY j.locked_by) r
    ON r.locked_by = w.worker
WHERE CASE WHEN CAST(:viewer AS uuid) IS NULL
           THEN w.stopped_at IS NULL OR w.stopped_at > now() - interval '1 day'
           ELSE r.running > 0 END
ORDER BY w.last_seen_at DESC
LIMIT 200
""")


def scope(viewer: uuid.UUID | None) -> responses.MonitorScope:
    return "fleet" if viewer is None else "owner"


def queue_stats(session: Session, viewer: uuid.UUID | None) -> dict[str, Any]:
    params = {"viewer": viewer}
    rows = session.execute(QUEUE_STATS, params).mappings().all()
    series: dict[str, list[responses.MinuteCount]] = {}
    for queue, minute, count in session.execute(COMPLETED_SERIES, params):
        series.setdefault(queue, []).append(responses.MinuteCount(minute=minute, completed=count))
    items = []
    for r in rows:
        item = dict(r)
        oldest = item["oldest_queued_seconds"]
        item["oldest_queued_seconds"] = float(oldest) if oldest is not None else None
        items.append(responses.QueueRow(**item))
    return responses.QueueStats(scope=scope(viewer), items=items,
                                completed_per_minute=series).dump()


def workers(session: Session, viewer: uuid.UUID | None) -> dict[str, Any]:
    stale = get_settings().stale_after_seconds
    items = []
    for r in session.execute(WORKERS, {"viewer": viewer}).mappings():
        since = float(r["seconds_since_heartbeat"])
        items.append(responses.Worker(
            worker=r["worker"], hostname=r["hostname"], pid=r["pid"], queues=r["queues"],
            started_at=r["started_at"], last_heartbeat_at=r["last_seen_at"],
            seconds_since_heartbeat=round(since, 3),
            alive=r["stopped_at"] is None and since <= stale,
            stopped_at=r["stopped_at"], running=r["running"]))
    return responses.Workers(scope=scope(viewer), items=items).dump()
