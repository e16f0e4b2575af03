"""`email.process_due`, `drip.process_digests`, `drip.process_nudges`: the email outbox sweep
and the daily drips that fill it. The drips run hourly; each project gets its email once its
local clock (its `timezone`) reaches the daily hour, keyed by the project and its local date,
so a re-run that day sends nothing, whatever slot it was enqueued for."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from tasks.engine import pg
from tasks.engine.context import JobContext
from tasks.engine.registry import JobType, register
from tasks.engine.sql import pending_approval
from tasks.services.effects.outbox import enqueue_email, process_due_emails
from tasks.settings import get_settings
from tasks.startup.contact import CONFIRMED
from tasks.startup.local_days import local_day, zone


class SlotPayload(BaseModel):
    model_config = ConfigDict(extra="forbid")

    slot: str = Field(min_length=1, max_length=40)  # the schedule slot (minute or date) it runs for


def process_due(ctx: JobContext, p: SlotPayload) -> dict[str, Any]:
    return ctx.step("send-due", process_due_emails)


# Drips go only to an address its reader confirmed (startup/contact.py).
CONFIRMED_CONTACT = f"p.settings->>'contact_email' = p.settings->>'{CONFIRMED}'"

DIGEST_SOURCES = f"""
SELECT p.id, p.name, p.settings->>'contact_email' AS contact_email,
    p.settings->>'timezone' AS tz,
    (SELECT count(*) FROM agent_jobs j WHERE j.project_id = p.id AND j.status = 'completed'
       AND j.completed_at > now() - interval '1 day') AS done,
    (SELECT count(*) FROM approvals a WHERE a.project_id = p.id AND {pending_approval("a")})
        AS pending
FROM projects p
WHERE p.owner_id IS NOT NULL AND {CONFIRMED_CONTACT}
ORDER BY p.created_at
"""

NUDGE_SOURCES = f"""
SELECT p.id, p.name, p.settings->>'contact_email' AS contact_email,
    p.settings->>'timezone' AS tz, count(a.id) AS waiting
FROM projects p JOIN approvals a ON a.project_id = p.id
WHERE p.owner_id IS NOT NULL AND {CONFIRMED_CONTACT} AND {pending_approval("a")}
  AND a.created_at < now() - interval '1 day'
GROUP BY p.id, p.name, p.settings
"""


def _due(rows: list[dict[str, Any]], now: datetime | None
         ) -> list[tuple[dict[str, Any], str]]:
    """The projects whose local clock has reached the daily hour, each with its local date.
    The date, not the payload's slot, keys the email: a drip enqueued under another slot (any
    owner may enqueue one) or in a later hour must not send a second one that day."""
    now, daily = now or pg.db_now(), get_settings().daily_hour
    return [(row, day) for row in rows
            if (day := local_day(now, zone(row["tz"]), daily)) is not None]


def _queue_digests(now: datetime | None = None) -> int:
    queued = 0
    for row, date in _due(pg.fetch_dicts(DIGEST_SOURCES), now):
        pid, name = row["id"], row["name"]
        body = (f"Yesterday on {name}: {row['done']} job(s) completed; {row['pending']} "
                "approval(s) waiting for you.")
        enqueue_email(pid, row["contact_email"], f"{name}: your daily digest", body, "digest",
                      f"digest:{pid}:{date}")
        queued += 1
    return queued


def _queue_nudges(now: datetime | None = None) -> int:
    queued = 0
    for row, date in _due(pg.fetch_dicts(NUDGE_SOURCES), now):
        pid = row["id"]
        enqueue_email(pid, row["contact_email"],
                      f"{row['name']}: {row['waiting']} action(s) need your approval",
                      "Your agents are waiting for a decision in the inbox.", "nudge",
                      f"nudge:{pid}:{date}")
        queued += 1
    return queued


def digests(ctx: JobContext, p: SlotPayload) -> dict[str, int]:
    return {"queued": ctx.step("queue-digests", _queue_digests)}


def nudges(ctx: JobContext, p: SlotPayload) -> dict[str, int]:
    return {"queued": ctx.step("queue-nudges", _queue_nudges)}


EMAIL = register(JobType("email.process_due", SlotPayload, process_due, queue="io",
                          public=False))
DIGESTS = register(JobType("drip.process_digests", SlotPayload, digests, queue="io",
                            public=False))
NUDGES = register(JobType("drip.process_nudges", SlotPayload, nudges, queue="io",
                           public=False))
