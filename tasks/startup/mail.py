"""`email.process_due`, `drip.process_digests`, `drip.process_nudges`: the email outbox sweep
and the daily drips that fill it. Each drip email is keyed by its project and the UTC day it
is queued on, so a re-run that day sends nothing, whatever slot it was enqueued for."""

from __future__ import annotations

from datetime import UTC
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from tasks.engine import pg
from tasks.engine.context import JobContext
from tasks.engine.registry import JobType, register
from tasks.engine.sql import pending_approval
from tasks.services.effects.outbox import enqueue_email, process_due_emails
from tasks.startup.contact import CONFIRMED


class SlotPayload(BaseModel):
    model_config = ConfigDict(extra="forbid")

    slot: str = Field(min_length=1, max_length=40)  # the schedule slot (minute or date) it runs for


def process_due(ctx: JobContext, p: SlotPayload) -> dict[str, Any]:
    return ctx.step("send-due", process_due_emails)


# Drips go only to an address its reader confirmed (startup/contact.py).
CONFIRMED_CONTACT = f"p.settings->>'contact_email' = p.settings->>'{CONFIRMED}'"

DIGEST_SOURCES = f"""
SELECT p.id, p.name, p.settings->>'contact_email' AS contact_email,
    (SELECT count(*) FROM agent_jobs j WHERE j.project_id = p.id AND j.status = 'completed'
       AND j.completed_at > now() - interval '1 day') AS done,
    (SELECT count(*) FROM approvals a WHERE a.project_id = p.id AND {pending_approval("a")})
        AS pending
FROM projects p
WHERE p.owner_id IS NOT NULL AND {CONFIRMED_CONTACT}
ORDER BY p.created_at
"""

NUDGE_SOURCES = f"""
SELECT p.id, p.name, p.settings->>'contact_email' AS contact_email, count(a.id) AS waiting
FROM projects p JOIN approvals a ON a.project_id = p.id
WHERE p.owner_id IS NOT NULL AND {CONFIRMED_CONTACT} AND {pending_approval("a")}
  AND a.created_at < now() - interval '1 day'
GROUP BY p.id, p.name, p.settings
"""


def _today() -> str:
    # Not the payload's slot: a drip enqueued under another slot (any owner may enqueue one)
    # must not send a second digest or nudge the same day.
    return pg.db_now().astimezone(UTC).strftime("%Y-%m-%d")


def _queue_digests() -> int:
    date, queued = _today(), 0
    for row in pg.fetch_dicts(DIGEST_SOURCES):
        pid, name = row["id"], row["name"]
        body = (f"Yesterday on {name}: {row['done']} job(s) completed; {row['pending']} "
                "approval(s) waiting for you.")
        enqueue_email(pid, row["contact_email"], f"{name}: your daily digest", body, "digest",
                      f"digest:{pid}:{date}")
        queued += 1
    return queued


def _queue_nudges() -> int:
    date, queued = _today(), 0
    for row in pg.fetch_dicts(NUDGE_SOURCES):
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
