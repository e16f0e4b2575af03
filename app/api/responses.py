"""Response bodies of the HTTP API as pydantic models: one home for each shape.

The serializers build these and dump them (`model_dump(mode="json")`), and the OpenAPI
document's response components are generated from them (app.api.openapi), so what the server
sends and what the document promises cannot drift apart. Every model refuses unknown keys
(additionalProperties false) and has no defaults: every field is sent, null or not.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, GetCoreSchemaHandler, PlainSerializer
from pydantic_core import core_schema

from models.schema import STEP_STATUSES
from models.startup import APPROVAL_STATUSES, EFFECT_STATUSES, EXECUTION_STATUSES
from tasks.engine.status import JobStatus


class OneOf:
    """A string from a fixed tuple kept elsewhere (a table's CHECK): `enum` in the schema."""

    def __init__(self, values: tuple[str, ...]) -> None:
        self.values = values

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler):
        return core_schema.literal_schema(list(self.values))


def _iso(value: datetime) -> str:
    return value.isoformat()  # "+00:00", as the API has always written it (pydantic: "Z")


Stamp = Annotated[datetime, PlainSerializer(_iso, return_type=str)]
Count = Annotated[int, Field(ge=0)]
JSONObject = dict[str, Any]
ApprovalStatus = Annotated[str, OneOf(APPROVAL_STATUSES)]
ExecutionStatus = Annotated[str, OneOf(EXECUTION_STATUSES)]
EffectStatus = Annotated[str, OneOf(EFFECT_STATUSES)]
StepStatus = Annotated[str, OneOf(STEP_STATUSES)]
# The caller's own jobs, or (an admin token) every tenant's.
MonitorScope = Literal["owner", "fleet"]


