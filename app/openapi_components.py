"""Response bodies of the HTTP API as JSON Schema: the components of the OpenAPI document.

Requests are described by their pydantic models (app.schemas); responses are built by hand
in app.queries and friends, so they are written down here and checked by schemathesis.
"""

from __future__ import annotations

from typing import Any

from models.startup import APPROVAL_STATUSES, EXECUTION_STATUSES
from tasks.status import JobStatus

REF = "#/components/schemas/{model}"


def typed(type_: str | list[str], **kw: Any) -> dict[str, Any]:
    return {"type": type_, **kw}


def obj(props: dict[str, Any], *, optional: tuple[str, ...] = (),
         extra: bool | dict[str, Any] = False) -> dict[str, Any]:
    return {"type": "object", "properties": props,
            "required": [k for k in props if k not in optional], "additionalProperties": extra}


def ref(name: str) -> dict[str, str]:
    return {"$ref": REF.format(model=name)}


STAMP = typed("string", format="date-time")
MAYBE_STAMP = typed(["string", "null"], format="date-time")
UUID = typed("string", format="uuid")
MAYBE_UUID = typed(["string", "null"], format="uuid")
COUNT = typed("integer", minimum=0)

STEP = obj({
    "seq": typed("integer", minimum=1), "name": typed("string"),
    "status": {"enum": ["running", "completed", "failed"]}, "output": {},
    "error": typed(["string", "null"]), "attempts": COUNT, "started_at": STAMP,
    "finished_at": MAYBE_STAMP,
})
JOB_FIELDS: dict[str, Any] = {
    "id": UUID, "project_id": UUID, "job_type": typed("string"),
    "status": {"enum": [s.value for s in JobStatus]}, "attempts": COUNT,
    "max_attempts": typed("integer", minimum=1), "priority": typed("integer", minimum=0, maximum=9),
    "payload": typed("object"), "result": {}, "last_error": typed(["string", "null"]),
    "created_at": STAMP, "started_at": MAYBE_STAMP, "completed_at": MAYBE_STAMP,
    "parent_job_id": typed(["string", "null"], format="uuid"),
}

RESPONSE_SCHEMAS: dict[str, Any] = {
    "Error": obj({"error": obj({
        "code": typed("string", pattern="^[a-z][a-z0-9_]*$"),
        "message": typed("string", minLength=1), "details": typed("object")})}),
    "Project": obj({"id": UUID, "name": typed("string"), "goal": typed(["string", "null"]),
                    "night_shift": typed("boolean"), "phase": typed("string"),
                    "settings": typed("object"), "created_at": STAMP}),
    "ProjectList": obj({"items": typed("array", items=ref("Project"))}),
    "JobAccepted": obj({"job_id": UUID, "status": {"enum": [s.value for s in JobStatus]},
                        "created": typed("boolean"), "status_url": typed("string"),
                        "events_url": typed("string")}),
    "JobSummary": obj(JOB_FIELDS),
    "Job": obj({**JOB_FIELDS, "steps": typed("array", items=ref("Step"))}),
    "Step": STEP,
    "JobPage": obj({"items": typed("array", items=ref("JobSummary")),
                    "next": typed(["string", "null"])}),
    "Diagnosis": obj({"job_id": UUID, "status": {"enum": [s.value for s in JobStatus]},
                      "reason": typed("string"), "summary": typed("string"),
                      "facts": typed("object"), "checked_at": STAMP}),
    "QueueStats": obj({
        "items": typed("array", items=obj({
            "queue": typed("string"), "job_type": typed("string"), "queued": COUNT,
            "scheduled": COUNT, "running": COUNT, "waiting": COUNT, "failed_last_hour": COUNT,
            "oldest_queued_seconds": typed(["number", "null"]), "completed_last_minute": COUNT,
            "completed_last_hour": COUNT})),
        "completed_per_minute": typed("object", additionalProperties=typed("array", items=obj({
            "minute": STAMP, "completed": COUNT}))),
    }),
    "Workers": obj({"items": typed("array", items=obj({
        "worker": typed("string"), "hostname": typed("string"), "pid": typed("integer"),
        "queues": {}, "started_at": STAMP, "last_heartbeat_at": STAMP,
        "seconds_since_heartbeat": typed("number"), "alive": typed("boolean"),
        "stopped_at": MAYBE_STAMP, "running": COUNT}))}),
    "JobList": obj({"items": typed("array", items=ref("JobSummary"))}),
    "RetryBatch": obj({"retried": typed("array", items=UUID), "count": COUNT,
                       "more": typed("boolean")}),
    "JobStarted": obj({"job_id": UUID, "status_url": typed("string")}),
    "ChatPosted": obj({"message_id": UUID, "job_id": UUID}),
    "ChatList": obj({"items": typed("array", items=obj({
        "id": UUID, "role": typed("string"), "content": typed("string"), "created_at": STAMP,
        "job_id": MAYBE_UUID}))}),
    "Approval": obj({
        "id": UUID, "project_id": UUID, "action_type": typed("string"),
        "title": typed("string"), "action_args": typed("object"), "args_hash": typed("string"),
        "status": {"enum": list(APPROVAL_STATUSES)}, "version": typed("integer", minimum=1),
        "expires_at": MAYBE_STAMP, "decided_at": MAYBE_STAMP,
        "execution_status": {"enum": list(EXECUTION_STATUSES)}, "execution_job_id": MAYBE_UUID,
        "source_job_id": MAYBE_UUID, "created_at": STAMP}),
    "ApprovalList": obj({"items": typed("array", items=ref("Approval"))}),
    "Enqueued": obj({"enqueued": typed("object", additionalProperties=COUNT)}),
    "MemoryList": obj({"items": typed("array", items=obj({
        "id": UUID, "category": typed("string"), "key": typed("string"),
        "content": typed("string"), "source_job_id": MAYBE_UUID,
        "source_step": typed(["string", "null"]), "updated_at": STAMP}))}),
    "Event": obj({"id": typed("integer", minimum=1),
                  "job_id": typed(["string", "null"], format="uuid"), "project_id": UUID,
                  "type": typed("string"), "message": typed("string"),
                  "data": typed("object"), "created_at": STAMP}),
    "Health": obj({"status": {"const": "ok"}}),
    "Readiness": obj({"status": {"const": "ready"},
                      "checks": obj({"database": typed("string"), "broker": typed("string")})}),
}
