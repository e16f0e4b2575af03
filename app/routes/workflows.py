"""Workflows: save a named DAG of job steps (each save of a name is a new, immutable
version), list them, read one, run one and read a run. Validation is tasks.workflows.spec's;
a run is a `workflow.run` job (tasks.workflows.jobs)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, jsonify, request, url_for

from app.api.queries import parse_uuid, project_id_for_owner, require_project
from app.api.schemas import WorkflowRunBody, iso
from app.http import db
from app.http.auth import current_owner
from app.http.errors import ApiError, not_found
from app.routes.body import parse_body
from tasks.engine.enqueue import EnqueueRequest, enqueue
from tasks.workflows import store
from tasks.workflows.dag import RUNNING, StepState, step_status
from tasks.workflows.job_types import job_type_problem, payload_problem
from tasks.workflows.spec import WorkflowSpec, problems

bp = Blueprint("workflows", __name__)


@bp.post("/api/projects/<pid>/workflows")
def save_workflow(pid: str):
    project = require_project(db.session(), current_owner(), pid)
    spec = parse_body(WorkflowSpec)
    if found := problems(spec, job_type_problem, payload_problem):
        raise ApiError(422, "invalid_workflow", f"the workflow has {len(found)} problem"
                       f"{'s' if len(found) > 1 else ''}: {found[0]}" +
                       (" …" if len(found) > 1 else ""), {"problems": found})
    saved = store.save(project.id, spec)
    return jsonify({"id": str(saved.id), "name": spec.name, "version": saved.version}), \
        201 if saved.created else 200


@bp.get("/api/projects/<pid>/workflows")
def list_workflows(pid: str):
    project = require_project(db.session(), current_owner(), pid)
    return jsonify({"items": [{**w, "updated_at": iso(w["updated_at"])}
                              for w in store.listing(project.id)]})


@bp.get("/api/workflows/<wid>")
def get_workflow(wid: str):
    """`?version=n`: that version of the same name instead (a listing gives the newest's id)."""
    stored = _at_version(_owned(wid), _version_arg())
    return jsonify({"id": str(stored.id), "project_id": str(stored.project_id),
                    "name": stored.name, "version": stored.version, "spec": stored.spec,
                    "created_at": iso(stored.created_at)})


def _version_arg() -> int | None:
    raw = request.args.get("version")
    if raw is None:
        return None
    if not raw.isdigit() or not 1 <= int(raw) <= 1_000_000:
        raise ApiError(422, "invalid_request", "version must be a whole number from 1",
                       {"fields": {"version": "not a version number"}})
    return int(raw)


def _at_version(stored: store.Stored, version: int | None) -> store.Stored:
    """The same name's `version`, or `stored` itself when none (or its own) is asked for."""
    if version is None or version == stored.version:
        return stored
    other = store.version_of(stored.project_id, stored.name, version)
    if other is None:
        raise ApiError(422, "invalid_request", f"workflow {stored.name!r} has no version "
                       f"{version}", {"fields": {"version": "no such version"}})
    return other


def _owned(wid: str) -> store.Stored:
    stored = store.get(wid) if parse_uuid(wid) else None
    # Another owner's workflow is not found, like a missing one.
    if stored is None or project_id_for_owner(current_owner(), str(stored.project_id)) is None:
        raise not_found("workflow")
    return stored


@bp.post("/api/workflows/<wid>/runs")
def run_workflow(wid: str):
    stored = _owned(wid)
    body = parse_body(WorkflowRunBody)
    stored = _at_version(stored, body.version)
    payload: dict[str, Any] = {"workflow_id": str(stored.id), "inputs": body.inputs}
    if body.max_parallel is not None:
        payload["max_parallel"] = body.max_parallel
    job = enqueue(EnqueueRequest(stored.project_id, "workflow.run", payload,
                                 idempotency_key=body.idempotency_key))
    return jsonify({"job_id": str(job.job_id),
                    "status_url": url_for("workflows.get_run", jid=str(job.job_id))}), \
        202 if job.created else 200


@bp.get("/api/workflow-runs/<jid>")
def get_run(jid: str):
    job = store.run(jid) if parse_uuid(jid) else None
    if job is None or project_id_for_owner(current_owner(), str(job["project_id"])) is None:
        raise not_found("workflow run")
    stored = store.get(job["payload"]["workflow_id"])
    steps = {}
    for row in store.run_steps(jid):
        state = StepState(row["status"], _text(row["job_id"]), row["output"], row["error"],
                          _text(row["approval_id"]))
        if state.status == RUNNING and step_status(row["job_status"]) != RUNNING:
            # its child ended since the driver last looked
            state.status, state.output = step_status(row["job_status"]), row["job_result"]
        steps[row["name"]] = state.to_json()
    if stored is not None:  # steps the driver has not reached yet are pending
        spec = WorkflowSpec.model_validate(stored.spec)
        steps = {s.name: steps.get(s.name, StepState().to_json()) for s in spec.steps}
    return jsonify({"job_id": jid, "status": job["status"], "error": job["last_error"],
                    "workflow_id": job["payload"]["workflow_id"],
                    "name": stored.name if stored else None,
                    "version": stored.version if stored else None,
                    "inputs": job["payload"].get("inputs", {}),
                    "spec": stored.spec if stored else None,
                    "created_at": iso(job["created_at"]),
                    "completed_at": iso(job["completed_at"]) if job["completed_at"] else None,
                    "steps": steps})


@bp.get("/api/workflows/<wid>/runs")
def list_runs(wid: str):
    stored = _owned(wid)
    rows = store.runs(stored.project_id, stored.id)
    return jsonify({"items": [{"job_id": str(r["id"]), "status": r["status"],
                               "inputs": r["inputs"], "created_at": iso(r["created_at"])}
                              for r in rows]})


def _text(value: object) -> str | None:
    return None if value is None else str(value)