class Response(BaseModel):
    model_config = ConfigDict(extra="forbid")

    def dump(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class ErrorDetail(Response):
    code: str = Field(pattern="^[a-z][a-z0-9_]*$")
    message: str = Field(min_length=1)
    details: JSONObject


class Error(Response):
    error: ErrorDetail


class Project(Response):
    id: uuid.UUID
    name: str
    goal: str | None
    night_shift: bool
    phase: str
    settings: JSONObject
    created_at: Stamp


class ProjectList(Response):
    items: list[Project]


class Step(Response):
    seq: Annotated[int, Field(ge=1)]
    name: str
    status: StepStatus
    # In a job's view an output over OUTPUT_PREVIEW_BYTES is cut: `output` is null,
    # `output_preview` its first bytes as JSON text, and `output_url` the step's whole.
    output: Any
    error: str | None
    attempts: Count
    started_at: Stamp
    finished_at: Stamp | None
    output_truncated: bool = False
    output_preview: str | None = None
    output_bytes: Count | None = None
    output_url: str | None = None


class JobSummary(Response):
    id: uuid.UUID
    project_id: uuid.UUID
    job_type: str
    status: JobStatus
    attempts: Count
    max_attempts: Annotated[int, Field(ge=1)]
    priority: Annotated[int, Field(ge=0, le=9)]
    payload: JSONObject
    result: Any
    last_error: str | None
    created_at: Stamp
    started_at: Stamp | None
    completed_at: Stamp | None
    parent_job_id: uuid.UUID | None
    rerun_of: uuid.UUID | None = None  # the job this one reruns from a step


class Job(JobSummary):
    steps: list[Step]


class JobPage(Response):
    items: list[JobSummary]
    next: str | None


class JobList(Response):
    items: list[JobSummary]


class JobAccepted(Response):
    job_id: uuid.UUID
    status: JobStatus
    created: bool
    status_url: str
    events_url: str


class BatchItem(Response):
    """One item of a jobs:batch answer: 202 created, 200 already enqueued with its key, or
    the 4xx that refused it (nothing was written for it)."""
    status: int = Field(ge=200, le=499)
    job_id: uuid.UUID | None = None
    created: bool | None = None
    status_url: str | None = None
    error: ErrorDetail | None = None


class JobBatchResult(Response):
    items: list[BatchItem]


class JobStarted(Response):
    job_id: uuid.UUID
    status_url: str


class Launched(Response):
    job_id: uuid.UUID
    created: bool  # false: a launch already on its way (asked at once) answers
    status_url: str


class Schedule(Response):
    project_id: uuid.UUID
    project_name: str
    schedule: str  # the job type it enqueues
    timezone: str  # the project's IANA zone (UTC without one)
    local_time: str  # HH:MM on the project's clock (the first tick at or after it)
    next_runs: list[Stamp]  # UTC, the same rule as the scheduler (DST included)


class ScheduleList(Response):
    items: list[Schedule]


class JobRerunCreated(Response):
    job_id: uuid.UUID
    rerun_of: uuid.UUID
    copied_steps: Count  # steps before from_step, copied from the original and replayed
    status_url: str
    events_url: str


class RetryBatch(Response):
    retried: list[uuid.UUID]
    count: Count
    more: bool


class Diagnosis(Response):
    job_id: uuid.UUID
    status: JobStatus
    reason: str
    summary: str
    facts: JSONObject
    checked_at: Stamp


class QueueRow(Response):
    queue: str
    job_type: str
    queued: Count
    # Of `queued`, those not sent to a worker yet: waiting in PostgreSQL for their owner's
    # turn (SWITCHYARD_OWNER_MAX_ACTIVE), or for the dispatch sweep to send them.
    held_back: Count
    scheduled: Count
    running: Count
    waiting: Count
    failed_last_hour: Count
    oldest_queued_seconds: float | None
    completed_last_minute: Count
    completed_last_hour: Count


class MinuteCount(Response):
    minute: Stamp
    completed: Count


class QueueStats(Response):
    scope: MonitorScope
    items: list[QueueRow]
    completed_per_minute: dict[str, list[MinuteCount]]


class Worker(Response):
    worker: str
    hostname: str
    pid: int
    queues: Any
    started_at: Stamp
    last_heartbeat_at: Stamp
    seconds_since_heartbeat: float
    alive: bool
    stopped_at: Stamp | None
    running: Count


class Workers(Response):
    scope: MonitorScope
    items: list[Worker]


class ChatPosted(Response):
    message_id: uuid.UUID
    job_id: uuid.UUID


class ChatMessage(Response):
    id: uuid.UUID
    role: str
    content: str
    created_at: Stamp
    job_id: uuid.UUID | None


class ChatList(Response):
    items: list[ChatMessage]
    next: str | None


class Approval(Response):
    id: uuid.UUID
    project_id: uuid.UUID
    action_type: str
    title: str
    action_args: JSONObject
    args_hash: str
    status: ApprovalStatus
    version: Annotated[int, Field(ge=1)]
    expires_at: Stamp | None
    decided_at: Stamp | None
    execution_status: ExecutionStatus
    execution_job_id: uuid.UUID | None
    source_job_id: uuid.UUID | None
    created_at: Stamp


class ApprovalList(Response):
    items: list[Approval]


class Enqueued(Response):
    enqueued: dict[str, Count]


class Secret(Response):
    name: str
    created_at: Stamp
    updated_at: Stamp


class SecretList(Response):
    items: list[Secret]


class Memory(Response):
    id: uuid.UUID
    category: str
    key: str
    content: str
    source_job_id: uuid.UUID | None
    source_step: str | None
    updated_at: Stamp


class MemoryList(Response):
    items: list[Memory]


class Resolution(Response):
    outcome: Literal["succeeded", "failed"]
    note: str
    by: str | None
    at: Stamp | None


class Effect(Response):
    id: uuid.UUID
    kind: str
    key: str
    status: EffectStatus
    provider_ref: str | None
    args: JSONObject
    error: str | None
    approval_id: uuid.UUID | None
    job_id: uuid.UUID | None
    created_at: Stamp
    updated_at: Stamp
    completed_at: Stamp | None
    resolution: Resolution | None


class EffectList(Response):
    items: list[Effect]


class ActionApproval(Response):
    id: uuid.UUID
    status: ApprovalStatus
    version: Annotated[int, Field(ge=1)]
    execution_status: ExecutionStatus
    execution_job_id: uuid.UUID | None
    decided_at: Stamp | None


class PacketAction(Response):
    type: str | None
    title: str | None
    args: JSONObject
    approval: ActionApproval | None


class Packet(Response):
    id: uuid.UUID
    phase: Annotated[int, Field(ge=0)]
    title: str
    summary: str
    insights: list[str]
    actions: list[PacketAction]
    job_id: uuid.UUID
    created_at: Stamp


class PacketList(Response):
    items: list[Packet]


class Usage(Response):
    calls: Count
    input_tokens: Count
    output_tokens: Count
    cost_usd: Annotated[float, Field(ge=0)]


class StepUsage(Usage):
    seq: int | None
    name: str | None
    # Which models answered the step's calls, as "provider/model" (models by role, issue 27).
    models: list[str] = []


class LlmUsage(Response):
    total: Usage
    steps: list[StepUsage]


class Event(Response):
    id: Annotated[int, Field(ge=1)]
    job_id: uuid.UUID | None
    project_id: uuid.UUID
    type: str
    message: str
    data: JSONObject
    created_at: Stamp


class EventPage(Response):
    items: list[Event]
    next: Annotated[int, Field(ge=1)] | None


class Health(Response):
    status: Literal["ok"]


class ReadinessChecks(Response):
    database: str
    migrations: str  # "ok", or what to run: a database not migrated to this code's newest
    broker: str


class Readiness(Response):
    status: Literal["ready"]
    checks: ReadinessChecks


class Trajectory(Response):
    job_id: uuid.UUID
    job_type: str
    status: str
    result: Any
    # In step order, each with its `kind`: model, tool, setup, verify or step
    # (tasks.coding.trajectory).
    items: list[JSONObject]


class ContactConfirmed(Response):
    project_id: uuid.UUID
    contact_email: str
    confirmed: Literal[True]


# The OpenAPI document's response components, by name; nested models come along as $defs.
class Artifact(Response):
    id: uuid.UUID
    kind: str
    name: str
    content_type: str
    size: Count
    sha256: Annotated[str, Field(pattern="^[0-9a-f]{64}$")]
    url: str


class ArtifactList(Response):
    items: list[Artifact]


class ProjectArtifact(Artifact):
    job_id: uuid.UUID
    created_at: Stamp


class ProjectArtifactList(Response):
    items: list[ProjectArtifact]


class WorkflowSaved(Response):
    id: uuid.UUID
    name: str
    version: Annotated[int, Field(ge=1)]


class WorkflowSummary(Response):
    name: str
    versions: list[Annotated[int, Field(ge=1)]]  # newest first
    latest_id: uuid.UUID
    updated_at: Stamp


class WorkflowList(Response):
    items: list[WorkflowSummary]


class Workflow(Response):
    id: uuid.UUID
    project_id: uuid.UUID
    name: str
    version: Annotated[int, Field(ge=1)]
    spec: dict[str, Any]
    created_at: Stamp


class WorkflowRunStep(Response):
    status: Literal["pending", "waiting_approval", "running", "completed", "failed", "skipped",
                    "canceled"]
    job_id: uuid.UUID | None
    output: Any
    error: str | None
    approval_id: uuid.UUID | None


class WorkflowRun(Response):
    job_id: uuid.UUID
    status: JobStatus
    error: str | None
    workflow_id: uuid.UUID
    name: str | None
    version: Annotated[int, Field(ge=1)] | None
    inputs: dict[str, Any]
    spec: dict[str, Any] | None
    created_at: Stamp
    completed_at: Stamp | None
    steps: dict[str, WorkflowRunStep]


class WorkflowRunSummary(Response):
    job_id: uuid.UUID
    status: JobStatus
    inputs: dict[str, Any]
    created_at: Stamp


class WorkflowRunList(Response):
    items: list[WorkflowRunSummary]


class WebhookAnswer(Response):
    """GitHub's webhook, 200: a job enqueued before, or the merge gates a closing decided."""
    job_id: uuid.UUID | None = None
    status_url: str | None = None
    settled: list[uuid.UUID] | None = None

class FunctionSaved(Response):
    name: str
    version: Annotated[int, Field(ge=1)]


class FunctionSummary(Response):
    name: str
    versions: list[Annotated[int, Field(ge=1)]]  # newest first
    description: str  # the newest version's
    updated_at: Stamp


class FunctionList(Response):
    items: list[FunctionSummary]


class FunctionVersionInfo(Response):
    version: Annotated[int, Field(ge=1)]
    description: str
    created_by_job: uuid.UUID | None
    created_at: Stamp


class FunctionDetail(Response):
    name: str
    version: Annotated[int, Field(ge=1)]
    code: str
    language: Literal["javascript"]
    description: str
    created_by_job: uuid.UUID | None
    created_at: Stamp
    versions: list[FunctionVersionInfo]  # newest first


class FunctionRun(Response):
    job_id: uuid.UUID
    status: JobStatus
    version: Annotated[int, Field(ge=1)] | None
    input: Any
    result: Any
    last_error: str | None
    parent_job_id: uuid.UUID | None
    calls: Count
    created_at: Stamp
    started_at: Stamp | None
    completed_at: Stamp | None
    job_url: str  # the job with its steps: one per tool call, call:<n>:<tool>


class FunctionRunList(Response):
    items: list[FunctionRun]


RESPONSE_MODELS: dict[str, type[Response]] = {model.__name__: model for model in (
    Error, Project, ProjectList, JobAccepted, JobBatchResult, JobSummary, Job, Step, JobPage,
    JobList,
    Diagnosis, QueueStats, Workers, RetryBatch, JobStarted, Launched, JobRerunCreated, Schedule,
    ScheduleList, ChatPosted,
    ChatList, Approval,
    ApprovalList, Enqueued, SecretList, MemoryList, Effect, EffectList, PacketList, LlmUsage,
    Event, EventPage, Health, Readiness, ContactConfirmed, Trajectory, ArtifactList,
    ProjectArtifactList, WorkflowSaved, WorkflowList, Workflow, WorkflowRun, WorkflowRunList,
    WebhookAnswer, FunctionSaved, FunctionList, FunctionDetail, FunctionRunList)}
