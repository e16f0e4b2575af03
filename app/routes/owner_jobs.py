"""Jobs across all of an owner's projects: list them with filters (the monitor's failed
jobs), and retry every failed job that matches a filter."""

from __future__ import annotations

import uuid

from flask import Blueprint, jsonify, request
from pydantic import Field
from sqlalchemy import Select, select

from app.api.queries import job_json, require_project
from app.api.schemas import Strict, Text, has_nul
from app.http import db
from app.http.auth import current_owner
from app.http.errors import ApiError
from app.routes.body import parse_body
from models import AgentJob, Project
from tasks.engine import control
from tasks.engine.status import JobStatus

bp = Blueprint("owner_jobs", __name__)

RETRY_BATCH = 500  # one call retries at most this many; `more` says to call again


class RetryFilter(Strict):
    project_id: str | None = None
    job_type: Text | None = Field(default=None, min_length=1, max_length=200)


def _owned(project_id: str | None, job_type: str | None) -> Select:
    query = (select(AgentJob).join(Project, Project.id == AgentJob.project_id)
             .where(Project.owner_id == current_owner()))
    if project_id:
        project = require_project(db.session(), current_owner(), project_id)
        query = query.where(AgentJob.project_id == project.id)
    if job_type:
        query = query.where(AgentJob.job_type == job_type)
    return query


@bp.get("/api/jobs")
def list_owner_jobs():
    status = request.args.get("status") or None
    if status is not None and status not in JobStatus.__members__.values():
        raise ApiError(422, "validation_error", f"unknown status {status!r}", {"field": "status"})
    try:
        limit = int(request.args.get("limit", "50"))
    except ValueError:
        limit = 0
    if not 1 <= limit <= 200:
        raise ApiError(422, "validation_error", "limit must be an integer from 1 to 200",
                       {"field": "limit"})
    job_type = request.args.get("job_type")
    if job_type and has_nul(job_type):  # PostgreSQL text cannot hold it: a 422, not a 500
        raise ApiError(422, "validation_error", "job_type must not contain the NUL character",
                       {"field": "job_type"})
    query = _owned(request.args.get("project_id"), job_type)
    if status:
        query = query.where(AgentJob.status == status)
    jobs = db.session().scalars(query.order_by(AgentJob.created_at.desc(), AgentJob.id.desc())
                                .limit(limit))
    return jsonify({"items": [job_json(j) for j in jobs]})


@bp.post("/api/jobs/retry")
def retry_matching():
    body = parse_body(RetryFilter)
    query = _owned(body.project_id, body.job_type).where(AgentJob.status == JobStatus.FAILED)
    ids: list[uuid.UUID] = list(db.session().scalars(
        query.with_only_columns(AgentJob.id).order_by(AgentJob.completed_at)
        .limit(RETRY_BATCH + 1)))
    more = len(ids) > RETRY_BATCH
    retried = [str(j) for j in ids[:RETRY_BATCH] if control.retry_failed(j)]
    return jsonify({"retried": retried, "count": len(retried), "more": more}), 202
