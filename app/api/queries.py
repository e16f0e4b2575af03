"""Reads for the HTTP API, scoped to an owner. Functions take a session and never commit."""

from __future__ import annotations

import base64
import binascii
import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import select, tuple_
from sqlalchemy.orm import Session

from app.api import responses
from app.http import pgpool
from app.http.errors import ApiError, not_found
from models import AgentJob, Artifact, Project
from tasks.coding import trajectory
from tasks.services import quotas


def project_for_owner(session: Session, owner: uuid.UUID, project_id: str) -> Project | None:
    pid = parse_uuid(project_id)
    if pid is None:
        return None
    return session.scalar(select(Project).where(Project.id == pid, Project.owner_id == owner))


def require_project(session: Session, owner: uuid.UUID, project_id: str) -> Project:
    """The owner's project, or the contract's 404 (another owner's project is not found)."""
    project = project_for_owner(session, owner, project_id)
    if project is None:
        raise not_found("project")
    return project


def project_id_for_owner(owner: uuid.UUID, project_id: str) -> uuid.UUID | None:
    """The same check as project_for_owner for the enqueue hot path: no session, no ORM
    object, one prepared statement on the web process's small pool (app.http.pgpool)."""
    from app.http import pgpool

    pid = parse_uuid(project_id)
    if pid is None:
        return None
    row = pgpool.fetch_one_dict("SELECT id FROM projects WHERE id = %s AND owner_id = %s",
                                (pid, owner))
    return row["id"] if row else None


def job_for_owner(session: Session, owner: uuid.UUID, job_id: str) -> AgentJob | None:
    jid = parse_uuid(job_id)
    if jid is None:
        return None
    return session.scalar(
        select(AgentJob).join(Project, Project.id == AgentJob.project_id)
        .where(AgentJob.id == jid, Project.owner_id == owner)
    )


def artifact_for_owner(session: Session, owner: uuid.UUID, artifact_id: str) -> Artifact | None:
    aid = parse_uuid(artifact_id)
    if aid is None:
        return None
    return session.scalar(
        select(Artifact).join(Project, Project.id == Artifact.project_id)
        .where(Artifact.id == aid, Project.owner_id == owner))


def artifacts_of(session: Session, job_id: uuid.UUID) -> list[Artifact]:
    """A job's artifacts in the order its steps wrote them."""
    return list(session.scalars(select(Artifact).where(Artifact.job_id == job_id)
                                .order_by(Artifact.step_seq, Artifact.name)))


RECENT_ARTIFACTS = 100


def recent_artifacts(session: Session, project_id: uuid.UUID) -> list[Artifact]:
    """A project's newest artifacts, for its page's panel."""
    return list(session.scalars(select(Artifact).where(Artifact.project_id == project_id)
                                .order_by(Artifact.created_at.desc(), Artifact.id)
                                .limit(RECENT_ARTIFACTS)))


def list_projects(session: Session, owner: uuid.UUID) -> list[Project]:
    return list(session.scalars(select(Project).where(Project.owner_id == owner)
                                .order_by(Project.created_at.desc(), Project.id)))


def require_room_for_a_project(owner: uuid.UUID) -> None:
    """The operator's quota of projects per owner (SWITCHYARD_MAX_PROJECTS_PER_OWNER)."""
    quotas.check(quotas.PROJECTS, owner=owner, adding=1)


def list_jobs(session: Session, project_id: uuid.UUID, *, status: str | None,
              job_type: str | None, limit: int, before: str | None
              ) -> tuple[list[AgentJob], str | None]:
    """Newest first; `before` is the opaque cursor of the previous page's last row."""
    query = select(AgentJob).where(AgentJob.project_id == project_id)
    if status:
        query = query.where(AgentJob.status == status)
    if job_type:
        query = query.where(AgentJob.job_type == job_type)
    if before:
        created, jid = decode_cursor(before)
        query = query.where(tuple_(AgentJob.created_at, AgentJob.id) < tuple_(created, jid))
    rows = list(session.scalars(
        query.order_by(AgentJob.created_at.desc(), AgentJob.id.desc()).limit(limit + 1)))
    more = len(rows) > limit
    rows = rows[:limit]
    return rows, encode_cursor(rows[-1].created_at, rows[-1].id) if more and rows else None


