"""The OpenAPI 3.1 document of the HTTP API, built from the request models and the job registry.

Request bodies come from the pydantic models themselves, so the document cannot drift from
what the server validates, and so do response bodies (app.api.responses, the models the serializers
build); tests run schemathesis against it and check every route is in it.
"""

from __future__ import annotations

import copy
from typing import Any

from pydantic import BaseModel

from app.api.openapi_components import REF, UUID, obj, ref, typed
from app.api.plan_schemas import PLAN_BODIES, PLAN_RESPONSES
from app.api.responses import RESPONSE_MODELS
from app.api.schemas import (
    NO_NUL,
    ChatListQuery,
    EventPageQuery,
    JobBatch,
    JobCreate,
    JobListQuery,
    JobRerun,
    ProjectCreate,
    ProjectUpdate,
    WorkflowRunBody,
)
from app.routes.code import IGNORED_HEADER, CodeTaskBody
from app.routes.effects import ResolveBody
from app.routes.functions import RUNS_LIMIT, RUNS_MAX, FunctionBody, RunBody
from app.routes.owner_jobs import RetryFilter
from app.routes.secrets import SecretBody
from app.routes.startup import ChatBody, DecisionBody, LaunchBody
from app.streams import event_log
from models.startup import APPROVAL_STATUSES, EFFECT_STATUSES
from tasks.engine import registry
from tasks.engine.status import JobStatus
from tasks.functions import store as function_store
from tasks.services import keystore
from tasks.services.effects.policy import KINDS
from tasks.services.effects.policy import operator as operator_policy
from tasks.workflows.spec import WorkflowSpec

JSON = "application/json"
SECURED = [{"bearer": []}]
CRON: list[dict[str, list[str]]] = [{"cron": []}]
METRICS: list[dict[str, list[str]]] = [{"metrics": []}]
PUBLIC: list[dict[str, list[str]]] = []

DESCRIPTION = """Durable jobs for AI agents. Every `/api/*` call needs `Authorization: Bearer
<token>` (tokens come from `switchyard token create`); another owner's project or job answers
404, never 403. Every 4xx/5xx body is `{"error": {"code", "message", "details"}}`. An answer
sent without reading the request body (a 413, a 401 before the body) carries `Connection: close`.

The monitor and diagnosis show a token its owner's jobs only; an admin token
(`switchyard token create OWNER --admin`) sees the fleet there.

Live events also come as JSON text frames over the WebSocket `/ws/projects/{pid}?cursor=<event
id>` or `?tail=N` (same auth, same event objects as the Server-Sent Events streams)."""


