"""Running a plan: each version's tasks driven as a DAG (tasks.workflows.driver is the
watcher), each task's job chosen by its role and prompted by the prompter, statuses mirrored
into plan_tasks; a task failed for good asks the model for a revision of what remains
(completed tasks kept), up to the plan's limit, and the run goes on with it."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from tasks.engine import registry
from tasks.engine.context import JobContext
from tasks.engine.errors import PermanentError
from tasks.planner import generate, prompts, roles, store
from tasks.planner.prompter import Prior, build_prompt
from tasks.planner.watch import task_states
from tasks.workflows.driver import Node, StepState, drive
from tasks.workflows.errors import WorkflowError


class PlanFailed(PermanentError):
    """The plan cannot go on: a task failed and no revision is left (or none was valid)."""


def resolver(plan: dict[str, Any], tasks: list[dict[str, Any]], tree: str | None
             ) -> Callable[[Node, dict[str, StepState]], tuple[str, dict[str, Any]]]:
    """The prompter and the role map, as the driver's resolve(): called when a task starts,
    its prerequisites' outputs in `steps`."""
    by_id = {t["id"]: t for t in tasks}
    facts = roles.Facts(plan["repo_url"], plan["github_repo"], plan["complete_on_merge"])

    def resolve(node: Node, steps: dict[str, StepState]) -> tuple[str, dict[str, Any]]:
        task = by_id[node.name]
        priors = [Prior(dep, by_id[dep]["description"], steps[dep].output)
                  for dep in node.depends_on if dep in steps]
        prompt = build_prompt(plan["goal"], task["id"], task["description"], priors, tree)
        chosen = roles.dispatch(task["assigned_to"], prompt, task["description"], facts,
                                plan["roles"])
        try:  # a role mapped to a job type that cannot run this: the task fails, not the plan
            registry.get(chosen.job_type).parse(chosen.payload)
        except PermanentError as exc:
            raise WorkflowError(f"role {task['assigned_to']!r}: {exc}") from None
        return chosen.job_type, chosen.payload

    return resolve


def _mirror(plan_id: str, version: int, deps: dict[str, list[str]],
            steps: dict[str, StepState]) -> None:
    store.mirror(plan_id, version, task_states(steps, deps))


def execute(ctx: JobContext, plan: dict[str, Any], version: int, tree: str | None
            ) -> dict[str, Any]:
    plan_id = plan["id"]
    ctx.step("run", store.set_status, plan_id, "running")
    done: dict[str, StepState] = {}
    revisions = 0
    while True:
        tasks = ctx.step(f"tasks:v{version}", store.tasks_of, plan_id, version)
        deps = {t["id"]: list(t["depends_on"]) for t in tasks}
        nodes = [Node(t["id"], tuple(t["depends_on"])) for t in tasks]
        outcome = drive(ctx, nodes, resolver(plan, tasks, tree), key=f"v{version}",
                        done=dict(done) or None, max_parallel=plan["max_parallel"],
                        on_change=partial(_mirror, plan_id, version, deps))
        # Already in plan_tasks: the driver's last round mirrored these very states.
        final = task_states(outcome.steps, deps)
        if outcome.status == "completed":
            ctx.step("completed", store.set_status, plan_id, "completed")
            return {"status": "completed", "version": version, "revisions": revisions,
                    "outputs": {k: s["output"] for k, s in final.items()}}
        failed = outcome.failed or next(k for k, s in final.items() if s["status"] == "failed")
        why = f"task {failed!r} failed: {final[failed]['error'] or 'no error recorded'}"
        if revisions >= plan["max_revisions"]:
            raise PlanFailed(f"{why}; no revision left (at most {plan['max_revisions']})")
        kept = [{**t, "status": "completed", "output": final[t["id"]]["output"],
                 "job_id": final[t["id"]]["job_id"]}
                for t in tasks if final[t["id"]]["status"] == "completed"]
        revised = revise(ctx, plan, revisions + 1, tasks, final, failed)
        version, revisions = version + 1, revisions + 1
        ctx.step(f"store:v{version}", store.save_version, plan_id, version, "revised",
                 why, kept + revised)
        ctx.emit("log", f"plan revised after {why}: version {version}, "
                 f"{len(revised)} new tasks", {"version": version, "failed": failed})
        done |= {t["id"]: outcome.steps[t["id"]] for t in kept if t["id"] in outcome.steps}


def revise(ctx: JobContext, plan: dict[str, Any], n: int, tasks: list[dict[str, Any]],
           final: dict[str, dict[str, Any]], failed: str) -> list[dict[str, Any]]:
    """The model's revision of the tasks that did not complete (validated like a plan)."""
    completed = [{**t, "output": final[t["id"]]["output"]} for t in tasks
                 if final[t["id"]]["status"] == "completed"]
    remaining = [t for t in tasks if final[t["id"]]["status"] != "completed"
                 and t["id"] != failed]
    failure = {**next(t for t in tasks if t["id"] == failed), "error": final[failed]["error"]}
    try:
        return generate.ask_until_valid(
            ctx, f"revise:{n}", purpose="planner.revise",
            system=prompts.system(plan["roles"], revise=True),
            first=prompts.revise_prompt(plan["goal"], completed, failure, remaining),
            context={"goal": plan["goal"], "roles": sorted(plan["roles"]),
                     "completed": [t["id"] for t in completed], "failed": failure,
                     "remaining": remaining},
            kept=[t["id"] for t in completed])
    except generate.InvalidPlan as exc:
        raise PlanFailed(f"task {failed!r} failed and the revision was not valid: {exc}"
                         ) from None