# A job's view serves each step's output up to this many bytes of JSON; a larger one is
# cut to a preview and linked (GET /api/jobs/<jid>/steps/<seq>), so reading a job never
# makes the web process hold its steps' megabytes.
OUTPUT_PREVIEW_BYTES = 4096
STEPS = """
SELECT seq, name, status, error, attempts, started_at, finished_at, size AS output_bytes,
    CASE WHEN size <= %(cut)s THEN output END AS output,
    CASE WHEN size > %(cut)s THEN left(output::text, %(cut)s) END AS output_preview
FROM (SELECT *, octet_length(output::text) AS size FROM job_steps
      WHERE job_id = %(job)s <one>) s ORDER BY seq
"""


def steps_of(job_id: uuid.UUID) -> list[dict[str, Any]]:
    """A job's steps, outputs over OUTPUT_PREVIEW_BYTES cut to a preview."""
    return pgpool.fetch_dicts(STEPS.replace("<one>", ""),
                              {"job": job_id, "cut": OUTPUT_PREVIEW_BYTES})


TRAJECTORY_STEP_BYTES = 256 * 1024  # a larger step is previewed in the trajectory, and linked


def trajectory_of(job_id: uuid.UUID) -> list[dict[str, Any]]:
    """A job's steps read as its trajectory (tasks.coding.trajectory)."""
    return trajectory.build(pgpool.fetch_dicts(
        STEPS.replace("<one>", ""), {"job": job_id, "cut": TRAJECTORY_STEP_BYTES}))


def step_of(job_id: uuid.UUID, seq: int) -> dict[str, Any] | None:
    """One step with its whole output (it is at most SWITCHYARD_STEP_OUTPUT_MAX_BYTES)."""
    rows = pgpool.fetch_dicts(STEPS.replace("<one>", "AND seq = %(seq)s"),
                              {"job": job_id, "cut": 2**31 - 1, "seq": seq})
    return rows[0] if rows else None


def step_json(job_id: uuid.UUID, s: dict[str, Any]) -> responses.Step:
    cut = s["output_preview"] is not None
    return responses.Step(
        seq=s["seq"], name=s["name"], status=s["status"], output=s["output"], error=s["error"],
        attempts=s["attempts"], started_at=s["started_at"], finished_at=s["finished_at"],
        output_truncated=cut, output_preview=s["output_preview"],
        output_bytes=s["output_bytes"],
        output_url=f"/api/jobs/{job_id}/steps/{s['seq']}" if cut else None)


def encode_cursor(created: datetime, jid: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(f"{created.isoformat()}|{jid}".encode()).decode()


def decode_cursor(cursor: str) -> tuple[datetime, uuid.UUID]:
    try:
        created, jid = base64.urlsafe_b64decode(cursor.encode()).decode().split("|")
        return datetime.fromisoformat(created), uuid.UUID(jid)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise ApiError(400, "invalid_cursor", "the `before` cursor is not valid",
                       {"field": "before"}) from None


def project_json(p: Project) -> dict[str, Any]:
    return responses.Project(
        id=p.id, name=p.name, goal=p.goal, night_shift=p.night_shift, phase=p.phase,
        settings=p.settings, created_at=p.created_at).dump()


def job_json(j: AgentJob, steps: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A job; with its steps (`Job`) when they are given, else the list's `JobSummary`."""
    fields: dict[str, Any] = {
        "id": j.id, "project_id": j.project_id, "job_type": j.job_type, "status": j.status,
        "attempts": j.attempts, "max_attempts": j.max_attempts, "priority": j.priority,
        "payload": j.payload, "result": j.result, "last_error": j.last_error,
        "created_at": j.created_at, "started_at": j.started_at,
        "completed_at": j.completed_at, "parent_job_id": j.parent_job_id,
        "rerun_of": j.rerun_of,
    }
    if steps is None:
        return responses.JobSummary(**fields).dump()
    return responses.Job(**fields, steps=[step_json(j.id, s) for s in steps]).dump()


def parse_uuid(value: str) -> uuid.UUID | None:
    """The id in `value`, or None when it is not one (a route answers 404 for it)."""
    try:
        return uuid.UUID(value)
    except ValueError:
        return None


def webhook_project(pid: str) -> uuid.UUID | None:
    """The project a delivery names, if it exists and has an owner (not the system's)."""
    try:
        project_id = uuid.UUID(pid)
    except ValueError:
        return None
    row = pgpool.fetch_one_dict("SELECT id FROM projects WHERE id = %s "
                                "AND owner_id IS NOT NULL", (project_id,))
    return row["id"] if row else None
