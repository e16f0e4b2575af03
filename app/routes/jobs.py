"""Jobs: enqueue, list, read, cancel, retry, and a job's live event stream."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator

from flask import Blueprint, jsonify, request, url_for
from pydantic import ValidationError

from app.api.queries import (
    job_for_owner,
    job_json,
    list_jobs,
    parse_uuid,
    project_id_for_owner,
    require_project,
    step_json,
    step_of,
    steps_of,
    trajectory_of,
)
from app.api.schemas import JobBatch, JobCreate, JobListQuery, JobRerun
from app.http import db
from app.http.auth import current_owner, current_viewer
from app.http.errors import ApiError, not_found, validation_error
from app.routes.body import parse_body
from app.streams.hub import Event, Subscription
from app.streams.sse import client_gone, event_stream, sse_response, stream_cursor
from app.streams.stream_slots import take_slot
from models import AgentJob
from tasks.engine import control, diagnosis, rerun
from tasks.engine.enqueue import EnqueueRequest, enqueue, enqueue_many, owns_project
from tasks.engine.errors import SwitchyardError
from tasks.engine.status import TERMINAL, JobStatus
from tasks.services import approvals
from tasks.services.effects import review

bp = Blueprint("jobs", __name__)


def _owned_job(jid: str) -> AgentJob:
    job = job_for_owner(db.session(), current_owner(), jid)
    if job is None:
        raise not_found("job")
    return job


def _job_body(job_id: uuid.UUID) -> dict:
    session = db.session()
    session.expire_all()
    job = session.get(AgentJob, job_id)
    assert job is not None
    return job_json(job, steps_of(job.id))


@contextlib.contextmanager
def _not_found_unless_owned(project_id: uuid.UUID) -> Iterator[None]:
    """Another owner's project is a 404 whatever else is wrong with the request: a refusal
    (a bad body, an unknown job type, a missing system part) goes out only if it is the
    caller's, so nothing is answered about a project that is not theirs."""
    try:
        yield
    except (ApiError, SwitchyardError) as exc:
        status = exc.status if isinstance(exc, ApiError) else exc.http_status
        if status != 404 and not owns_project(project_id, current_owner()):
            raise not_found("project") from None
        raise


@bp.post("/api/projects/<pid>/jobs")
def create_job(pid: str):
    project_id = parse_uuid(pid)
    if project_id is None:
        raise not_found("project")
    # The project is the caller's or a 404: checked by the enqueue's own statement (one
    # round trip less on the busiest route); a refusal is checked against it afterwards.
    with _not_found_unless_owned(project_id):
        body = parse_body(JobCreate)
        result = enqueue(EnqueueRequest(
            project_id=project_id, job_type=body.job_type, payload=body.payload,
            idempotency_key=body.idempotency_key, priority=body.priority,
            run_after=body.run_after, max_attempts=body.max_attempts,
        ), public=True, owner=current_owner())
    job_id = str(result.job_id)
    return jsonify({
        "job_id": job_id, "status": result.status, "created": result.created,
        "status_url": url_for("jobs.get_job", jid=job_id),
        "events_url": url_for("jobs.job_events", jid=job_id),
    }), 202 if result.created else 200


@bp.post("/api/projects/<pid>/jobs:batch")
def create_jobs(pid: str):
    """Up to 1,000 jobs in one request: one statement, one publishing connection. Each item
    is checked on its own; the answer is 207 with one result per item, in order."""
    project_id = project_id_for_owner(current_owner(), pid)
    if project_id is None:
        raise not_found("project")
    body = parse_body(JobBatch)
    items: list[dict | None] = [None] * len(body.jobs)
    reqs: list[tuple[int, EnqueueRequest]] = []
    for i, raw in enumerate(body.jobs):
        try:
            # Read as the single route reads its body (JSON, strict types).
            job = JobCreate.model_validate_json(json.dumps(raw))
        except ValidationError as exc:
            items[i] = _item_error(validation_error(exc))
            continue
        reqs.append((i, EnqueueRequest(
            project_id=project_id, job_type=job.job_type, payload=job.payload,
            idempotency_key=job.idempotency_key, priority=job.priority,
            run_after=job.run_after, max_attempts=job.max_attempts)))
    results = enqueue_many([r for _, r in reqs], public=True)
    for (i, _), result in zip(reqs, results, strict=True):
        if isinstance(result, SwitchyardError):
            items[i] = _item_error(ApiError(result.http_status or 422, result.code, str(result),
                                            result.details()))
            continue
        job_id = str(result.job_id)
        items[i] = {"status": 202 if result.created else 200, "job_id": job_id,
                    "created": result.created,
                    "status_url": url_for("jobs.get_job", jid=job_id)}
    return jsonify({"items": items}), 207


