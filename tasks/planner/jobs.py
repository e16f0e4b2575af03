"""`plan.generate`: a goal → a plan the model wrote and the schema and DAG rules accept
(asked again with the problems, up to three times) → stored as version 1 → a person's
approval unless the plan is auto-approved (edits before it are new versions) → run as a
DAG of jobs by role, re-planned after a task fails for good (tasks.planner.run)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from tasks.engine.context import JobContext, describe_error
from tasks.engine.errors import PermanentError
from tasks.engine.registry import JobType, register
from tasks.planner import approval, generate, prompts, repo, roles, run, store
from tasks.settings import get_settings


class PlanPayload(BaseModel):
    model_config = ConfigDict(extra="forbid")

    plan_id: str = Field(pattern=r"^[0-9a-fA-F-]{36}$")


def load(plan_id: str) -> dict[str, Any]:
    """The plan as the run needs it, and the settings it runs under (recorded: a replay
    keeps them whatever the environment says later)."""
    row = store.load(plan_id)
    if row is None:
        raise PermanentError(f"plan {plan_id} does not exist")
    return {"id": str(row["id"]), "project_id": str(row["project_id"]), "name": row["name"],
            "goal": row["goal"], "repo_url": row["repo_url"], "github_repo": row["github_repo"],
            "auto_approve": row["auto_approve"], "complete_on_merge": row["complete_on_merge"],
            "job_id": str(row["job_id"]),
            "roles": roles.role_map(), "max_revisions": get_settings().plan_max_revisions,
            "max_parallel": get_settings().workflow_parallel}


def handle(ctx: JobContext, p: PlanPayload) -> dict[str, Any]:
    plan = ctx.step("load-plan", load, p.plan_id)
    try:
        return _plan_and_run(ctx, plan)
    except PermanentError as exc:
        # A plain write, not a step: a failing run records nothing more, so a manual retry
        # of the job replays cleanly. Guarded: an ended plan keeps its end.
        store.set_status(plan["id"], "failed", error=describe_error(exc)[:2000])
        raise


def _plan_and_run(ctx: JobContext, plan: dict[str, Any]) -> dict[str, Any]:
    tree = None
    if plan["repo_url"]:
        listed = ctx.step("repo-tree", repo.file_tree, ctx.project_id, ctx.job_id,
                          plan["repo_url"])
        tree = listed["tree"]
        if listed["error"]:
            ctx.emit("log", "the repository could not be read: no file tree",
                     {"level": "warning", "error": listed["error"]})
    tasks = generate.ask_until_valid(
        ctx, "plan", purpose="planner.plan", system=prompts.system(plan["roles"]),
        first=prompts.plan_prompt(plan["goal"], tree),
        context={"goal": plan["goal"], "roles": sorted(plan["roles"]), "file_tree": tree})
    ctx.step("store:v1", store.save_version, plan["id"], 1, "generated", None, tasks)
    version = 1
    if not plan["auto_approve"]:
        ctx.step("ask-approval", approval.ask, plan, 1, tasks)
        decision = approval.await_decision(ctx, plan["id"])
        if decision["status"] == "rejected":
            ctx.step("rejected", store.set_status, plan["id"], "rejected")
            return {"status": "rejected", "version": decision["version"]}
        if decision["status"] != "approved":
            raise PermanentError(f"the plan's approval {decision['status']}: nobody decided "
                                 "in time")
        version = decision["version"]
    return run.execute(ctx, plan, version, tree)


PLAN_GENERATE = register(JobType("plan.generate", PlanPayload, handle, queue="agents",
                                 max_attempts=3, timeout_seconds=1800, public=False))
