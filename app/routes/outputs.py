"""What the agents produced and what it cost: a project's packets, a job's LLM usage."""

from __future__ import annotations

from flask import Blueprint, jsonify

from app import db
from app.auth import current_owner
from app.errors import not_found
from app.packets import packets_of, usage_of
from app.queries import job_for_owner, require_project

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
