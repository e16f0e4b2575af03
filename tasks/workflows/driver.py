"""The DAG driver: each step of a run is a child job; the run waits for any to end.

One round: observe the children and approval gates (a recorded step), decide what follows
(tasks.workflows.dag, pure), carry it out (spawns and approvals are recorded steps too),
mirror the states to workflow_run_steps, then wait for one child to end or one gate to
be decided. After a crash or a wake-up the job replays its rounds from the record and
goes on where it stopped, so no step is started twice. Workflows and plans share it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tasks.engine import control, pg
from tasks.engine.context import JobContext
from tasks.engine.sql import approval_status
from tasks.services import approvals
from tasks.workflows.dag import (
    CANCELED,
    ENDED,
    FAILED,
    PENDING,
    RUNNING,
    SKIPPED,
    WAITING_APPROVAL,
    Node,
    StepState,
    decide,
    step_status,
)
from tasks.workflows.errors import WorkflowError

GATE_ACTION = "workflow_step"  # a gated step's approval: it runs nothing, it wakes the run

# (node, the states so far) -> (job type, payload): called once, when the node opens.
Resolve = Callable[[Node, dict[str, StepState]], tuple[str, dict[str, Any]]]
OnChange = Callable[[dict[str, StepState]], None]


@dataclass(frozen=True)
class Outcome:
    status: str  # "completed" | "failed"
    steps: dict[str, StepState]
    failed: str | None = None  # the step whose failure stopped the run


def drive(ctx: JobContext, nodes: list[Node], resolve: Resolve, *, key: str,
          done: dict[str, StepState] | None = None, max_parallel: int = 4,
          gate_title: Callable[[Node, dict[str, Any]], str] | None = None,
          on_change: OnChange | None = None,
          inputs: dict[str, Any] | None = None) -> Outcome:
    """Run `nodes` to the end; `key` names this drive's steps (one job may drive several)."""
    states = {n.name: StepState() for n in nodes}
    states.update(done or {})
    by_name = {n.name: n for n in nodes}
    title = gate_title or (lambda node, _: f"Run workflow step {node.name!r}")
    rounds = 0
    while True:
        seen = ctx.step(f"{key}:observe:{rounds}", lambda: _observe(str(ctx.job_id), states))
        for name, data in seen.items():
            states[name] = StepState.of(data)
        decision = decide(nodes, states, inputs or {}, max_parallel)
        for name, why in decision.skip.items():
            states[name] = StepState(SKIPPED, error=why)
        for name, why in decision.fail.items():
            states[name] = StepState(FAILED, error=why)
        ready = {name: job for name in decision.open
                 if (job := _open(ctx, key, by_name[name], states, resolve, title))}
        _spawn(ctx, ready, states)
        if decision.stop is not None:
            _stop(ctx, key, rounds, states)
        ctx.step(f"{key}:mirror:{rounds}", lambda: _mirror(str(ctx.job_id), states, on_change))
        if decision.stop is not None:
            return Outcome("failed", states, failed=decision.stop)
        if any(states[name].status == FAILED for name in decision.open):
            # A step failed as it opened (its payload did not resolve): the decision above
            # did not know. Decide again now, under that step's policy, without waiting.
            rounds += 1
            continue
        if decision.finished:  # failures under policy "continue" do not fail the run
            return Outcome("completed", states)
        children = [s.job_id for s in states.values() if s.status == RUNNING and s.job_id]
        gates = [s.approval_id for s in states.values()
                 if s.status == WAITING_APPROVAL and s.approval_id]
        if not ctx.replaying:  # a recorded next round says the wait already returned
            ctx.wait_any(children, gates)
        rounds += 1


def _open(ctx: JobContext, key: str, node: Node, states: dict[str, StepState],
          resolve: Resolve, title: Callable[[Node, dict[str, Any]], str]
          ) -> dict[str, Any] | None:
    """Resolve the step, or ask for its approval. Its payload is resolved once, recorded, and
    is what the approval shows and what runs: approving binds to exactly that payload.
    Returns the job to spawn with the round's others (`_spawn`), else None."""
    def resolved() -> dict[str, Any]:
        try:
            job_type, payload = resolve(node, states)
        except WorkflowError as exc:
            return {"error": str(exc)}
        return {"job_type": job_type, "payload": payload}

    approved = states[node.name].approval_id
    if approved is not None:
        job = ctx.step(f"{key}:approved:{node.name}", lambda: _approved_job(approved))
    else:
        job = ctx.step(f"{key}:resolve:{node.name}", resolved)
    if "error" in job:
        states[node.name] = StepState(FAILED, error=job["error"])
        return None
    if node.requires_approval and approved is None:
        args = {"run_job_id": str(ctx.job_id), "step": node.name, **job}
        action = approvals.NewApproval(GATE_ACTION, title(node, job), args,
                                         on_approve=approvals.GATE)
        approval = ctx.step(f"{key}:gate:{node.name}", lambda: str(
            approvals.create_approval(ctx.project_id, ctx.job_id, action, force_new=True)))
        states[node.name] = StepState(WAITING_APPROVAL, approval_id=approval)
        return None
    if (recorded := ctx.peek()) is not None and recorded.name.startswith("spawn:"):
        # A run recorded before spawns were batched spawned each child right after resolving
        # it, and replays the same way (the keys are the same either way: child:<run>:<n>).
        child = ctx.spawn(job["job_type"], job["payload"])
        states[node.name] = StepState(RUNNING, job_id=child, approval_id=approved)
        return None
    return job


