"""Plans: hand a goal to the planner, watch the plan run, edit it before approving it.

The plan row and its `plan.generate` job are written in one transaction; everything after
is the job's (tasks.planner.jobs). An edit is checked like the model's plan (every problem
in one 422, nothing written) and stored as a new version with a new approval.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, jsonify, url_for

from app.api.plan_schemas import (
    PlanAccepted,
    PlanCreate,
    PlanEdit,
    PlanList,
    PlanOut,
    PlanSummary,
    edit_as_dicts,
)
from app.api.queries import parse_uuid, project_id_for_owner, require_project
from app.http import db
from app.http.auth import current_owner
from app.http.errors import ApiError, not_found
from app.routes.body import parse_body
from tasks.planner import approval, schema, store

bp = Blueprint("plans", __name__)

# A task's job that ended before the plan's job looked again reads as its job's end.
JOB_ENDS = {"completed": "completed", "failed": "failed", "canceled": "blocked"}


@bp.post("/api/projects/<pid>/plans")
def create_plan(pid: str):
    project = require_project(db.session(), current_owner(), pid)
    body = parse_body(PlanCreate)
    plan_id, job_id = store.create(project.id, name=body.name, goal=body.goal,
                                   repo_url=body.repo_url, github_repo=body.github_repo,
                                   auto_approve=body.auto_approve,
                                   complete_on_merge=body.complete_on_merge)
    out = PlanAccepted(plan_id=plan_id, job_id=job_id,
                       status_url=url_for("plans.get_plan", plan_id=str(plan_id)))
    return jsonify(out.dump()), 202


@bp.get("/api/projects/<pid>/plans")
def list_plans(pid: str):
    project = require_project(db.session(), current_owner(), pid)
    items = [PlanSummary(**{k: row[k] for k in PlanSummary.model_fields})
             for row in map(_with_job_end, store.listing(project.id))]
    return jsonify(PlanList(items=items).dump())


@bp.get("/api/plans/<plan_id>")
def get_plan(plan_id: str):
    return jsonify(_plan_json(_owned(plan_id)))


@bp.put("/api/plans/<plan_id>")
def edit_plan(plan_id: str):
    _owned(plan_id)
    edited = edit_as_dicts(parse_body(PlanEdit))
    tasks, problems = schema.check(edited)
    if problems:
        raise ApiError(422, "invalid_plan", f"the plan has {len(problems)} problem"
                       f"{'s' if len(problems) > 1 else ''}: {problems[0]}"
                       + (" …" if len(problems) > 1 else ""), {"problems": problems})
    approval.edit(plan_id, [t.as_dict() for t in tasks])
    return jsonify(_plan_json(_owned(plan_id)))


def _owned(plan_id: str) -> dict[str, Any]:
    """The caller's plan; another owner's is not found, like a missing one."""
    row = store.load(plan_id) if parse_uuid(plan_id) else None
    if row is None or project_id_for_owner(current_owner(), str(row["project_id"])) is None:
        raise not_found("plan")
    return row


def _with_job_end(row: dict[str, Any]) -> dict[str, Any]:
    """A plan whose job ended without ending the plan (canceled, out of attempts) reads as
    the job's end, with its error."""
    if row["status"] not in store.TERMINAL_PLAN and row["job_status"] in ("failed", "canceled"):
        return {**row, "status": row["job_status"], "error": row["error"] or row["job_error"]}
    return row


def _plan_json(row: dict[str, Any]) -> dict[str, Any]:
    row = _with_job_end(row)
    tasks = store.tasks_of(row["id"], row["version"]) if row["version"] else []
    ended = store.ended_jobs([t["job_id"] for t in tasks if t["status"] == "in_progress"])
    for t in tasks:
        if t["status"] == "in_progress" and t["job_id"] in ended:
            job = ended[t["job_id"]]
            t.update(status=JOB_ENDS[job["status"]], output=job["result"], error=job["last_error"])
    out = PlanOut(**{k: row[k] for k in PlanOut.model_fields if k not in ("tasks", "versions")},
                  tasks=[{k: t[k] for k in ("id", "description", "assigned_to", "status",
                                            "depends_on", "output", "error", "job_id")}
                         for t in tasks],
                  versions=store.versions_of(row["id"]))
    return out.dump()

