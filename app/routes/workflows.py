"""Workflow definitions: save a named DAG of job steps (each save of a name is a new,
immutable version), list them, read one. Validation is tasks.workflows.spec's; running
them is the next part of issue 12."""

from __future__ import annotations

from flask import Blueprint, jsonify

from app import db
from app.auth import current_owner
from app.errors import ApiError, not_found
from app.queries import parse_uuid, project_id_for_owner, require_project
from app.routes.body import parse_body
from app.schemas import iso
from tasks import registry
from tasks.errors import SwitchyardError
from tasks.workflows import store
from tasks.workflows.spec import WorkflowSpec, problems

bp = Blueprint("workflows", __name__)


def job_type_problem(name: str) -> str | None:
    """None for a job type a client may run; else why not (unknown and internal alike)."""
    try:
        registry.get_public(name)
    except SwitchyardError as exc:
        return str(exc)
    return None


@bp.post("/api/projects/<pid>/workflows")
def save_workflow(pid: str):
    project = require_project(db.session(), current_owner(), pid)
    spec = parse_body(WorkflowSpec)
    if found := problems(spec, job_type_problem):
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
    stored = store.get(wid) if parse_uuid(wid) else None
    # Another owner's workflow is not found, like a missing one.
    if stored is None or project_id_for_owner(current_owner(), str(stored.project_id)) is None:
        raise not_found("workflow")
    return jsonify({"id": str(stored.id), "project_id": str(stored.project_id),
                    "name": stored.name, "version": stored.version, "spec": stored.spec,
                    "created_at": iso(stored.created_at)})
