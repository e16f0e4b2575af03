"""The shapes of the step events the engine writes, as JSON text ready for a jsonb parameter
(status events are built in SQL: tasks.engine.sql.status_data)."""

from __future__ import annotations

import json

STEP_STARTED, STEP_COMPLETED, STEP_FAILED = "started", "completed", "failed"


def step_data(name: str, seq: int, status: str) -> str:
    return json.dumps({"name": name, "seq": seq, "status": status})


def step_message(name: str, status: str) -> str:
    return f"{name} {status}"
