"""A plan waits for a person: a gate approval (action type `plan`, bound to one version's
tasks) in the inbox. An edit before the decision stores a new version and puts a new approval
in the old one's place; the waiting job, woken by the old one's end, finds the new one."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tasks.engine import control, pg
from tasks.engine.context import JobContext
from tasks.planner import store
from tasks.services import approvals

ACTION = "plan"  # a gate: approving a plan executes nothing, it wakes the plan's job


def _new(plan: dict[str, Any], version: int, tasks: Sequence[dict[str, Any]]
         ) -> approvals.NewApproval:
    title = (f"Run plan “{plan['name']}” (version {version}, {len(tasks)} "
             f"task{'s' if len(tasks) != 1 else ''})")
    args = {"plan_id": str(plan["id"]), "version": version, "goal": plan["goal"],
            "tasks": [{k: t[k] for k in ("id", "description", "assigned_to", "depends_on")}
                      for t in tasks]}
    return approvals.NewApproval(ACTION, title[:300], args, on_approve=approvals.GATE)


def ask(plan: dict[str, Any], version: int, tasks: Sequence[dict[str, Any]]) -> str:
    """The approval of `version` (once per job and version), attached to the plan."""
    with pg.transaction():
        approval_id = approvals.create_approval(plan["project_id"], plan["job_id"],
                                                _new(plan, version, tasks), force_new=True)
        store.attach_approval(plan["id"], approval_id)
    return str(approval_id)


def edit(plan_id: str, tasks: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Store edited tasks as the next version and bind a new approval to them, in one
    transaction; PlanConflict if the plan no longer awaits approval. Validation is the
    caller's (tasks.planner.schema.check)."""
    with pg.transaction():
        plan = store.lock_for_edit(plan_id)
        store.supersede_approval(plan["approval_id"])
        version = plan["version"] + 1
        store.save_version(plan_id, version, "edited", "edited before approval", tasks)
        approval_id = approvals.create_approval(plan["project_id"], plan["job_id"],
                                                _new(plan, version, tasks), force_new=True)
        store.attach_approval(plan_id, approval_id)
    if plan["job_id"] is not None:
        control.resume_if_ready(plan["job_id"])  # it waits on the superseded approval
    return {"version": version, "approval_id": str(approval_id)}


def await_decision(ctx: JobContext, plan_id: str) -> dict[str, Any]:
    """Wait until the plan's current approval is decided: {"status": "approved" | "rejected" |
    "expired", "version": the version it was bound to}. A superseded approval is followed
    to the one that replaced it."""
    n = 0
    while True:
        # The plan's current approval: an edit has replaced a superseded one in the same
        # transaction that ended it, so what is read here is never a superseded one.
        state = ctx.step(f"approval:{n}", store.approval_state, plan_id)
        n += 1
        if state["status"] != "pending":
            return state
        # Returns at once if it was decided (or superseded) since the step; else suspends,
        # and the replay after the wake-up comes back here and reads the state again.
        ctx.wait_any([], [state["approval_id"]])
