"""The monitor's schedules: each project's daily runs (night shift, digest, nudge) with its
time zone and the next runs, by the scheduler's own rule (tasks.startup.local_days)."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import text
from sqlalchemy.orm import Session

from app.api import responses
from tasks.settings import get_settings
from tasks.startup.contact import CONFIRMED
from tasks.startup.local_days import TICK_MINUTE, next_runs, zone

# A tenant sees its own projects; an admin token (viewer None) every owned one.
PROJECTS = text(f"""
SELECT p.id, p.name, p.night_shift, p.settings->>'timezone' AS tz,
    coalesce(p.settings->>'contact_email' = p.settings->>'{CONFIRMED}', false) AS mails,
    now() AS now
FROM projects p
WHERE p.owner_id IS NOT NULL AND (CAST(:viewer AS uuid) IS NULL OR p.owner_id = :viewer)
ORDER BY p.created_at
LIMIT 500
""")


def schedules(session: Session, viewer: uuid.UUID | None) -> dict[str, Any]:
    hour = get_settings().daily_hour
    items = []
    for p in session.execute(PROJECTS, {"viewer": viewer}).mappings():
        kinds = (["nightshift.cycle_project"] if p["night_shift"] else []) + (
            ["drip.process_digests", "drip.process_nudges"] if p["mails"] else [])
        tz = zone(p["tz"])
        for kind in kinds:
            minute = TICK_MINUTE[kind]
            items.append(responses.Schedule(
                project_id=p["id"], project_name=p["name"], schedule=kind, timezone=tz.key,
                local_time=f"{hour:02d}:{minute:02d}",
                next_runs=next_runs(p["now"], tz, hour, minute)))
    return responses.ScheduleList(items=items).dump()
