"""Request bodies, validated strictly: a wrong type is an error, never silently coerced."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class ProjectCreate(Strict):
    name: str = Field(min_length=1, max_length=200)
    goal: str | None = Field(default=None, max_length=10_000)
    night_shift: bool = False


class JobCreate(Strict):
    job_type: str = Field(min_length=1, max_length=200)
    payload: dict[str, Any] = Field(default_factory=dict)
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=255)
    priority: int | None = Field(default=None, ge=0, le=9)
    run_after: AwareDatetime | None = None
    max_attempts: int | None = Field(default=None, ge=1, le=100)


class JobListQuery(BaseModel):
    model_config = ConfigDict(extra="ignore")

    status: str | None = None
    job_type: str | None = None
    limit: int = Field(default=50, ge=1, le=200)
    before: str | None = None


def iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None
