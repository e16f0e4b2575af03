"""The shapes of the step events the engine writes, as JSON text ready for a jsonb parameter
(status events are built in SQL: tasks.engine.sql.status_data; the one a run ends with
carries its last step's outcome as `step`)."""

from __future__ import annotations

import json

STEP_STARTED, STEP_COMPLETED, STEP_FAILED = "started", "completed", "failed"


def step_data(name: str, seq: int, status: str, next_step: tuple[int, str] | None = None) -> str:
    """A step event's data. `next_step` (seq, name): the step the same statement started, so
    a step's outcome event also announces the next one's start (issue 26: a step owes one
    event, its outcome; a separate `started` is written only for a step still running
    after tasks.engine.start_watch.WRITE_AFTER)."""
    data: dict[str, object] = {"name": name, "seq": seq, "status": status}
    if next_step is not None:
        data["next"] = {"seq": next_step[0], "name": next_step[1]}
    return json.dumps(data)


def step_of(type_: str, data: dict | None) -> dict | None:
    """The step data an event carries, if any: a `step` event's own, or the `step` a job's
    `status` event carries (the outcome of the step its move ended with)."""
    if not data:
        return None
    if type_ == "step":
        return data
    return data.get("step") if type_ == "status" else None


def step_message(name: str, status: str) -> str:
    return f"{name} {status}"
