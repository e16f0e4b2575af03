"""Monitor reads: queues and workers from PostgreSQL (the truth, so history survives restarts)."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import text
from sqlalchemy.orm import Session

from app.schemas import iso
from tasks.settings import get_settings

QUEUE_STATS = text("""
SELECT j.queue, j.job_type,
    count(*) FILTER (WHERE j.status = 'queued' AND j.run_after <= now()) AS queued,
    count(*) FILTER (WHERE j.status = 'queued' AND j.run_after > now()) AS scheduled,
    count(*) FILTER (WHERE j.status = 'running') AS running,
    count(*) FILTER (WHERE j.status = 'waiting') AS waiting,
    count(*) FILTER (WHERE j.status = 'failed' AND j.completed_at > now() - interval '1 hour')
        AS failed_last_hour,
    extract(epoch FROM now() - min(j.run_after)
            FILTER (WHERE j.status = 'queued' AND j.run_after <= now())) AS oldest_queued_seconds,
    count(*) FILTER (WHERE j.status = 'completed' AND j.completed_at > now() - interval '1 minute')
        AS completed_last_minute,
    count(*) FILTER (WHERE j.status = 'completed' AND j.completed_at > now() - interval '1 hour')
        AS completed_last_hour
FROM agent_jobs j JOIN projects p ON p.id = j.project_id
WHERE p.owner_id = :owner
  AND (j.status IN ('queued', 'running', 'waiting') OR j.completed_at > now() - interval '1 hour')
GROUP BY j.queue, j.job_type
ORDER BY j.queue, j.job_type
""")

COMPLETED_SERIES = text("""
SELECT j.queue, date_trunc('minute', j.completed_at) AS minute, count(*)
FROM agent_jobs j JOIN projects p ON p.id = j.project_id
WHERE p.owner_id = :owner AND j.status = 'completed' AND j.completed_at > now() - interval '1 hour'
GROUP BY 1, 2 ORDER BY 1, 2
""")

WORKERS = text("""
SELECT w.worker, w.hostname, w.pid, w.queues, w.started_at, w.last_seen_at, w.stopped_at,
    extract(epoch FROM now() - w.last_seen_at) AS seconds_since_heartbeat,
    (SELECT count(*) FROM agent_jobs j WHERE j.status = 'running' AND j.locked_by = w.worker)
        AS running
FROM worker_heartbeats w
WHERE w.stopped_at IS NULL OR w.stopped_at > now() - interval '1 day'
ORDER BY w.last_seen_at DESC
LIMIT 200
""")


def queue_stats(session: Session, owner: uuid.UUID) -> dict[str, Any]:
    rows = session.execute(QUEUE_STATS, {"owner": owner}).mappings().all()
    series: dict[str, list[dict[str, Any]]] = {}
    for queue, minute, count in session.execute(COMPLETED_SERIES, {"owner": owner}):
        series.setdefault(queue, []).append({"minute": iso(minute), "completed": count})
    items = []
    for r in rows:
        item = dict(r)
        oldest = item["oldest_queued_seconds"]
        item["oldest_queued_seconds"] = float(oldest) if oldest is not None else None
        items.append(item)
    return {"items": items, "completed_per_minute": series}


def workers(session: Session) -> dict[str, Any]:
    stale = get_settings().stale_after_seconds
    items = []
    for r in session.execute(WORKERS).mappings():
        since = float(r["seconds_since_heartbeat"])
        items.append({
            "worker": r["worker"], "hostname": r["hostname"], "pid": r["pid"],
            "queues": r["queues"], "started_at": iso(r["started_at"]),
            "last_heartbeat_at": iso(r["last_seen_at"]),
            "seconds_since_heartbeat": round(since, 3),
            "alive": r["stopped_at"] is None and since <= stale,
            "stopped_at": iso(r["stopped_at"]), "running": r["running"],
        })
    return {"items": items}
