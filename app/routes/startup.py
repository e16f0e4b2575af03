"""Startup-OS routes: launch, chat, inbox and decisions, memory, the night-shift cron hook."""

from __future__ import annotations

import hmac
import uuid
from typing import Annotated

from flask import Blueprint, jsonify, request, url_for
from pydantic import Field, ValidationError
from sqlalchemy import select, tuple_

from app.api import responses
from app.api.queries import decode_cursor, encode_cursor, require_project
from app.api.schemas import ChatListQuery, Integral, Strict, Text, has_nul, iso
from app.http import db
from app.http.auth import current_owner
from app.http.errors import ApiError, not_found, validation_error
from app.routes.body import parse_body
from models import AgentMemory, Approval, ChatMessage, Project
from tasks.services import approvals
from tasks.settings import get_settings
from tasks.startup import chat, phases
from tasks.startup.schedules import DAILY, enqueue_scheduled

bp = Blueprint("startup", __name__)


class LaunchBody(Strict):
    revision_guidance: Text | None = Field(default=None, max_length=5000)
    force_new_approval: bool = False


class ChatBody(Strict):
    message: Text = Field(min_length=1, max_length=20_000, pattern=r"\S")  # not blank


class DecisionBody(Strict):
    decision: str = Field(pattern="^(approved|rejected)$")
    version: Annotated[int, Field(ge=1, le=2**31 - 1), Integral]  # an int4 column


def _project(pid: str) -> Project:
    return require_project(db.session(), current_owner(), pid)


@bp.post("/api/projects/<pid>/launch")
def launch(pid: str):
    project = _project(pid)
    body = parse_body(LaunchBody)
    job = phases.launch(project.id, project.phase, {
        "phase": 0, "revision_guidance": body.revision_guidance,
        "force_new_approval": body.force_new_approval})
    return jsonify({"job_id": str(job.job_id), "created": job.created,
                    "status_url": url_for("jobs.get_job", jid=str(job.job_id))}), \
        202 if job.created else 200


@bp.post("/api/projects/<pid>/chat")
def post_chat(pid: str):
    project = _project(pid)
    body = parse_body(ChatBody)
    message_id, job_id = chat.post(project.id, body.message)
    return jsonify({"message_id": str(message_id), "job_id": str(job_id)}), 202


@bp.get("/api/projects/<pid>/chat")
def get_chat(pid: str):
    """Newest first, a page at a time: `next` is the `before` of the next older page."""
    project = _project(pid)
    try:
        page = ChatListQuery.model_validate(request.args.to_dict())
    except ValidationError as exc:
        raise validation_error(exc, where="query string") from None
    query = select(ChatMessage).where(ChatMessage.project_id == project.id)
    if page.before:
        created, message_id = decode_cursor(page.before)
        query = query.where(tuple_(ChatMessage.created_at, ChatMessage.id)
                            < tuple_(created, message_id))
    rows = list(db.session().scalars(query.order_by(ChatMessage.created_at.desc(),
                                                    ChatMessage.id.desc()).limit(page.limit + 1)))
    more, rows = len(rows) > page.limit, rows[:page.limit]
    return jsonify({"items": [{"id": str(m.id), "role": m.role, "content": m.content,
                               "created_at": iso(m.created_at),
                               "job_id": str(m.job_id) if m.job_id else None} for m in rows],
                    "next": encode_cursor(rows[-1].created_at, rows[-1].id) if more else None})


def approval_json(a: Approval) -> dict:
    return responses.Approval(
        id=a.id, project_id=a.project_id, action_type=a.action_type, title=a.title,
        action_args=a.action_args, args_hash=a.args_hash, status=a.status, version=a.version,
        expires_at=a.expires_at, decided_at=a.decided_at, execution_status=a.execution_status,
        execution_job_id=a.execution_job_id, source_job_id=a.source_job_id,
        created_at=a.created_at).dump()


@bp.get("/api/inbox")
def inbox():
    query = (select(Approval).join(Project, Project.id == Approval.project_id)
             .where(Project.owner_id == current_owner()))
    if pid := request.args.get("project_id"):
        query = query.where(Approval.project_id == _project(pid).id)
    status = request.args.get("status", "pending")
    if status not in ("pending", "approved", "rejected", "expired", "all"):
        raise ApiError(422, "validation_error", f"unknown status {status!r}", {"field": "status"})
    if status != "all":
        query = query.where(Approval.status == status)
    rows = db.session().scalars(query.order_by(Approval.created_at.desc()).limit(200))
    return jsonify({"items": [approval_json(a) for a in rows]})


@bp.post("/api/inbox/<aid>/decision")
def decide(aid: str):
    session = db.session()
    try:
        approval_id = uuid.UUID(aid)
    except ValueError:
        raise not_found("approval") from None
    approval = session.scalar(select(Approval).join(Project, Project.id == Approval.project_id)
                              .where(Approval.id == approval_id,
                                     Project.owner_id == current_owner()))
    if approval is None:
        raise not_found("approval")
    body = parse_body(DecisionBody)
    approvals.decide(approval_id, current_owner(), body.decision, body.version)
    fresh = session.get(Approval, approval_id, populate_existing=True)  # decided since
    return jsonify(approval_json(fresh))


@bp.post("/api/nightshift/run")
def nightshift_run():
    secret = get_settings().cron_secret
    given = request.headers.get("X-Cron-Secret", "")
    if not secret:
        raise ApiError(401, "unauthorized", "the night-shift route is off: set "
                       "SWITCHYARD_CRON_SECRET on the server, and send it as X-Cron-Secret")
    if not hmac.compare_digest(given.encode(), secret.encode()):
        raise ApiError(401, "unauthorized", "missing or wrong X-Cron-Secret")
    return jsonify({"enqueued": enqueue_scheduled(DAILY)}), 202


@bp.get("/api/projects/<pid>/memory")
def memory(pid: str):
    project = _project(pid)
    query = select(AgentMemory).where(AgentMemory.project_id == project.id)
    if category := request.args.get("category"):
        if has_nul(category):  # PostgreSQL text cannot hold it: a 422, not a 500
            raise ApiError(422, "validation_error", "category must not contain the NUL "
                           "character", {"field": "category"})
        query = query.where(AgentMemory.category == category)
    rows = db.session().scalars(query.order_by(AgentMemory.updated_at.desc()).limit(500))
    return jsonify({"items": [{"id": str(m.id), "category": m.category, "key": m.key,
                               "content": m.content, "source_job_id":
                               str(m.source_job_id) if m.source_job_id else None,
                               "source_step": m.source_step, "updated_at": iso(m.updated_at)}
                              for m in rows]})
