"""What a workflow step may run: one home for the rule the save (a 422) and the run (a
failed step) both apply."""

from __future__ import annotations

from typing import Any

from tasks.engine import registry
from tasks.engine.errors import SwitchyardError


def job_type_problem(name: str) -> str | None:
    """None for a job type a client may run; else why not (unknown and internal alike)."""
    try:
        registry.get_public(name)
    except SwitchyardError as exc:
        return str(exc)
    return None


def payload_problem(name: str, payload: dict[str, Any]) -> str | None:
    """None when job type `name` takes `payload` as a run spawns it; else why not."""
    try:
        registry.get_public(name).parse(payload)
    except SwitchyardError as exc:
        return str(exc)
    return None
