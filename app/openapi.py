"""The OpenAPI 3.1 document of the HTTP API, built from the request models and the job registry.

Request bodies come from the pydantic models themselves, so the document cannot drift from
what the server validates; tests run schemathesis against it and check every route is in it.
"""

from __future__ import annotations

import copy
from typing import Any

from pydantic import BaseModel

from app.openapi_components import REF, RESPONSE_SCHEMAS, UUID, obj, ref, typed
from app.routes.owner_jobs import RetryFilter
from app.routes.startup import ChatBody, DecisionBody, LaunchBody
from app.schemas import NO_NUL, JobCreate, JobListQuery, ProjectCreate, ProjectUpdate
from models.startup import APPROVAL_STATUSES
from tasks import registry
from tasks.status import JobStatus

JSON = "application/json"
SECURED = [{"bearer": []}]
CRON: list[dict[str, list[str]]] = [{"cron": []}]
PUBLIC: list[dict[str, list[str]]] = []

DESCRIPTION = """Durable jobs for AI agents. Every `/api/*` call needs `Authorization: Bearer
<token>` (tokens come from `switchyard token create`); another owner's project or job answers
404, never 403. Every 4xx/5xx body is `{"error": {"code", "message", "details"}}`.

Live events also come as JSON text frames over the WebSocket `/ws/projects/{pid}?cursor=<event
id>` (same auth, same event objects as the Server-Sent Events streams)."""


BODIES: dict[str, type[BaseModel]] = {"ProjectCreate": ProjectCreate,
                                      "ProjectUpdate": ProjectUpdate, "JobCreate": JobCreate,
                                      "RetryFilter": RetryFilter, "LaunchBody": LaunchBody,
                                      "ChatBody": ChatBody, "DecisionBody": DecisionBody}


def _json(description: str, schema: str) -> dict[str, Any]:
    return {"description": description, "content": {JSON: {"schema": ref(schema)}}}


def _error(description: str, **headers: dict[str, Any]) -> dict[str, Any]:
    out = _json(description, "Error")
    if headers:
        out["headers"] = headers
    return out


ERRORS: dict[int, dict[str, Any]] = {
    400: _error("Invalid JSON, a body that is not an object, or an invalid cursor."),
    401: _error("No, malformed, unknown or revoked bearer token.",
                **{"WWW-Authenticate": {"schema": {"const": "Bearer"}}}),
    403: _error("A cookie-session (web UI) request that changes something lacked its "
                "`X-CSRF-Token` header."),
    404: _error("No such resource for this owner (another owner's is a 404 too)."),
    409: _error("The job is not in a status that allows this."),
    413: _error("The request body is larger than 1 MiB."),
    422: _error("A missing, unknown or wrong-typed field; `details.fields` names each."),
    429: _error("Too many requests for this token.",
                **{"Retry-After": {"schema": typed("integer", minimum=0)}}),
    500: _error("An unexpected error; the body never carries internals."),
    503: _error("The database is unavailable for the moment (`database_unavailable`: retry "
                "after `Retry-After` seconds), or, from /readyz, not ready (`details.checks` says "
                "whether the database or the broker failed).",
                **{"Retry-After": {"schema": typed("integer", minimum=0)}}),
}


def _op(op_id: str, summary: str, ok: dict[int, dict[str, Any]], errors: tuple[int, ...],
        *, secured: bool = True, params: list[dict[str, Any]] | None = None,
        body: str | None = None, security: list[dict[str, list[str]]] | None = None
        ) -> dict[str, Any]:
    # Every authenticated request reads the database (its token), so any may meet its absence.
    codes = ((401, 429, 503) if secured else ()) + errors + (500,)
    out: dict[str, Any] = {
        "operationId": op_id, "summary": summary,
        "security": security if security is not None else SECURED if secured else PUBLIC,
        "responses": {str(c): r for c, r in sorted({**ok, **{c: ERRORS[c] for c in codes}}
                                                   .items())},
    }
    if params:
        out["parameters"] = params
    if body:
        # An empty body reads as {}: it is only refused when the model has a required field.
        required = any(f.is_required() for f in BODIES[body].model_fields.values())
        out["requestBody"] = {"required": required, "content": {JSON: {"schema": ref(body)}}}
    return out


