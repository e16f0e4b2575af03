"""The shapes of the events the engine writes, as JSON text ready for a jsonb parameter."""

from __future__ import annotations

import json

from tasks.engine.status import JobStatus

STEP_STARTED, STEP_COMPLETED, STEP_FAILED = "started", "completed", "failed"


def status_data(new: JobStatus, old: JobStatus | None, reason: str | None = None) -> str:
    """The same shape as tasks.engine.sql.status_event: {"status", "from", "reason"?}."""
    data = {"status": new.value, "from": old.value if old else None}
    if reason:
        data["reason"] = reason
    return json.dumps(data)


def step_data(name: str, seq: int, status: str) -> str:
    return json.dumps({"name": name, "seq": seq, "status": status})


def step_message(name: str, status: str) -> str:
    return f"{name} {status}"
