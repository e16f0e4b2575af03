"""The startup's phases, in order, and the one rule for moving from one to the next.

Every phase packet but the last ends with a `phase_advance` action: approving it
enqueues the next phase's `phase.generate_packet` under the stable key
`phasegen:{project}:{phase}`, so approving twice (two approvals of it, or two people
at once) makes one job, and the project's phase moves when that packet is stored.
"""

from __future__ import annotations

import uuid
from typing import Any

from tasks.engine.enqueue import EnqueueRequest
from tasks.services import approvals

PHASES = ("idea", "validation", "build", "launch", "growth")
LAST = len(PHASES) - 1
ADVANCE = "phase_advance"  # the action type; it is no effect: nothing leaves Switchyard


def name(phase: int) -> str:
    return PHASES[phase]


def advance_action(phase: int) -> dict[str, Any] | None:
    """The action that closes phase `phase`'s packet (None for the last phase)."""
    if phase >= LAST:
        return None
    return {"type": ADVANCE, "title": f"Move on to the {PHASES[phase + 1]} phase",
            "args": {"from": phase, "to": phase + 1}}


def with_advance(packet: dict[str, Any], phase: int) -> dict[str, Any]:
    advance = advance_action(phase)
    return packet if advance is None else {**packet, "actions": [*packet["actions"], advance]}


def approval_for(project_id: uuid.UUID | str, action: dict[str, Any]) -> approvals.NewApproval:
    """A packet's action to approve: approving an advance enqueues the next packet, any
    other action is an effect."""
    args = action.get("args", {})
    on_approve = (approvals.run_job(next_packet(project_id, args))
                  if action["type"] == ADVANCE else approvals.EFFECT)
    return approvals.NewApproval(action["type"], action["title"], args, on_approve)


def next_packet(project_id: uuid.UUID | str, args: dict[str, Any]) -> EnqueueRequest:
    """What approving a phase advance enqueues."""
    to = int(args["to"])
    return EnqueueRequest(project_id=project_id, job_type="phase.generate_packet",
                          payload={"phase": to}, idempotency_key=f"phasegen:{project_id}:{to}")
