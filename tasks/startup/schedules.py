"""What beat (and the cron route) enqueues, with stable keys: both together never double-run."""

from __future__ import annotations

import logging
from datetime import datetime

from models.schema import SYSTEM_PROJECT_ID
from tasks.engine import pg
from tasks.engine.enqueue import Enqueued, EnqueueRequest, enqueue_many

log = logging.getLogger(__name__)

DAILY = ("nightshift.cycle_project", "drip.process_digests", "drip.process_nudges")


def requests_for(job_type: str, now: datetime) -> list[EnqueueRequest]:
    date = now.strftime("%Y-%m-%d")
    if job_type == "email.process_due":
        # One per minute: the outbox is swept every minute, and a cron call in the same
        # minute finds the key taken.
        slot = now.strftime("%Y-%m-%dT%H:%M")
        return [EnqueueRequest(SYSTEM_PROJECT_ID, job_type, {"slot": slot},
                               idempotency_key=f"email:{slot}")]
    if job_type == "drip.process_digests":
        return [EnqueueRequest(SYSTEM_PROJECT_ID, job_type, {"slot": date},
                               idempotency_key=f"digests:{date}")]
    if job_type == "drip.process_nudges":
        return [EnqueueRequest(SYSTEM_PROJECT_ID, job_type, {"slot": date},
                               idempotency_key=f"nudges:{date}")]
    if job_type == "nightshift.cycle_project":
        rows = pg.fetch_dicts("SELECT id FROM projects WHERE night_shift AND owner_id IS NOT NULL "
                              "ORDER BY created_at")
        return [EnqueueRequest(r["id"], job_type, {"date": date},
                               idempotency_key=f"nightshift:{r['id']}:{date}") for r in rows]
    raise ValueError(f"{job_type} is not scheduled")


def enqueue_scheduled(job_types: tuple[str, ...] | list[str],
                      now: datetime | None = None) -> dict[str, int]:
    """Enqueue what is due now; returns how many jobs were newly created per type."""
    now = now or pg.db_now()  # the date keys follow the database's clock, whoever fires
    created: dict[str, int] = {}
    for job_type in job_types:
        # One statement per project and one publishing connection for all (the night shift
        # fans out to every project that has it on); a project refused (deleted meanwhile)
        # does not stop the others.
        results = enqueue_many(requests_for(job_type, now))
        for refused in (r for r in results if not isinstance(r, Enqueued)):
            log.warning("a scheduled job was refused: %s", refused,
                        extra={"action": "schedule_refused", "job_type": job_type})
        created[job_type] = sum(r.created for r in results if isinstance(r, Enqueued))
    return created