def _path_param(name: str, what: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": UUID,
            "description": f"The {what} id."}


PID, JID = _path_param("pid", "project"), _path_param("jid", "job")
AID = _path_param("aid", "approval")
SSE_PARAMS = [
    {"name": "cursor", "in": "query", "required": False, "schema": typed("integer", minimum=0),
     "description": "Replay every event after this event id (default 0: all)."},
    {"name": "Last-Event-ID", "in": "header", "required": False,
     "schema": typed("string", pattern="^[0-9]+$"),
     "description": "The browser's reconnect cursor; `cursor` wins when both are given."},
]
# Before OpenAPI 3.2 the `schema` of an event stream describes one event (comments aside).
SSE_EVENT = obj({"id": typed("string", pattern="^[0-9]+$"), "event": typed("string"),
                  "data": typed("string", contentMediaType=JSON, contentSchema=ref("Event"))},
                 extra=True)
SSE_OK = {200: {"description": "A `text/event-stream`: `id: <event id>`, `event: <type>`, "
                               "`data: <event JSON>`; a `: keep-alive` comment every 15 s.",
                "content": {"text/event-stream": {"schema": SSE_EVENT}}}}


def _job_filters(*extra: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"name": "status", "in": "query", "required": False,
         "schema": {"enum": [s.value for s in JobStatus]}},
        {"name": "job_type", "in": "query", "required": False,
         "schema": typed("string", pattern=NO_NUL)},
        {"name": "limit", "in": "query", "required": False, "schema": typed(
            "integer", minimum=1, maximum=200, default=JobListQuery.model_fields["limit"].default)},
        *extra,
    ]


BEFORE = {"name": "before", "in": "query", "required": False, "schema": typed("string"),
          "description": "The opaque `next` cursor of the previous page."}
PROJECT_FILTER = {"name": "project_id", "in": "query", "required": False,
                  "schema": typed("string"),
                  "description": "Only this project's jobs (another owner's project: 404)."}


