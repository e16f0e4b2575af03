"""The planner's request and response bodies (app.routes.plans); the OpenAPI document is
built from them. The tasks' DAG rules (unique ids, known dependencies, no cycle) are not
JSON Schema: a schema-valid edit may still be a 422."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from app.api.responses import OneOf, Response, Stamp
from app.api.schemas import Text
from models.plans import PLAN_STATUSES, TASK_STATUSES, VERSION_ORIGINS
from tasks.coding.gitsource import REPO_URL_PATTERN, url_problem
from tasks.coding.payloads import GITHUB_REPO
from tasks.planner.schema import DESCRIPTION_CHARS, MAX_TASKS, ROLE, TASK_ID

NAME_CHARS = 200
GOAL_CHARS = 5000


class PlanCreate(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    name: Text = Field(min_length=1, max_length=NAME_CHARS, pattern=r"\S")
    goal: Text = Field(min_length=1, max_length=GOAL_CHARS, pattern=r"\S")
    # The repository the work is about: its file tree goes into the prompts, and the
    # `engineer` role's coding jobs clone it (and, with github_repo, open pull requests).
    repo_url: Text | None = Field(default=None, min_length=1, max_length=2000,
                                  json_schema_extra={"pattern": REPO_URL_PATTERN})
    github_repo: str | None = Field(default=None, pattern=GITHUB_REPO)
    auto_approve: bool = False
    # An engineer's task completes only when its pull request is merged (GitHub's webhook
    # says so); needs github_repo, or no pull request is opened.
    complete_on_merge: bool = False

    @field_validator("repo_url")
    @classmethod
    def _repo_url(cls, value: str | None) -> str | None:
        if value is not None and (problem := url_problem(value)):
            raise ValueError(problem)
        return value


class TaskIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    id: str = Field(pattern=TASK_ID)
    description: Text = Field(min_length=1, max_length=DESCRIPTION_CHARS, pattern=r"\S")
    assigned_to: str = Field(pattern=ROLE)
    depends_on: list[Text] = Field(default_factory=list, max_length=MAX_TASKS)


class PlanEdit(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    tasks: list[TaskIn] = Field(min_length=1, max_length=MAX_TASKS)


PlanStatus = Annotated[str, OneOf(PLAN_STATUSES)]


class PlanAccepted(Response):
    plan_id: uuid.UUID
    job_id: uuid.UUID
    status_url: str


class PlanTaskOut(Response):
    id: str
    description: str
    assigned_to: str
    status: Annotated[str, OneOf(TASK_STATUSES)]
    depends_on: list[str]
    output: Any
    error: str | None
    job_id: uuid.UUID | None


class PlanVersionOut(Response):
    version: Annotated[int, Field(ge=1)]
    origin: Annotated[str, OneOf(VERSION_ORIGINS)]
    reason: str | None
    created_at: Stamp


class PlanOut(Response):
    id: uuid.UUID
    project_id: uuid.UUID
    name: str
    goal: str
    repo_url: str | None
    status: PlanStatus
    version: Annotated[int, Field(ge=0)]  # 0: the planner has not stored a plan yet
    auto_approve: bool
    revisions: Annotated[int, Field(ge=0)]
    error: str | None
    job_id: uuid.UUID | None
    approval_id: uuid.UUID | None  # the approval the plan waits for (or waited for)
    created_at: Stamp
    updated_at: Stamp
    tasks: list[PlanTaskOut]  # of `version`
    versions: list[PlanVersionOut]


class PlanSummary(Response):
    id: uuid.UUID
    name: str
    goal: str
    status: PlanStatus
    version: Annotated[int, Field(ge=0)]
    job_id: uuid.UUID | None
    created_at: Stamp
    updated_at: Stamp


class PlanList(Response):
    items: list[PlanSummary]


PLAN_BODIES: dict[str, type[BaseModel]] = {"PlanCreate": PlanCreate, "PlanEdit": PlanEdit}
PLAN_RESPONSES: dict[str, type[Response]] = {m.__name__: m for m in (
    PlanAccepted, PlanTaskOut, PlanVersionOut, PlanOut, PlanSummary, PlanList)}


def edit_as_dicts(body: PlanEdit) -> dict[str, Any]:
    return {"tasks": [t.model_dump() for t in body.tasks]}
