"""The planner's tables (migration 0013), laid out as the Conductor lays them: a plan, its
versions, each version's tasks and their dependencies (tasks.planner.store)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Boolean,
    CheckConstraint,
    DateTime,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    Integer,
    Text,
    UniqueConstraint,
    Uuid,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from models.schema import Base

PLAN_STATUSES = ("generating", "awaiting_approval", "running", "completed", "failed",
                 "rejected", "canceled")
TASK_STATUSES = ("pending", "ready", "in_progress", "completed", "failed", "blocked")
VERSION_ORIGINS = ("generated", "edited", "revised")


def _now() -> Mapped[datetime]:
    return mapped_column(DateTime(timezone=True), server_default=func.now())


class Plan(Base):
    __tablename__ = "plans"

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    project_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(Text)
    goal: Mapped[str] = mapped_column(Text)
    repo_url: Mapped[str | None] = mapped_column(Text)
    github_repo: Mapped[str | None] = mapped_column(Text)
    status: Mapped[str] = mapped_column(Text, server_default=text("'generating'"))
    version: Mapped[int] = mapped_column(Integer, server_default=text("0"))  # 0: none stored yet
    auto_approve: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    complete_on_merge: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    job_id: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    approval_id: Mapped[uuid.UUID | None] = mapped_column(Uuid)  # the current one
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = _now()
    updated_at: Mapped[datetime] = _now()

    __table_args__ = (
        CheckConstraint(f"status IN {PLAN_STATUSES!r}", name="ck_plans_status"),
        CheckConstraint("version >= 0", name="ck_plans_version"),
        Index("ix_plans_project_created", "project_id", "created_at"),
    )


class PlanVersion(Base):
    __tablename__ = "plan_versions"

    plan_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("plans.id", ondelete="CASCADE"),
                                               primary_key=True)
    version: Mapped[int] = mapped_column(Integer, primary_key=True)
    origin: Mapped[str] = mapped_column(Text)
    reason: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = _now()

    __table_args__ = (
        CheckConstraint(f"origin IN {VERSION_ORIGINS!r}", name="ck_plan_versions_origin"),
    )


class PlanTask(Base):
    __tablename__ = "plan_tasks"

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    plan_id: Mapped[uuid.UUID] = mapped_column(Uuid)
    version: Mapped[int] = mapped_column(Integer)
    task_key: Mapped[str] = mapped_column(Text)  # the planner's id of the task
    position: Mapped[int] = mapped_column(Integer)
    description: Mapped[str] = mapped_column(Text)
    assigned_to: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(Text, server_default=text("'pending'"))
    job_id: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    output: Mapped[Any | None] = mapped_column(JSONB)
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = _now()
    updated_at: Mapped[datetime] = _now()

    __table_args__ = (
        CheckConstraint(f"status IN {TASK_STATUSES!r}", name="ck_plan_tasks_status"),
        ForeignKeyConstraint(["plan_id", "version"],
                             ["plan_versions.plan_id", "plan_versions.version"],
                             ondelete="CASCADE"),
        UniqueConstraint("plan_id", "version", "task_key", name="uq_plan_tasks_key"),
    )


class PlanTaskDep(Base):
    __tablename__ = "plan_task_deps"

    plan_id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True)
    version: Mapped[int] = mapped_column(Integer, primary_key=True)
    task_key: Mapped[str] = mapped_column(Text, primary_key=True)
    depends_on_key: Mapped[str] = mapped_column(Text, primary_key=True)

    __table_args__ = (
        ForeignKeyConstraint(["plan_id", "version", "task_key"],
                             ["plan_tasks.plan_id", "plan_tasks.version", "plan_tasks.task_key"],
                             ondelete="CASCADE"),
        ForeignKeyConstraint(["plan_id", "version", "depends_on_key"],
                             ["plan_tasks.plan_id", "plan_tasks.version", "plan_tasks.task_key"],
                             ondelete="CASCADE"),
    )
