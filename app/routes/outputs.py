"""What the agents produced and what it cost: a project's packets, a job's LLM usage."""

from __future__ import annotations

from flask import Blueprint, jsonify

from app.api.packets import packets_of, usage_of
from app.api.queries import job_for_owner, require_project
from app.http import db
from app.http.auth import current_owner
from app.http.errors import not_found

bp = Blueprint("outputs", __name__)


@bp.get("/api/projects/<pid>/packets")
def list_packets(pid: str):
    project_id = require_project(db.session(), current_owner(), pid).id
    return jsonify({"items": packets_of(project_id)})


@bp.get("/api/jobs/<jid>/llm-usage")
def job_llm_usage(jid: str):
    job = job_for_owner(db.session(), current_owner(), jid)
    if job is None:
        raise not_found("job")
    return jsonify(usage_of(job.id))