def paths() -> dict[str, Any]:
    json_body = (400, 413, 422)
    return {
        "/healthz": {"get": _op("healthz", "The process is up.",
                                {200: _json("Up.", "Health")}, (), secured=False)},
        "/readyz": {"get": _op("readyz", "The database and the broker answer.",
                               {200: _json("Ready.", "Readiness")}, (503,), secured=False)},
        "/metrics": {"get": _op("metrics", "Prometheus metrics (aggregates only).", {200: {
            "description": "Prometheus text exposition format.",
            "content": {"text/plain": {"schema": typed("string")}}}}, (), secured=False)},
        "/api/openapi.json": {"get": _op("openapi", "This document.", {200: {
            "description": "The OpenAPI 3.1 document.",
            "content": {JSON: {"schema": typed("object")}}}}, (), secured=False)},
        "/api/projects": {
            "get": _op("list_projects", "The caller's projects, newest first.",
                       {200: _json("The projects.", "ProjectList")}, ()),
            "post": _op("create_project", "Create a project.",
                        {201: _json("Created.", "Project")}, json_body, body="ProjectCreate"),
        },
        "/api/projects/{pid}": {
            "get": _op("get_project", "One project.", {200: _json("The project.", "Project")},
                       (404,), params=[PID]),
            "patch": _op("update_project", "Change a project; `settings` keys sent are merged.",
                         {200: _json("The project after the change.", "Project")},
                         (*json_body, 404), params=[PID], body="ProjectUpdate"),
        },
        "/api/projects/{pid}/jobs": {
            "get": _op("list_jobs", "A project's jobs, newest first, a page at a time.",
                       {200: _json("A page.", "JobPage")}, (400, 404, 422),
                       params=[PID, *_job_filters(BEFORE)]),
            "post": _op("create_job", "Enqueue a job (idempotent per `idempotency_key`).",
                        {202: _json("Enqueued.", "JobAccepted"),
                         200: _json("Already enqueued with this key.", "JobAccepted")},
                        (*json_body, 404), params=[PID], body="JobCreate"),
        },
        "/api/projects/{pid}/events": {"get": _op(
            "project_events", "A project's events, replayed from a cursor, then live.",
            SSE_OK, (400, 404), params=[PID, *SSE_PARAMS])},
        "/api/jobs": {"get": _op(
            "list_owner_jobs", "Jobs across all the caller's projects, newest first.",
            {200: _json("The jobs.", "JobList")}, (404, 422), params=_job_filters(PROJECT_FILTER))},
        "/api/jobs/retry": {"post": _op(
            "retry_matching", "Retry every failed job that matches a filter (a batch a call).",
            {202: _json("The jobs queued again; `more`: call again.", "RetryBatch")},
            (*json_body, 404), body="RetryFilter")},
        "/api/jobs/{jid}": {"get": _op("get_job", "One job with its steps.",
                                       {200: _json("The job.", "Job")}, (404,), params=[JID])},
        "/api/jobs/{jid}/cancel": {"post": _op(
            "cancel_job", "Cancel a job and its descendants (running: at the next step).",
            {200: _json("The job after the cancel request.", "Job")}, (404,), params=[JID])},
        "/api/jobs/{jid}/retry": {"post": _op(
            "retry_job", "Retry a failed job with a fresh set of attempts.",
            {202: _json("Queued again.", "Job")}, (404, 409), params=[JID])},
        "/api/jobs/{jid}/events": {"get": _op(
            "job_events", "A job's events; the stream ends after its terminal status event.",
            SSE_OK, (400, 404), params=[JID, *SSE_PARAMS])},
        "/api/jobs/{jid}/diagnosis": {"get": _op(
            "diagnose_job", "Why is this job where it is, in one sentence, with the facts.",
            {200: _json("The diagnosis.", "Diagnosis")}, (404,), params=[JID])},
        **_startup_paths(json_body),
        "/api/monitor/queues": {"get": _op(
            "monitor_queues", "Per queue and job type: backlog, failures, throughput.",
            {200: _json("Queue statistics for the caller's jobs.", "QueueStats")}, ())},
        "/api/monitor/workers": {"get": _op(
            "monitor_workers", "Workers seen in the last day and their heartbeats.",
            {200: _json("The workers.", "Workers")}, ())},
    }


def _startup_paths(json_body: tuple[int, ...]) -> dict[str, Any]:
    inbox_filters = [PROJECT_FILTER, {"name": "status", "in": "query", "required": False,
                                      "schema": {"enum": [*APPROVAL_STATUSES, "all"],
                                                 "default": "pending"}}]
    category = {"name": "category", "in": "query", "required": False,
                "schema": typed("string", pattern=NO_NUL)}
    return {
        "/api/projects/{pid}/launch": {"post": _op(
            "launch", "Generate the project's next packet (phase0.generate_packet).",
            {202: _json("Enqueued.", "JobStarted")}, (*json_body, 404), params=[PID],
            body="LaunchBody")},
        "/api/projects/{pid}/chat": {
            "get": _op("list_chat", "The project's chat, oldest first (500 at most).",
                       {200: _json("The messages.", "ChatList")}, (404,), params=[PID]),
            "post": _op("post_chat", "Say something; a chat.reply job answers.",
                        {202: _json("Stored; the reply job is queued.", "ChatPosted")},
                        (*json_body, 404), params=[PID], body="ChatBody"),
        },
        "/api/inbox": {"get": _op(
            "inbox", "Approvals waiting for (or given) a decision, newest first.",
            {200: _json("The approvals.", "ApprovalList")}, (404, 422), params=inbox_filters)},
        "/api/inbox/{aid}/decision": {"post": _op(
            "decide", "Approve or reject; `version` must be the one you saw.",
            {200: _json("The approval after the decision.", "Approval")},
            (*json_body, 404, 409), params=[AID], body="DecisionBody")},
        "/api/nightshift/run": {"post": _op(
            "nightshift_run", "The daily cron hook: enqueue what is due.",
            {202: _json("How many jobs each type enqueued.", "Enqueued"),
             401: ERRORS[401]}, (), secured=False, security=CRON)},
        "/api/projects/{pid}/memory": {"get": _op(
            "memory", "What the agents remember about the project (500 at most).",
            {200: _json("The memories.", "MemoryList")}, (404,), params=[PID, category])},
    }


