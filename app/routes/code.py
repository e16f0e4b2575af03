"""The coding agent's triggers: a client's code task, and GitHub's webhook deliveries.

The webhook carries no bearer token (GitHub calls it): the project's `github_webhook_secret`
signs each delivery. An unknown project, a project without that secret and a wrong
signature all answer the same 401, so the route tells no one which projects exist.
What an event means is decided in tasks.coding.webhooks; the body and the signature are
never logged.
"""

from __future__ import annotations

import logging
import uuid
from typing import Annotated

from flask import Blueprint, Response, jsonify, request, url_for
from pydantic import ConfigDict, Field, field_validator

from app.api.queries import require_project, webhook_project
from app.api.schemas import Integral, Text
from app.http import db
from app.http.auth import current_owner
from app.http.errors import ApiError
from app.routes.body import parse_body, read_body
from tasks.coding import merges, tokens, webhooks
from tasks.coding.gitsource import REPO_URL_PATTERN, url_problem
from tasks.coding.payloads import BRANCH_PATTERN, RunTaskPayload
from tasks.engine.enqueue import EnqueueRequest, enqueue
from tasks.services import keystore

log = logging.getLogger(__name__)
bp = Blueprint("code", __name__)

WEBHOOK_SECRET = "github_webhook_secret"
IGNORED_HEADER = "X-Switchyard-Ignored"
GITHUB_SECONDS = 5.0  # GitHub gives a delivery ten seconds in all


class CodeTaskBody(RunTaskPayload):
    """code.run_task's payload, strictly typed, plus the enqueue's idempotency key."""
    model_config = ConfigDict(extra="forbid", strict=True)

    # The patterns are for the schema; the validators (url_problem, payloads._branch) say
    # in words what is wrong.
    repo_url: Text = Field(min_length=1, max_length=2000,
                           json_schema_extra={"pattern": REPO_URL_PATTERN})
    task: Text = Field(min_length=1, max_length=20_000)
    branch: str | None = Field(default=None, json_schema_extra={"pattern": BRANCH_PATTERN})
    max_iterations: Annotated[int, Field(ge=1, le=10), Integral] = 5
    idempotency_key: Text | None = Field(default=None, min_length=1, max_length=255)

    @field_validator("repo_url")
    @classmethod
    def _repo_url(cls, value: str) -> str:
        if problem := url_problem(value):
            raise ValueError(problem)
        return value


def _accepted(job_id: uuid.UUID, created: bool) -> tuple[Response, int]:
    return jsonify({"job_id": str(job_id), "status_url": url_for("jobs.get_job",
                                                                 jid=str(job_id))}), \
        202 if created else 200


@bp.post("/api/projects/<pid>/code-tasks")
def create_code_task(pid: str):
    project = require_project(db.session(), current_owner(), pid)
    body = parse_body(CodeTaskBody)
    job = enqueue(EnqueueRequest(project.id, "code.run_task",
                                 body.model_dump(exclude={"idempotency_key"}),
                                 idempotency_key=body.idempotency_key))
    return _accepted(job.job_id, job.created)


@bp.post("/api/webhooks/github/<pid>")
def github_webhook(pid: str):
    raw = read_body()
    project_id = webhook_project(pid)
    secrets = keystore.read(project_id, [WEBHOOK_SECRET, tokens.SECRET]) if project_id else {}
    if not webhooks.signature_ok(secrets.get(WEBHOOK_SECRET, ""), raw,
                                 request.headers.get("X-Hub-Signature-256")):
        raise ApiError(401, "bad_signature", "missing or wrong X-Hub-Signature-256: the "
                       f"project's {WEBHOOK_SECRET} secret signs its webhook deliveries")
    assert project_id is not None
    event = request.headers.get("X-GitHub-Event", "")
    facts = {"project_id": str(project_id), "event": event,
             "delivery": request.headers.get("X-GitHub-Delivery", "")}
    try:
        doc = webhooks.parse(raw, request.mimetype)
    except (ValueError, UnicodeDecodeError):
        raise ApiError(400, "invalid_json", "the delivery is not a JSON object (nor a form "
                       "with one in its payload field)") from None
    if event == "pull_request" and (closed := merges.closed_pull_request(doc)) is not None:
        settled = merges.settle(str(project_id), *closed)
        log.info("webhook pull request closed", extra={
            "action": "webhook_pr_closed", **facts, "merged": closed[1], "settled": settled})
        return jsonify({"settled": settled}), 200
    outcome = webhooks.trigger_for(event, doc, pull_head=webhooks.github_lookup(
        lambda repo: tokens.pick(secrets.get(tokens.SECRET), repo), timeout=GITHUB_SECONDS))
    if isinstance(outcome, webhooks.Ignored):
        log.info("webhook ignored", extra={"action": "webhook_ignored", **facts,
                                           "reason": outcome.reason})
        return Response(status=204, headers={IGNORED_HEADER: outcome.reason})
    job = enqueue(EnqueueRequest(project_id, "code.run_task", outcome.payload,
                                 idempotency_key=outcome.idempotency_key))
    log.info("webhook enqueued", extra={"action": "webhook_enqueued", **facts,
                                        "job_id": str(job.job_id), "job_created": job.created})
    return _accepted(job.job_id, job.created)
