"""Projects: create, list, read. Another owner's project is a 404."""

from __future__ import annotations

import html
import logging
import uuid

from flask import Blueprint, Response, jsonify, request

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
from tasks.settings import get_settings
from tasks.startup import contact

bp = Blueprint("projects", __name__)
log = logging.getLogger(__name__)


@bp.post("/api/projects")
def create_project():
    body = parse_body(ProjectCreate)
    within_operator_policy(body.settings)
    session = db.session()
    require_room_for_a_project(current_owner())
    project = Project(owner_id=current_owner(), name=body.name, goal=body.goal,
                      night_shift=body.night_shift,
                      settings=body.settings.applied_to({}) if body.settings else {})
    session.add(project)
    session.commit()
    confirm_new_contact(project, None)
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
    before = (project.settings or {}).get("contact_email")
    if body.settings is not None:
        project.settings = body.settings.applied_to(project.settings)
    session.commit()
    confirm_new_contact(project, before)
    return jsonify(project_json(project))


def confirm_new_contact(project: Project, before: str | None) -> None:
    """A new contact address is mailed its confirmation link; the drips wait for it. The link
    names SWITCHYARD_PUBLIC_URL, never the request's Host (a caller's header would send the
    token wherever it likes); without it no link is mailed, and the drips never start."""
    email = (project.settings or {}).get("contact_email")
    if not email or email == before or email == project.settings.get(contact.CONFIRMED):
        return
    public_url = get_settings().public_url
    if not public_url:
        log.warning("contact_email of project %s is not confirmed: set SWITCHYARD_PUBLIC_URL "
                    "for its confirmation link", project.id)
        return
    contact.request_confirmation(str(project.id), email, public_url)


PAGE = """<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>Confirm this address · Switchyard</title></head><body>
<h1>Confirm this address</h1>
<p>Someone asked Switchyard to send this address a daily digest of their project.</p>
<form method="post"><input type="hidden" name="project" value="{project}">
<input type="hidden" name="token" value="{token}">
<button type="submit">Yes, send the digests here</button></form>
<p>If this was not you, close this page: nothing will be sent.</p></body></html>"""


@bp.get(contact.CONFIRM_PATH)
def confirm_contact_page():
    """The mailed link opens a page whose button confirms: a mail scanner that fetches every
    link confirms nothing (public: the token is the credential)."""
    pid, token = _confirmation()
    if not (pid and token and contact.addressed(pid, token)):
        raise _not_this_address()
    return Response(PAGE.format(project=html.escape(pid), token=html.escape(token)),
                    mimetype="text/html")


@bp.post(contact.CONFIRM_PATH)
def confirm_contact():
    pid, token = _confirmation()
    email = contact.confirm(pid, token) if pid and token else None
    if email is None:
        raise _not_this_address()
    return jsonify({"project_id": pid, "contact_email": email, "confirmed": True})


def _not_this_address() -> ApiError:
    return ApiError(404, "not_found", "this link does not confirm the project's current "
                    "contact address (it changed, or the link is not whole)")


def _confirmation() -> tuple[str, str]:
    """The project and token, from the link's query or the page's form; a project that is
    no id is no project."""
    pid = request.values.get("project", "")[:64]
    token = request.values.get("token", "")[:200]
    try:
        uuid.UUID(pid)
    except ValueError:
        pid = ""
    return pid, token


def within_operator_policy(settings: ProjectSettings | None) -> None:
    """422 naming each permission or cap the operator does not allow; nothing is written."""
    if settings is None:
        return
    problems = violations(settings.model_dump(exclude_none=True), operator())
    if problems:
        summary = "; ".join(f"{k}: {v}" for k, v in problems.items())
        raise ApiError(422, "validation_error", f"invalid request body: {summary}",
                       {"fields": problems})
