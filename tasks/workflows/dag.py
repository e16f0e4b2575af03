"""What a DAG run does next, decided from its steps' states alone (no I/O).

tasks.workflows.driver observes the children and approvals, asks `decide` what follows,
and carries it out. Keeping the rule here makes it testable without a database and
keeps it one rule for workflows and plans alike.

A step whose upstream all ended is settled this way:
- an upstream failed or was canceled: the step is skipped (it has no input to run on);
- its condition is false: skipped; an upstream that was skipped reads as null and its
  status as "skipped", so a condition can route around it;
- a condition or payload that cannot be evaluated: the step fails, like a job would;
- otherwise it starts, through an approval first if it requires one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tasks.workflows import conditions
from tasks.workflows.errors import WorkflowError

PENDING, WAITING_APPROVAL, RUNNING = "pending", "waiting_approval", "running"
COMPLETED, FAILED, SKIPPED, CANCELED = "completed", "failed", "skipped", "canceled"
ENDED = frozenset({COMPLETED, FAILED, SKIPPED, CANCELED})
# An upstream in one of these leaves nothing to run on: the dependant is skipped.
BROKEN = frozenset({FAILED, CANCELED})
# A step's child job's status as the step's: a job that has not ended is a running step.
_JOB_ENDS = {"completed": COMPLETED, "failed": FAILED, "canceled": CANCELED}


def step_status(job_status: str) -> str:
    return _JOB_ENDS.get(job_status, RUNNING)


@dataclass(frozen=True)
class Node:
    name: str
    depends_on: tuple[str, ...] = ()
    condition: str | None = None
    on_failure: str = "stop"  # "stop" | "continue"
    requires_approval: bool = False


@dataclass
class StepState:
    status: str = PENDING
    job_id: str | None = None
    output: Any = None
    error: str | None = None
    approval_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "job_id": self.job_id, "output": self.output,
                "error": self.error, "approval_id": self.approval_id}

    @classmethod
    def of(cls, data: Mapping[str, Any]) -> StepState:
        return cls(status=data["status"], job_id=data.get("job_id"), output=data.get("output"),
                   error=data.get("error"), approval_id=data.get("approval_id"))


@dataclass(frozen=True)
class Decision:
    skip: dict[str, str] = field(default_factory=dict)    # name -> why
    fail: dict[str, str] = field(default_factory=dict)    # name -> error
    open: list[str] = field(default_factory=list)         # start now, or ask for the approval
    stop: str | None = None                                # a failed step whose policy is stop
    finished: bool = False


def context(states: Mapping[str, StepState], inputs: Mapping[str, Any]) -> dict[str, Any]:
    """What templates and conditions read: {"inputs", "steps": {name: {status, output}}}."""
    return {"inputs": dict(inputs),
            "steps": {name: {"status": s.status, "output": s.output}
                      for name, s in states.items() if s.status in ENDED}}


def decide(nodes: list[Node], states: Mapping[str, StepState], inputs: Mapping[str, Any],
           max_parallel: int) -> Decision:
    """The next moves, in node order. Settles as many steps as the states allow at once:
    a skip can unblock a dependant in the same call, so it is applied here and looked
    at again, without waiting for a round trip."""
    states = {name: StepState(**vars(s)) for name, s in states.items()}  # our own copy
    skip: dict[str, str] = {}
    fail: dict[str, str] = {}
    for node in nodes:
        state = states[node.name]
        if state.status == FAILED and node.on_failure == "stop":
            return Decision(skip, fail, [], stop=node.name)
    changed = True
    while changed:
        changed = False
        for node in nodes:
            if states[node.name].status != PENDING:
                continue
            ups = [states[d] for d in node.depends_on]
            if any(u.status not in ENDED for u in ups):
                continue
            verdict = _settle(node, states, inputs)
            if verdict is None:
                continue
            kind, why = verdict
            states[node.name].status = kind
            (skip if kind == SKIPPED else fail)[node.name] = why
            changed = True
            if kind == FAILED and node.on_failure == "stop":
                return Decision(skip, fail, [], stop=node.name)
    running = sum(1 for s in states.values() if s.status == RUNNING)
    room = max(0, max_parallel - running)
    ready = [n.name for n in nodes if states[n.name].status == PENDING
             and all(states[d].status in ENDED for d in n.depends_on)]
    opened = ready[:room] if room else []
    finished = not opened and all(s.status in ENDED for s in states.values())
    return Decision(skip, fail, opened, finished=finished)


def _settle(node: Node, states: Mapping[str, StepState],
            inputs: Mapping[str, Any]) -> tuple[str, str] | None:
    """(skipped|failed, why) for a step whose upstream ended, or None: it may start."""
    broken = [d for d in node.depends_on if states[d].status in BROKEN]
    if broken:
        return SKIPPED, f"upstream {broken[0]!r} {states[broken[0]].status}"
    if node.condition is None:
        return None
    try:
        holds = conditions.evaluate(conditions.parse(node.condition), context(states, inputs))
    except WorkflowError as exc:
        return FAILED, f"condition: {exc}"
    return None if holds else (SKIPPED, "condition is false")