BODIES: dict[str, type[BaseModel]] = {"ProjectCreate": ProjectCreate,
                                      "ProjectUpdate": ProjectUpdate, "JobCreate": JobCreate,
                                      "JobBatch": JobBatch, "JobRerun": JobRerun,
                                      "RetryFilter": RetryFilter, "LaunchBody": LaunchBody,
                                      "ChatBody": ChatBody, "DecisionBody": DecisionBody,
                                      "SecretBody": SecretBody, "ResolveBody": ResolveBody,
                                      "CodeTaskBody": CodeTaskBody,
                                      "WorkflowSpec": WorkflowSpec,
                                      "WorkflowRunBody": WorkflowRunBody, **PLAN_BODIES,
                                      "FunctionBody": FunctionBody, "RunBody": RunBody}


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
    409: _error("Not in a state that allows this (`effect_unknown`: an earlier effect of the "
                "same action has an unknown outcome; resolve it first)."),
    413: _error("The request body is larger than 1 MiB."),
    422: _error("A missing, unknown or wrong-typed field, or a number PostgreSQL cannot store "
                "(`NaN`, `Infinity`, `1e999`) anywhere in the body; `details.fields` names each."),
    429: _error("Too many requests for this token (`rate_limited`), or too many failed "
                "authentications from this client address (`auth_rate_limited`).",
                **{"Retry-After": {"schema": typed("integer", minimum=0)}}),
    500: _error("An unexpected error; the body never carries internals."),
    503: _error("The database is unavailable for the moment (`database_unavailable`: retry "
                "after `Retry-After` seconds), or the artifact store "
                "(`artifact_store_unavailable`), or, from /readyz, not ready (`details.checks` "
                "says whether the database or the broker failed).",
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
CONFIRM_PARAMS = [{"name": "project", "in": "query", "required": True, "schema": UUID},
                  {"name": "token", "in": "query", "required": True,
                   "schema": typed("string", maxLength=200)}]
AID, EID = _path_param("aid", "approval"), _path_param("eid", "effect")
ARTID = _path_param("artid", "artifact")
SSE_PARAMS = [
    {"name": "cursor", "in": "query", "required": False, "schema": typed("integer", minimum=0),
     "description": "Replay every event after this event id (default 0: all), then go live."},
    {"name": "tail", "in": "query", "required": False,
     "schema": typed("integer", minimum=0, maximum=event_log.MAX_TAIL),
     "description": "Instead of `cursor`: open N events back (replay the last N stored "
                    "events, then go live; 0: live only). Older ones come from "
                    "`…/events/history?before=`. Not with `cursor` (400)."},
    {"name": "Last-Event-ID", "in": "header", "required": False,
     "schema": typed("string", pattern="^[0-9]+$"),
     "description": "The browser's reconnect cursor; it wins over `cursor` and `tail`, so an "
                    "EventSource that comes back gets only what it has not seen."},
]
EVENT_PAGE_PARAMS = [
    {"name": "before", "in": "query", "required": False,
     "schema": typed("integer", minimum=1, maximum=2**63 - 1),
     "description": "Events with a smaller id than this (the `next` of the previous page, or "
                    "the oldest id a stream sent); absent: the newest."},
    {"name": "limit", "in": "query", "required": False,
     "schema": typed("integer", minimum=1, maximum=event_log.MAX_PAGE,
                     default=EventPageQuery.model_fields["limit"].default)},
    {"name": "types", "in": "query", "required": False,
     "schema": typed("string", pattern=r"^[a-z_]+(,[a-z_]+)*$"),
     "description": "Only events of these comma-separated types (e.g. `status,step,log`)."},
]
CHAT_PAGE_PARAMS = [
    {"name": "limit", "in": "query", "required": False, "schema": typed(
        "integer", minimum=1, maximum=200, default=ChatListQuery.model_fields["limit"].default)},
    {"name": "before", "in": "query", "required": False, "schema": typed("string"),
     "description": "The opaque `next` cursor of the previous page."},
]
# Before OpenAPI 3.2 the `schema` of an event stream describes one event (comments aside).
# The replay's end (`event: replayed`, no `id:`) carries the id of the last event replayed.
REPLAY_END = obj({"cursor": typed("integer", minimum=0)})
SSE_EVENT = obj({"id": typed("string", pattern="^[0-9]+$"), "event": typed("string"),
                  "data": typed("string", contentMediaType=JSON,
                                contentSchema={"anyOf": [ref("Event"), REPLAY_END]})},
                 optional=("id",), extra=True)
SSE_OK = {200: {"description": "A `text/event-stream`: `id: <event id>`, `event: <type>`, "
                               "`data: <event JSON>`; a `: keep-alive` comment every 15 s. "
                               "Once the stored events are replayed, one `event: replayed` "
                               "with no `id:` and `data: {\"cursor\": <last replayed id>}`: "
                               "what follows is live.",
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
                               {200: _json("Ready.", "Readiness")}, (429, 503), secured=False)},
        "/metrics": {"get": _op(
            "metrics", "Prometheus metrics of the whole fleet, for the operator: "
            "`Authorization: Bearer $SWITCHYARD_METRICS_TOKEN` (an API token is refused). "
            "Figures from PostgreSQL are read at most once per SWITCHYARD_METRICS_CACHE_SECONDS.",
            {200: {"description": "Prometheus text exposition format.",
                   "content": {"text/plain": {"schema": typed("string")}}},
             401: _error("No, malformed or wrong metrics token.",
                         **{"WWW-Authenticate": {"schema": {"const": "Bearer"}}}),
             404: _error("`metrics_disabled`: SWITCHYARD_METRICS_TOKEN is not set, so /metrics "
                         "is off.")},
            (), secured=False, security=METRICS)},
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
            "patch": _op("update_project", "Change a project; `settings` is a merge patch: the "
                         "keys sent change, `null` clears one (in `permissions` and `caps` too).",
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
        "/api/projects/{pid}/jobs:batch": {"post": _op(
            "create_jobs", "Enqueue up to 1,000 jobs in one statement; each item is checked "
            "on its own and answered in order (its key honoured, a bad one refused alone).",
            {207: _json("One result per item, in order.", "JobBatchResult")},
            (*json_body, 404), params=[PID], body="JobBatch")},
        "/api/projects/{pid}/events": {"get": _op(
            "project_events", "A project's events, replayed from a cursor, then live.",
            SSE_OK, (400, 404), params=[PID, *SSE_PARAMS])},
        "/api/projects/{pid}/events/history": {"get": _op(
            "project_event_history", "A project's stored events, newest first, a page at a time.",
            {200: _json("A page; `next` is the `before` of the next older page.", "EventPage")},
            (404, 422), params=[PID, *EVENT_PAGE_PARAMS])},
        "/api/jobs": {"get": _op(
            "list_owner_jobs", "Jobs across all the caller's projects, newest first.",
            {200: _json("The jobs.", "JobList")}, (404, 422), params=_job_filters(PROJECT_FILTER))},
        "/api/jobs/retry": {"post": _op(
            "retry_matching", "Retry every failed job that matches a filter (a batch a call).",
            {202: _json("The jobs queued again; `more`: call again.", "RetryBatch")},
            (*json_body, 404), body="RetryFilter")},
        "/api/jobs/{jid}": {"get": _op("get_job", "One job with its steps.",
                                       {200: _json("The job.", "Job")}, (404,), params=[JID])},
        "/api/jobs/{jid}/steps/{seq}": {"get": _op(
            "get_step", "One step with its whole output (a job's view cuts large ones).",
            {200: _json("The step.", "Step")}, (404,), params=[JID, {
                "name": "seq", "in": "path", "required": True,
                "schema": typed("integer", minimum=1), "description": "The step's number."}])},
        "/api/jobs/{jid}/trajectory": {"get": _op(
            "get_trajectory", "The job's trajectory: every model turn (text, tokens), each tool "
            "call with its input, result and patch, the setup and each verification round, in "
            "order.", {200: _json("The trajectory.", "Trajectory")}, (404,), params=[JID])},
        "/api/jobs/{jid}/cancel": {"post": _op(
            "cancel_job", "Cancel a job and its descendants (running: at the next step).",
            {200: _json("The job after the cancel request.", "Job")}, (404,), params=[JID])},
        "/api/jobs/{jid}/retry": {"post": _op(
            "retry_job", "Retry a failed job with a fresh set of attempts.",
            {202: _json("Queued again.", "Job")}, (404, 409), params=[JID])},
        "/api/jobs/{jid}/rerun": {"post": _op(
            "rerun_job", "Rerun a finished job from one of its steps: a new job whose steps "
            "before `from_step` are copied and replayed, not run (`payload` edits the input).",
            {202: _json("The rerun, queued.", "JobRerunCreated"),
             200: _json("Made earlier with the same `idempotency_key`.", "JobRerunCreated")},
            (*json_body, 404, 409),
            params=[JID], body="JobRerun")},
        "/api/jobs/{jid}/events": {"get": _op(
            "job_events", "A job's events; the stream ends after its terminal status event.",
            SSE_OK, (400, 404), params=[JID, *SSE_PARAMS])},
        "/api/jobs/{jid}/events/history": {"get": _op(
            "job_event_history", "A job's stored events, newest first, a page at a time.",
            {200: _json("A page; `next` is the `before` of the next older page.", "EventPage")},
            (404, 422), params=[JID, *EVENT_PAGE_PARAMS])},
        "/api/jobs/{jid}/diagnosis": {"get": _op(
            "diagnose_job", "Why is this job where it is, in one sentence, with the facts.",
            {200: _json("The diagnosis.", "Diagnosis")}, (404,), params=[JID])},
        **_startup_paths(json_body),
        **_secret_paths(json_body),
        **_artifact_paths(),
        **_code_paths(json_body),
        **_workflow_paths(json_body),
        **_plan_paths(json_body),
        **_function_paths(json_body),
        "/api/monitor/queues": {"get": _op(
            "monitor_queues", "Per queue and job type: backlog, failures, throughput of the "
            "caller's jobs (an admin token: every tenant's; `scope` says which).",
            {200: _json("Queue statistics.", "QueueStats")}, ())},
        "/api/monitor/schedules": {"get": _op(
            "monitor_schedules", "Each project's daily schedules (night shift, digest, nudge): "
            "its time zone, the local time and the next runs (UTC), DST changes included.",
            {200: _json("The schedules.", "ScheduleList")}, ())},
        "/api/monitor/workers": {"get": _op(
            "monitor_workers", "The workers running the caller's jobs, `running` counting "
            "those only (an admin token: every worker seen in the last day and all it runs).",
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
            "launch", "Generate the idea packet of a project still at idea "
            "(phase0.generate_packet); a project past idea is 409 `already_launched`.",
            {202: _json("Enqueued.", "Launched"),
             200: _json("A launch already on its way (asked at once): that job.", "Launched")},
            (*json_body, 404, 409), params=[PID], body="LaunchBody")},
        "/api/projects/{pid}/chat": {
            "get": _op("list_chat", "The project's chat, newest first, a page at a time.",
                       {200: _json("A page; `next` is the `before` of the next older page.",
                                   "ChatList")}, (400, 404, 422),
                       params=[PID, *CHAT_PAGE_PARAMS]),
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
        "/api/contact/confirm": {
            "get": _op("confirm_contact_page", "The link mailed to a project's new "
                       "`contact_email`: a page whose button confirms the address (public).",
                       {200: {"description": "The confirmation page.", "content": {
                           "text/html": {"schema": typed("string")}}}}, (404,),
                       secured=False, params=CONFIRM_PARAMS),
            "post": _op("confirm_contact", "Confirm a project's new `contact_email`: the "
                        "daily digests and nudges go to it from now on (public; the token is "
                        "the credential, and stops working when the address changes).",
                        {200: _json("The address is confirmed.", "ContactConfirmed")}, (404,),
                        secured=False, params=CONFIRM_PARAMS)},
        "/api/projects/{pid}/memory": {"get": _op(
            "memory", "What the agents remember about the project (500 at most).",
            {200: _json("The memories.", "MemoryList")}, (404, 422), params=[PID, category])},
        **_effect_paths(json_body),
    }


def _effect_paths(json_body: tuple[int, ...]) -> dict[str, Any]:
    status = {"name": "status", "in": "query", "required": False,
              "schema": {"enum": list(EFFECT_STATUSES)}}
    return {
        "/api/projects/{pid}/effects": {"get": _op(
            "list_effects", "The project's effects (the ledger), newest first, arguments "
            "redacted; `status=unknown`: the ones a person must check and resolve.",
            {200: _json("The effects.", "EffectList")}, (404, 422), params=[PID, status])},
        "/api/projects/{pid}/packets": {"get": _op(
            "list_packets", "The project's phase packets, newest first (50 at most), each "
            "proposed action with the state of its approval.",
            {200: _json("The packets.", "PacketList")}, (404,), params=[PID])},
        "/api/jobs/{jid}/llm-usage": {"get": _op(
            "job_llm_usage", "What a job's model calls used: tokens and dollars per step and "
            "in total.", {200: _json("The usage.", "LlmUsage")}, (404,), params=[JID])},
        "/api/effects/{eid}/resolve": {"post": _op(
            "resolve_effect", "A person's verdict on an effect whose outcome is unknown.",
            {200: _json("The effect, resolved.", "Effect")}, (*json_body, 404, 409),
            params=[EID], body="ResolveBody")},
    }


def _secret_paths(json_body: tuple[int, ...]) -> dict[str, Any]:
    name = {"name": "name", "in": "path", "required": True,
            "schema": typed("string", pattern=f"^{keystore.NAME.pattern}$"),
            "description": f"The secret's name: {keystore.NAME_RULE}."}
    done = {204: {"description": "Done; no body."}}
    return {
        "/api/projects/{pid}/secrets": {"get": _op(
            "list_secrets", "The project's secrets: names and times, never values.",
            {200: _json("The secrets.", "SecretList")}, (404,), params=[PID])},
        "/api/projects/{pid}/secrets/{name}": {
            "put": _op("put_secret", "Set (or replace) a secret, sealed at rest; the value "
                       "is never returned, logged or put in an event.", done,
                       (*json_body, 404, 409, 422), params=[PID, name], body="SecretBody"),
            "delete": _op("delete_secret", "Forget a secret.", done, (404, 422),
                          params=[PID, name]),
        },
    }


def _code_paths(json_body: tuple[int, ...]) -> dict[str, Any]:
    started = _json("Enqueued.", "JobStarted")
    again = _json("Enqueued before (the same idempotency key, or the same issue or comment "
                  "delivered again): that job.", "JobStarted")
    github_headers = [
        {"name": "X-GitHub-Event", "in": "header", "required": False, "schema": typed("string"),
         "description": "`issues`, `issue_comment`, `ping`…; any other starts nothing."},
        {"name": "X-GitHub-Delivery", "in": "header", "required": False,
         "schema": typed("string"), "description": "The delivery's id (logged)."},
    ]
    webhook = _op(
        "github_webhook", "GitHub's webhook (no bearer token: the project's "
        "`github_webhook_secret` secret signs each delivery, `X-Hub-Signature-256`). An issue "
        "labelled `agent` (opened with it or given it) or a `/agent fix` comment on a pull "
        "request by an OWNER, MEMBER or COLLABORATOR starts `code.run_task`; one job per issue "
        "or comment, however often it is delivered. A `pull_request` closed decides the "
        "project's merge gates of that pull request: merged approves them, unmerged rejects.",
        {202: started,
         200: _json("Enqueued before (the same issue or comment delivered again): that job "
                    "(`job_id`, `status_url`). Or, for a `pull_request` closed: the merge gates "
                    "(`pr_merge` approvals of that pull request) it decided (`settled`).",
                    "WebhookAnswer"),
         204: {"description": "The event starts nothing; the header says why.",
               "headers": {IGNORED_HEADER: {"schema": typed("string")}}},
         401: _error("No or a wrong signature, or no such project, or the project has no "
                     "`github_webhook_secret` (which of these is not told)."),
         502: _error("GitHub did not tell the pull request's branch (`github_error`).")},
        (400, 413, 503), secured=False, params=[PID, *github_headers],
        security=[{"github_signature": []}])
    webhook["requestBody"] = {"required": True, "content": {
        JSON: {"schema": typed("object")},
        "application/x-www-form-urlencoded": {"schema": obj({"payload": typed("string")})}}}
    return {
        "/api/projects/{pid}/code-tasks": {"post": _op(
            "create_code_task", "Start the coding agent on a repository (`code.run_task`): "
            "it clones `repo_url`, works on `task`, pushes a branch and, with `github_repo`, "
            "opens a pull request.", {202: started, 200: again}, (*json_body, 404),
            params=[PID], body="CodeTaskBody")},
        "/api/webhooks/github/{pid}": {"post": webhook},
    }


def _workflow_paths(json_body: tuple[int, ...]) -> dict[str, Any]:
    wid = {"name": "wid", "in": "path", "required": True,
           "schema": typed("string", format="uuid")}
    saved = _json("Saved as this version.", "WorkflowSaved")
    return {
        "/api/projects/{pid}/workflows": {
            "post": _op("save_workflow", "Save a workflow: named steps (job types and "
                        "payloads with `{{inputs.x}}` / `{{steps.a.output.b}}` templates), their "
                        "`depends_on`, conditions, failure policy and approval gates. Each save "
                        "of a name is a new immutable version (the newest holding exactly this "
                        "spec answers 200 with it). Every problem (a cycle, an unknown "
                        "dependency or job type, a template reading a step that is not "
                        "upstream, a condition that does not parse…) is a 422 "
                        "`invalid_workflow` listing `details.problems`.",
                        {201: saved, 200: saved}, (*json_body, 404, 422), params=[PID],
                        body="WorkflowSpec"),
            "get": _op("list_workflows", "The project's workflows: each name with its "
                       "versions, newest first.", {200: _json("The workflows.", "WorkflowList")},
                       (404,), params=[PID])},
        "/api/workflows/{wid}": {"get": _op(
            "get_workflow", "One version of a workflow, its spec as saved; `?version=n` "
            "answers that version of the same name instead (a 422 when it has none).",
            {200: _json("The workflow.", "Workflow")}, (404, 422), params=[wid, {
                "name": "version", "in": "query", "required": False,
                "schema": typed("integer", minimum=1, maximum=1_000_000)}])},
        "/api/workflows/{wid}/runs": {
            "post": _op("run_workflow", "Run this version of the workflow (or `version`, "
                        "another of the same name) with `inputs`: a `workflow.run` job whose "
                        "steps are child jobs, started as their dependencies end (at most "
                        "`max_parallel` at once), skipped when their condition is false, held "
                        "for an approval when gated. 200 answers an earlier run with the same "
                        "`idempotency_key`.",
                        {202: _json("Started.", "JobStarted"),
                         200: _json("Started earlier.", "JobStarted")},
                        (*json_body, 404, 422), params=[wid], body="WorkflowRunBody"),
            "get": _op("list_workflow_runs", "This version's 50 newest runs.",
                       {200: _json("The runs.", "WorkflowRunList")}, (404,), params=[wid])},
        "/api/workflow-runs/{jid}": {"get": _op(
            "get_workflow_run", "A run and each of its steps: status (`pending`, "
            "`waiting_approval`, `running`, `completed`, `failed`, `skipped`, `canceled`), "
            "child job, output and error.", {200: _json("The run.", "WorkflowRun")}, (404,),
            params=[JID])},
    }


def _plan_paths(json_body: tuple[int, ...]) -> dict[str, Any]:
    plan = _path_param("plan_id", "plan")
    return {
        "/api/projects/{pid}/plans": {
            "post": _op("create_plan", "Hand a goal to the planner (a plan.generate job): the "
                        "model splits it into tasks with roles and dependencies (validated; "
                        "asked again with the problems, up to 3 times), then, unless "
                        "`auto_approve`, the plan waits for approval in the inbox; it then "
                        "runs as a DAG, each task a job of its role's type, and is revised "
                        "when a task fails for good.",
                        {202: _json("Accepted; `status_url` is the plan.", "PlanAccepted")},
                        (*json_body, 404), params=[PID], body="PlanCreate"),
            "get": _op("list_plans", "The project's plans, newest first (100 at most).",
                       {200: _json("The plans.", "PlanList")}, (404,), params=[PID])},
        "/api/plans/{plan_id}": {
            "get": _op("get_plan", "A plan: its status, its current version's tasks (status, "
                       "dependencies, output, job) and its versions (generated, edited, "
                       "revised).", {200: _json("The plan.", "PlanOut")}, (404,),
                       params=[plan]),
            "put": _op("edit_plan", "Replace the tasks of a plan awaiting approval: stored as "
                       "a new version with a new approval (the old one is superseded). Tasks "
                       "are checked like the model's (unique ids, known dependencies, no "
                       "cycle): every problem in one 422 `invalid_plan`, nothing written; a "
                       "plan not awaiting approval is a 409.",
                       {200: _json("The plan, edited.", "PlanOut")},
                       (*json_body, 404, 409, 422), params=[plan], body="PlanEdit")},
    }


def _function_paths(json_body: tuple[int, ...]) -> dict[str, Any]:
    name = {"name": "name", "in": "path", "required": True,
            "schema": typed("string", pattern=function_store.NAME_PATTERN),
            "description": f"The function's name: {function_store.NAME_RULE}."}
    whole = typed("integer", minimum=1, maximum=2**31 - 1)
    version = {"name": "version", "in": "path", "required": True, "schema": whole}
    query_version = {"name": "version", "in": "query", "required": False, "schema": whole,
                     "description": "Which version (the newest without it)."}
    limit = {"name": "limit", "in": "query", "required": False,
             "schema": typed("integer", minimum=1, maximum=RUNS_MAX, default=RUNS_LIMIT)}
    saved = _json("Saved as this version.", "FunctionSaved")
    detail = _json("The version's code, with every version of the function.", "FunctionDetail")
    base = "/api/projects/{pid}/functions"
    return {
        base: {
            "post": _op("save_function", "Save a function's JavaScript (a module exporting "
                        "`async function runTask(input, tools)`, or a script body using "
                        "`input`, `tools` and `supabase` that returns a value). Each save of a "
                        "name is a new immutable version; the newest holding exactly this code "
                        "and description answers 200 with it. A syntax error is a 422 "
                        "`invalid_function` with `details.line` and `details.column`.",
                        {201: saved, 200: saved}, (*json_body, 404), params=[PID],
                        body="FunctionBody"),
            "get": _op("list_functions", "The project's functions: each name with its "
                       "versions, newest first.", {200: _json("The functions.", "FunctionList")},
                       (404,), params=[PID])},
        base + "/{name}": {"get": _op(
            "get_function", "A function's code (the newest version, or `?version=`), and its "
            "versions.", {200: detail}, (404, 422), params=[PID, name, query_version])},
        base + "/{name}/versions/{version}": {"get": _op(
            "get_function_version", "One version of a function, its code as saved.",
            {200: detail}, (404,), params=[PID, name, version])},
        base + "/{name}/runs": {
            "post": _op("run_function", "Run a function (`function.run`) on `input`: the "
                        "job's result is `{\"output\": …}`, or it fails with the JavaScript "
                        "error and its line. Each tool call is one of the job's steps "
                        "(`call:<n>:<tool>`).",
                        {202: _json("Enqueued.", "JobStarted"),
                         200: _json("Enqueued before (the same idempotency key): that job.",
                                    "JobStarted")},
                        (*json_body, 404), params=[PID, name], body="RunBody"),
            "get": _op("list_function_runs", "A function's runs, newest first (nested runs "
                       "too: `parent_job_id`), each with its status, version, input, result "
                       "and how many tool calls it recorded; `job_url` shows its steps.",
                       {200: _json("The runs.", "FunctionRunList")}, (404, 422),
                       params=[PID, name, limit])},
    }


def _artifact_paths() -> dict[str, Any]:
    text = typed("string")
    return {
        "/api/projects/{pid}/artifacts": {"get": _op(
            "list_project_artifacts", "The project's newest artifacts (100 at most), newest "
            "first, each with the job that wrote it.",
            {200: _json("The artifacts.", "ProjectArtifactList")}, (404,), params=[PID])},
        "/api/jobs/{jid}/artifacts": {"get": _op(
            "list_artifacts", "The files a job wrote (reports, screenshots…), in step order; "
            "`url` downloads one.", {200: _json("The artifacts.", "ArtifactList")}, (404,),
            params=[JID])},
        "/api/artifacts/{artid}": {"get": _op(
            "download_artifact", "An artifact's bytes, streamed, with the content type it was "
            "stored with. Images (PNG, JPEG, GIF, WebP) and PDFs come `inline`, anything else "
            "(HTML, SVG, text…) as an `attachment`; always `nosniff`, and every type but PDF "
            "in a sandboxing CSP, so no file runs as a page of this origin.",
            {200: {"description": "The bytes; their SHA-256 is the `ETag` (and the listing's "
                                  "`sha256`).",
                   "headers": {"Content-Disposition": {"schema": text},
                               "X-Content-Type-Options": {"schema": {"const": "nosniff"}},
                               "ETag": {"schema": text}},
                   "content": {"*/*": {"schema": typed("string", format="binary")}}},
             404: _error("No such artifact for this owner (`not_found`), or its bytes are "
                         "gone from the store (`artifact_missing`).")},
            (503,), params=[ARTID])},
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
    for name, nested in schema.pop("$defs", {}).items():
        _put(components, name, nested)
    return schema


def _put(components: dict[str, Any], name: str, schema: dict[str, Any]) -> None:
    # Two models may share a nested one; two different shapes under one name may not.
    if components.setdefault(name, schema) != schema:
        raise ValueError(f"two different schemas are named {name!r}")


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
        before = set(components)
        components[payload_name] = _storable(
            _model_schema(registry.get(name).payload_model, components))
        for nested in set(components) - before - {payload_name}:  # a payload's inner models
            components[nested] = _storable(components[nested])
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
        for method in ("post", "patch", "put", "delete"):
            op = item.get(method)
            if op is not None and op["security"] == SECURED:
                op["responses"] = dict(sorted({**op["responses"], "403": ERRORS[403]}.items()))
    return all_paths


def _operator_policy(components: dict[str, Any]) -> None:
    """This server's effect policy in the document: what a 422 would refuse is not valid."""
    operator = operator_policy()
    for kind, ceiling in operator.ceilings.items():
        cap = components["EffectCaps"]["properties"][f"{kind}_per_day"]["anyOf"][0]
        cap["maximum"] = ceiling
    for kind in KINDS:
        if kind not in operator.allowed:
            allowed = components["EffectPermissions"]["properties"][kind]["anyOf"]
            allowed[0] = {"type": "boolean", "const": False,
                          "description": "The operator does not allow this kind here."}


# Where an id comes from: operation -> (the path parameter it feeds, its JSON pointer in the
# 2xx body). Every operation taking that parameter gets a link from it (streams aside: they
# never end), so a client (and schemathesis' stateful run) can chain the calls.
PRODUCERS: dict[str, tuple[str, str]] = {
    "create_project": ("pid", "/id"), "list_projects": ("pid", "/items/0/id"),
    "create_job": ("jid", "/job_id"), "launch": ("jid", "/job_id"),
    "post_chat": ("jid", "/job_id"), "list_jobs": ("jid", "/items/0/id"),
    "inbox": ("aid", "/items/0/id"), "list_effects": ("eid", "/items/0/id"),
    "list_artifacts": ("artid", "/items/0/id"), "create_code_task": ("jid", "/job_id"),
}
NOT_LINKED = ("project_events", "job_events")


def _links(all_paths: dict[str, Any]) -> dict[str, Any]:
    ops = [op for item in all_paths.values() for op in item.values()]
    takers: dict[str, list[str]] = {}
    for op in ops:
        for param in op.get("parameters", []):
            if param["in"] == "path" and op["operationId"] not in NOT_LINKED:
                takers.setdefault(param["name"], []).append(op["operationId"])
    for op in ops:
        if op["operationId"] not in PRODUCERS:
            continue
        name, pointer = PRODUCERS[op["operationId"]]
        for code, response in op["responses"].items():
            if code.startswith("2"):
                response["links"] = {
                    f"to_{target}": {"operationId": target,
                                     "parameters": {name: f"$response.body#{pointer}"}}
                    for target in takers.get(name, [])}
    return all_paths


# Every answer's model, by component name (the plans' live beside their request bodies).
ANSWERS: dict[str, type[BaseModel]] = {**RESPONSE_MODELS, **PLAN_RESPONSES}


def build_document() -> dict[str, Any]:
    components: dict[str, Any] = {"StorableJson": STORABLE_JSON}
    for name, response in ANSWERS.items():
        _put(components, name, _model_schema(response, components))
    for name, model in BODIES.items():
        _put(components, name, _job_create(components) if model is JobCreate
             else _model_schema(model, components))
    # A run's input is any JSON a payload may hold: the StorableJson the model cannot name.
    components["RunBody"]["properties"]["input"] = ref("StorableJson")
    _operator_policy(components)
    return {
        "openapi": "3.1.0",
        "info": {"title": "Switchyard", "version": "1", "description": DESCRIPTION},
        "paths": _links(_with_csrf_refusals(paths())),
        "components": {
            "schemas": components,
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer",
                           "description": "An API token (`sy_...`)."},
                "cron": {"type": "apiKey", "in": "header", "name": "X-Cron-Secret",
                         "description": "The deployment's SWITCHYARD cron secret."},
                "metrics": {"type": "http", "scheme": "bearer",
                            "description": "The operator's SWITCHYARD_METRICS_TOKEN."},
                "github_signature": {
                    "type": "apiKey", "in": "header", "name": "X-Hub-Signature-256",
                    "description": "`sha256=` and the HMAC-SHA256 of the body under the "
                                   "project's `github_webhook_secret` secret."},
            },
        },
        "security": SECURED,
    }
