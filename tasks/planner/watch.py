"""The watcher's view of a plan version: the DAG driver's step states as plan task statuses
(pending, ready, in_progress, completed, failed, blocked). Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

# The driver's step status -> the plan task's. A gate awaiting a person is ready to go;
# a skipped or canceled task will not run in this version: it is blocked.
STATUS = {"pending": "pending", "ready": "ready", "waiting_approval": "ready",
          "running": "in_progress", "completed": "completed", "failed": "failed",
          "skipped": "blocked", "canceled": "blocked"}


def task_states(steps: Mapping[str, Any], deps: Mapping[str, Sequence[str]]
                ) -> dict[str, dict[str, Any]]:
    """Each task's {"status", "job_id", "output", "error"} from the driver's StepStates.

    A task still pending is `blocked` when a prerequisite failed or is blocked (directly
    or further up), `ready` when every prerequisite completed."""
    states = {name: {"status": STATUS.get(s.status, "pending"), "job_id": s.job_id,
                     "output": s.output, "error": s.error} for name, s in steps.items()}
    for name in deps:
        states.setdefault(name, {"status": "pending", "job_id": None, "output": None,
                                 "error": None})
    changed = True
    while changed:  # blocked spreads down the graph; a plan is small
        changed = False
        for name, state in states.items():
            if state["status"] not in ("pending", "ready"):
                continue
            ups = [states[d]["status"] for d in deps.get(name, ()) if d in states]
            new = "blocked" if any(u in ("failed", "blocked") for u in ups) else (
                "ready" if all(u == "completed" for u in ups) else "pending")
            if new != state["status"]:
                state["status"], changed = new, True
    return states