def _spawn(ctx: JobContext, ready: dict[str, dict[str, Any]],
           states: dict[str, StepState]) -> None:
    """Spawn the resolved steps' children as one recorded step: one statement and one
    publish for the round's whole fan-out, not one of each per child."""
    if not ready:
        return
    children = ctx.spawn_many([(job["job_type"], job["payload"]) for job in ready.values()])
    for name, child in zip(ready, children, strict=True):
        states[name] = StepState(RUNNING, job_id=child, approval_id=states[name].approval_id)


def _approved_job(approval_id: str) -> dict[str, Any]:
    """The job exactly as the person approved it (the gate's recorded arguments)."""
    row = pg.fetch_one_dict("SELECT action_args FROM approvals "
                            "WHERE id = %s AND status = 'approved'", (approval_id,))
    if row is None:
        return {"error": "the approval is no longer approved"}
    args = row["action_args"]
    return {"job_type": args["job_type"], "payload": args["payload"]}


def _stop(ctx: JobContext, key: str, rounds: int, states: dict[str, StepState]) -> None:
    """A step failed under policy stop: cancel what still runs, leave nothing pending."""
    running = [s.job_id for s in states.values() if s.status == RUNNING and s.job_id]
    ctx.step(f"{key}:cancel:{rounds}", lambda: [str(c) for r in running
                                                for c in control.cancel_tree(r)])
    for name, state in states.items():
        if state.status not in ENDED:
            states[name] = StepState(CANCELED, job_id=state.job_id, error="the run stopped")


# The children's and gates' news since the last round: only steps that are under way.
OBSERVE = f"""
SELECT 'job' AS kind, id::text AS id, status, result, last_error AS error
FROM agent_jobs WHERE id = ANY(%(jobs)s::uuid[]) AND parent_job_id = %(run)s
UNION ALL
SELECT 'approval', o.id::text, {approval_status("o")}, NULL, NULL FROM approvals o
WHERE o.id = ANY(%(approvals)s::uuid[])
"""


def _observe(run_id: str, states: dict[str, StepState]) -> dict[str, dict[str, Any]]:
    by_job = {s.job_id: n for n, s in states.items() if s.status == RUNNING and s.job_id}
    by_gate = {s.approval_id: n for n, s in states.items()
               if s.status == WAITING_APPROVAL and s.approval_id}
    if not by_job and not by_gate:
        return {}
    rows = pg.fetch_dicts(OBSERVE, {"jobs": list(by_job), "approvals": list(by_gate),
                                    "run": run_id})
    changed: dict[str, dict[str, Any]] = {}
    for row in rows:
        if row["kind"] == "job":
            name = by_job[row["id"]]
            status = step_status(row["status"])
            if status != RUNNING:
                changed[name] = StepState(status, job_id=row["id"], output=row["result"],
                                          error=row["error"],
                                          approval_id=states[name].approval_id).to_json()
            continue
        name = by_gate[row["id"]]
        if row["status"] == "approved":
            # Back to pending with its approval: the next decision opens it, and _open
            # spawns the recorded payload instead of asking again.
            changed[name] = StepState(PENDING, approval_id=row["id"]).to_json()
        elif row["status"] != "pending":
            changed[name] = StepState(FAILED, error=f"the approval was {row['status']}",
                                      approval_id=row["id"]).to_json()
    return changed


UPSERT = """
INSERT INTO workflow_run_steps (run_job_id, name, status, job_id, approval_id, output, error)
SELECT %(run)s, s.name, s.status, s.job_id, s.approval_id, s.output, s.error
FROM jsonb_to_recordset(%(steps)s::jsonb)
    AS s(name text, status text, job_id uuid, approval_id uuid, output jsonb, error text)
ON CONFLICT (run_job_id, name) DO UPDATE SET status = EXCLUDED.status,
    job_id = EXCLUDED.job_id, approval_id = EXCLUDED.approval_id, output = EXCLUDED.output,
    error = EXCLUDED.error, updated_at = now()
"""


def _mirror(run_id: str, states: dict[str, StepState], on_change: OnChange | None) -> None:
    rows = [{"name": name, **s.to_json()} for name, s in states.items()]
    pg.execute(UPSERT, {"run": run_id, "steps": json.dumps(rows)})
    if on_change is not None:
        on_change(states)
