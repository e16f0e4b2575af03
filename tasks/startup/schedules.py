"""What beat (and the cron route) enqueues, with stable keys: both together never double-run.

The daily schedules tick every hour; a project is due once its local clock (its `timezone`
setting) reaches SWITCHYARD_DAILY_HOUR, and is keyed by its local date (tasks.startup.local_days).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from models.schema import SYSTEM_PROJECT_ID
from tasks.engine import pg
from tasks.engine.enqueue import Enqueued, EnqueueRequest, enqueue_many
from tasks.settings import get_settings
from tasks.startup.local_days import local_day, zone

log = logging.getLogger(__name__)

DAILY = ("nightshift.cycle_project", "drip.process_digests", "drip.process_nudges")


def requests_for(job_type: str, now: datetime) -> list[EnqueueRequest]:
    # The drips run every hour and send to each project due then (tasks.startup.mail), so
    # their own keys are the UTC hour's.
    hour = now.astimezone(UTC).strftime("%Y-%m-%dT%H")
    if job_type == "email.process_due":
        # One per minute: the outbox is swept every minute, and a cron call in the same
        # minute finds the key taken.
        slot = now.strftime("%Y-%m-%dT%H:%M")
        return [EnqueueRequest(SYSTEM_PROJECT_ID, job_type, {"slot": slot},
                               idempotency_key=f"email:{slot}")]
    if job_type == "drip.process_digests":
        return [EnqueueRequest(SYSTEM_PROJECT_ID, job_type, {"slot": hour},
                               idempotency_key=f"digests:{hour}")]
    if job_type == "drip.process_nudges":
        return [EnqueueRequest(SYSTEM_PROJECT_ID, job_type, {"slot": hour},
                               idempotency_key=f"nudges:{hour}")]
    if job_type == "nightshift.cycle_project":
        # Each project at its own local hour, once per its local date (local_days).
        daily = get_settings().daily_hour
        rows = pg.fetch_dicts("SELECT id, settings->>'timezone' AS tz FROM projects "
                              "WHERE night_shift AND owner_id IS NOT NULL ORDER BY created_at")
        due = [(r["id"], day) for r in rows
               if (day := local_day(now, zone(r["tz"]), daily)) is not None]
        return [EnqueueRequest(pid, job_type, {"date": day},
                               idempotency_key=f"nightshift:{pid}:{day}") for pid, day in due]
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