def _key_patterns(node: Any) -> Any:
    """pydantic writes dict[Text, V] as patternProperties, which lets any other key through."""
    if isinstance(node, list):
        return [_key_patterns(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _key_patterns(v) for k, v in node.items()}
    patterns = out.get("patternProperties")
    if isinstance(patterns, dict) and len(patterns) == 1 and "additionalProperties" not in out:
        ((pattern, values),) = out.pop("patternProperties").items()
        out["propertyNames"], out["additionalProperties"] = {"pattern": pattern}, values
    return out


def _model_schema(model: type[BaseModel], components: dict[str, Any]) -> dict[str, Any]:
    schema = _key_patterns(model.model_json_schema(ref_template=REF))
    components.update(schema.pop("$defs", {}))
    return schema


# Any JSON without NUL in a string or a key: what a payload may hold (jsonb refuses NUL).
STORABLE_JSON = {"anyOf": [
    typed("string", pattern=NO_NUL), typed(["number", "boolean", "null"]),
    typed("array", items=ref("StorableJson")),
    typed("object", propertyNames={"pattern": NO_NUL}, additionalProperties=ref("StorableJson")),
]}


def _storable(node: Any) -> Any:
    """A payload model's schema, told that JobCreate refuses NUL anywhere in the payload."""
    if isinstance(node, list):
        return [_storable(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _storable(v) for k, v in node.items()}
    types = out.get("type")
    if (types == "string" or (isinstance(types, list) and "string" in types)) \
            and "pattern" not in out:
        out["pattern"] = NO_NUL
    if types == "object" and out.get("additionalProperties", True) is True:
        out["additionalProperties"] = ref("StorableJson")
        out["propertyNames"] = {"pattern": NO_NUL}
    return out


def _job_create(components: dict[str, Any]) -> dict[str, Any]:
    """One variant per registered job type: its name as a constant, its payload model."""
    base = _model_schema(JobCreate, components)
    mapping = {}
    for name in registry.public_names():
        payload_name, variant_name = f"Payload.{name}", f"JobCreate.{name}"
        components[payload_name] = _storable(
            _model_schema(registry.get(name).payload_model, components))
        variant = copy.deepcopy(base)
        variant["title"] = variant_name
        variant["properties"]["job_type"] = {"const": name}
        variant["properties"]["payload"] = ref(payload_name)
        if components[payload_name].get("required"):
            variant["required"] = [*variant["required"], "payload"]
        components[variant_name] = variant
        mapping[name] = REF.format(model=variant_name)
    return {"oneOf": [{"$ref": ref} for ref in mapping.values()],
            "discriminator": {"propertyName": "job_type", "mapping": mapping},
            "description": "A job to enqueue; `payload` is validated by the job type's model."}


def _with_csrf_refusals(all_paths: dict[str, Any]) -> dict[str, Any]:
    """The web UI's cookie session must send its CSRF header on any request that changes things."""
    for item in all_paths.values():
        for method in ("post", "patch"):
            op = item.get(method)
            if op is not None and op["security"] == SECURED:
                op["responses"] = dict(sorted({**op["responses"], "403": ERRORS[403]}.items()))
    return all_paths


def build_document() -> dict[str, Any]:
    components: dict[str, Any] = copy.deepcopy(RESPONSE_SCHEMAS)
    components["StorableJson"] = STORABLE_JSON
    for name, model in BODIES.items():
        components[name] = (_job_create(components) if model is JobCreate
                            else _model_schema(model, components))
    return {
        "openapi": "3.1.0",
        "info": {"title": "Switchyard", "version": "1", "description": DESCRIPTION},
        "paths": _with_csrf_refusals(paths()),
        "components": {
            "schemas": components,
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer",
                           "description": "An API token (`sy_...`)."},
                "cron": {"type": "apiKey", "in": "header", "name": "X-Cron-Secret",
                         "description": "The deployment's SWITCHYARD cron secret."},
            },
        },
        "security": SECURED,
    }
