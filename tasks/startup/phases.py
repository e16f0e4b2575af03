"""The startup's phases, in order, and the one rule for moving from one to the next.

Every phase packet but the last ends with a `phase_advance` action: approving it
enqueues the next phase's `phase.generate_packet` under the stable key
`phasegen:{project}:{phase}`, so approving twice (two approvals of it, or two people
at once) makes one job, and the project's phase moves when that packet is stored.
"""

from __future__ import annotations

import uuid
from typing import Any

from tasks.engine import pg
from tasks.engine.enqueue import Enqueued, EnqueueRequest, enqueue
from tasks.engine.errors import SwitchyardError
from tasks.engine.status import TERMINAL, sql_list
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


class AlreadyLaunched(SwitchyardError):
    """Launch makes a project's idea packet; a project past its idea phase was launched.
    Launched again, its idea packet put the phase back to idea beside the pending advance
    of the phase it was in, and approving the stale advance answered with the old job."""

    http_status, code = 409, "already_launched"

    def __init__(self, phase: str) -> None:
        super().__init__(f"the project is in its {phase} phase: launch makes the idea packet "
                         "of a project still at idea; move on through the pending phase "
                         "advance in the inbox")
        self.phase = phase

    def details(self) -> dict[str, Any]:
        return {"phase": self.phase}


# The project's newest ended launch: a launch is keyed after it, so launches asked at once
# (a double click) make one job, and one asked after the last ended makes a new one.
_LAST_LAUNCH = f"""
SELECT (SELECT id FROM agent_jobs WHERE project_id = %s AND job_type = 'phase0.generate_packet'
        AND status IN {sql_list(TERMINAL)} ORDER BY created_at DESC LIMIT 1)
"""


def launch(project_id: uuid.UUID, phase: str, payload: dict[str, Any]) -> Enqueued:
    """The project's idea packet job: a new one, or the one already on its way."""
    if phase != PHASES[0]:
        raise AlreadyLaunched(phase)
    last = pg.fetch_value(_LAST_LAUNCH, (str(project_id),))
    return enqueue(EnqueueRequest(project_id, "phase0.generate_packet", payload,
                                  idempotency_key=f"launch:{project_id}:after:{last or 'none'}"))