def _item_error(err: ApiError) -> dict:
    return {"status": err.status, "error": {"code": err.code, "message": err.message,
                                            "details": err.details}}


@bp.get("/api/projects/<pid>/jobs")
def get_jobs(pid: str):
    session = db.session()
    project = require_project(session, current_owner(), pid)
    try:
        query = JobListQuery.model_validate(request.args.to_dict())
    except ValidationError as exc:
        raise validation_error(exc, where="query string") from None
    if query.status is not None and query.status not in JobStatus.__members__.values():
        raise ApiError(422, "validation_error", f"unknown status {query.status!r}",
                       {"field": "status"})
    jobs, nxt = list_jobs(session, project.id, status=query.status, job_type=query.job_type,
                          limit=query.limit, before=query.before)
    return jsonify({"items": [job_json(j) for j in jobs], "next": nxt})


# uuid: so that /api/jobs/retry is no job id and OPTIONS on it does not advertise GET.
@bp.get("/api/jobs/<uuid:jid>")
def get_job(jid: uuid.UUID):
    job = _owned_job(str(jid))
    return jsonify(job_json(job, steps_of(job.id)))


@bp.get("/api/jobs/<uuid:jid>/steps/<seq>")
def get_step(jid: uuid.UUID, seq: str):
    job = _owned_job(str(jid))
    # Matched as text, so any other method on the URL is a 405, not a 404.
    step = step_of(job.id, int(seq)) if seq.isascii() and seq.isdigit() and len(seq) < 10 \
        else None
    if step is None:
        raise not_found("step")
    return jsonify(step_json(job.id, step).dump())


@bp.get("/api/jobs/<uuid:jid>/trajectory")
def get_trajectory(jid: uuid.UUID):
    """Every model turn, tool call (input, result, patch), setup and verification round of
    the job, in order: what the coding panel draws as a timeline and offers as a download."""
    job = _owned_job(str(jid))
    return jsonify({"job_id": str(job.id), "job_type": job.job_type, "status": job.status,
                    "result": job.result, "items": trajectory_of(job.id)})


@bp.post("/api/jobs/<jid>/cancel")
def cancel_job(jid: str):
    job = _owned_job(jid)
    approvals.expire_gates_of(control.cancel_tree(job.id))
    return jsonify(_job_body(job.id))


@bp.post("/api/jobs/<jid>/retry")
def retry_job(jid: str):
    job = _owned_job(jid)
    if (blocked := review.unknown_blocking_job(str(job.id))) is not None:
        raise blocked
    if not control.retry_failed(job.id):
        raise ApiError(409, "conflict", f"only a failed job can be retried; this one is "
                       f"{_job_body(job.id)['status']}", {"status": job.status})
    return jsonify(_job_body(job.id)), 202


@bp.post("/api/jobs/<jid>/rerun")
def rerun_job(jid: str):
    """A new job of the same type and project whose steps before `from_step` are copied from
    this one's record and replayed, not run (tasks.engine.rerun says what cannot be)."""
    job = _owned_job(jid)
    body = parse_body(JobRerun)
    # RerunRefused: a 409 or 422
    made = rerun.rerun(job.id, body.from_step, body.payload, idempotency_key=body.idempotency_key)
    job_id = str(made.job_id)
    return jsonify({"job_id": job_id, "rerun_of": str(job.id),
                    "copied_steps": made.copied_steps,
                    "status_url": url_for("jobs.get_job", jid=job_id),
                    "events_url": url_for("jobs.job_events", jid=job_id)}), \
        202 if made.created else 200


@bp.get("/api/jobs/<jid>/events")
def job_events(jid: str):
    job = _owned_job(jid)
    sub, ended = Subscription(job_id=job.id), JobStatus(job.status) in TERMINAL
    db.release()  # the stream holds its thread for minutes: no connection meanwhile
    cursor = stream_cursor(sub)

    def is_last(e: Event) -> bool:
        return e.type == "status" and JobStatus(e.data.get("status")) in TERMINAL

    slot = take_slot()  # before any 200: over the cap is a 429
    return sse_response(event_stream(sub, cursor, is_last, ended=ended, mark_replay=True,
                                     gone=client_gone(request.environ)), slot)


@bp.get("/api/jobs/<jid>/diagnosis")
def job_diagnosis(jid: str):
    job = _owned_job(jid)
    facts = diagnosis.gather(job.id, current_viewer())
    if facts is None:
        raise not_found("job")
    return jsonify(diagnosis.as_json(facts, diagnosis.diagnose(facts)))
