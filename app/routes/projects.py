"""Projects: create, list, read. Another owner's project is a 404."""

from __future__ import annotations

from flask import Blueprint, jsonify

from app.api.queries import (
    list_projects,
    project_json,
    require_project,
    require_room_for_a_project,
)
from app.api.schemas import ProjectCreate, ProjectSettings, ProjectUpdate
from app.http import db
from app.http.auth import current_owner
from app.http.errors import ApiError
from app.routes.body import parse_body
from models import Project
from tasks.services.effects.policy import operator, violations

bp = Blueprint("projects", __name__)


@bp.post("/api/projects")
def create_project():
    body = parse_body(ProjectCreate)
    within_operator_policy(body.settings)
    session = db.session()
    require_room_for_a_project(session, current_owner())
    project = Project(owner_id=current_owner(), name=body.name, goal=body.goal,
                      night_shift=body.night_shift,
                      settings=body.settings.applied_to({}) if body.settings else {})
    session.add(project)
    session.commit()
    return jsonify(project_json(project)), 201


@bp.get("/api/projects")
def get_projects():
    return jsonify({"items": [project_json(p) for p in
                              list_projects(db.session(), current_owner())]})


@bp.get("/api/projects/<pid>")
def get_project(pid: str):
    return jsonify(project_json(require_project(db.session(), current_owner(), pid)))


@bp.patch("/api/projects/<pid>")
def update_project(pid: str):
    session = db.session()
    project = require_project(session, current_owner(), pid)
    body = parse_body(ProjectUpdate)
    within_operator_policy(body.settings)
    for field in ("name", "goal", "night_shift"):
        if field in body.model_fields_set and getattr(body, field) is not None:
            setattr(project, field, getattr(body, field))
    if body.settings is not None:
        project.settings = body.settings.applied_to(project.settings)
    session.commit()
    return jsonify(project_json(project))


def within_operator_policy(settings: ProjectSettings | None) -> None:
    """422 naming each permission or cap the operator does not allow; nothing is written."""
    if settings is None:
        return
    problems = violations(settings.model_dump(exclude_none=True), operator())
    if problems:
        summary = "; ".join(f"{k}: {v}" for k, v in problems.items())
        raise ApiError(422, "validation_error", f"invalid request body: {summary}",
                       {"fields": problems})
