"""The tables. Alembic creates them (see alembic/versions); the app never calls create_all."""

from __future__ import annotations

import re
import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    Sequence,
    SmallInteger,
    Text,
    UniqueConstraint,
    Uuid,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

SYSTEM_PROJECT_ID = uuid.UUID("00000000-0000-0000-0000-000000000000")

JOB_STATUSES = ("queued", "running", "waiting", "completed", "failed", "canceled")
STEP_STATUSES = ("running", "completed", "failed")


def _now_column(nullable: bool = False) -> Mapped[datetime]:
    return mapped_column(DateTime(timezone=True), server_default=func.now(), nullable=nullable)


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSONB, Any: JSONB}


class Owner(Base):
    __tablename__ = "owners"

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    name: Mapped[str] = mapped_column(Text, unique=True)
    created_at: Mapped[datetime] = _now_column()


class ApiToken(Base):
    __tablename__ = "api_tokens"

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    owner_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("owners.id", ondelete="CASCADE"))
    # sha256 of the token: the token itself is shown once and never stored.
    token_hash: Mapped[str] = mapped_column(Text, unique=True)
    prefix: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = _now_column()
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # An admin token sees the fleet in the monitor and diagnosis (`token create --admin`).
    is_admin: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))

    __table_args__ = (Index("ix_api_tokens_owner", "owner_id"),)


class EndedWebSession(Base):
    """A signed-out browser session (app.http.web_sessions), kept until its cookies have expired."""

    __tablename__ = "ended_web_sessions"

    session_id: Mapped[str] = mapped_column(Text, primary_key=True)
    forget_after: Mapped[datetime] = mapped_column(DateTime(timezone=True))

    __table_args__ = (Index("ix_ended_web_sessions_forget_after", "forget_after"),)


class Project(Base):
    __tablename__ = "projects"

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    # NULL only for the sentinel system project, which no owner can see.
    owner_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("owners.id", ondelete="CASCADE")
    )
    name: Mapped[str] = mapped_column(Text)
    goal: Mapped[str | None] = mapped_column(Text)
    night_shift: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    phase: Mapped[str] = mapped_column(Text, server_default=text("'idea'"))
    settings: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default=text("'{}'::jsonb"))
    created_at: Mapped[datetime] = _now_column()

    __table_args__ = (Index("ix_projects_owner_created", "owner_id", "created_at"),)


class AgentJob(Base):
    __tablename__ = "agent_jobs"

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    project_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"))
    job_type: Mapped[str] = mapped_column(Text)
    agent_key: Mapped[str | None] = mapped_column(Text)
    status: Mapped[str] = mapped_column(Text, server_default=text("'queued'"))
    queue: Mapped[str] = mapped_column(Text, server_default=text("'default'"))
    priority: Mapped[int] = mapped_column(SmallInteger, server_default=text("5"))
    payload: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default=text("'{}'::jsonb"))
    idempotency_key: Mapped[str] = mapped_column(Text)
    run_after: Mapped[datetime] = _now_column()
    attempts: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    max_attempts: Mapped[int] = mapped_column(Integer, server_default=text("3"))
    locked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    locked_by: Mapped[str | None] = mapped_column(Text)
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_error: Mapped[str | None] = mapped_column(Text)
    result: Mapped[Any | None] = mapped_column(JSONB)
    parent_job_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("agent_jobs.id", ondelete="SET NULL")
    )
    # The job this one reruns from one of its steps (tasks.engine.rerun, migration 0020).
    rerun_of: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("agent_jobs.id", ondelete="SET NULL")
    )
    # The trace it was enqueued in, when tracing is on (tasks.engine.telemetry, 0021).
    traceparent: Mapped[str | None] = mapped_column(Text)
    concurrency_key: Mapped[str | None] = mapped_column(Text)
    concurrency_limit: Mapped[int] = mapped_column(Integer, server_default=text("1"))
    cancel_requested: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    timeout_seconds: Mapped[int | None] = mapped_column(Integer)
    # A suspended job's timer (ctx.sleep) and when its wake-up was last published.
    wake_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # The children a suspended job waits for (ctx.wait), and why it waits (shown by diagnosis).
    wait_for: Mapped[list[uuid.UUID] | None] = mapped_column(ARRAY(Uuid))
    wait_reason: Mapped[str | None] = mapped_column(Text)
    # ctx.wait_any: resume when *one* of wait_for has ended or one of wait_approvals is
    # decided, not when all have (a DAG driver starts the next ready step at once).
    wait_any: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    wait_approvals: Mapped[list[uuid.UUID] | None] = mapped_column(ARRAY(Uuid))
    dispatched_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # The run that owns the job: a token per claim fences every write of that run, and
    # `write_seq` numbers its writes so one retried after a lost connection applies once.
    claim_token: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    write_seq: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    # Retries that cost no attempt (rate limits), bounded by count and time on their own.
    free_retries: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    free_retry_since: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = _now_column()
    updated_at: Mapped[datetime] = _now_column()
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    completed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    __table_args__ = (
        UniqueConstraint("project_id", "idempotency_key", name="uq_agent_jobs_project_key"),
        CheckConstraint(f"status IN {JOB_STATUSES!r}", name="ck_agent_jobs_status"),
        CheckConstraint("priority BETWEEN 0 AND 9", name="ck_agent_jobs_priority"),
        CheckConstraint("max_attempts >= 1", name="ck_agent_jobs_max_attempts"),
        CheckConstraint("concurrency_limit >= 1", name="ck_agent_jobs_concurrency_limit"),
        # The ready queue: what the dispatch sweep scans.
        Index("ix_agent_jobs_ready", "run_after", postgresql_where=text("status = 'queued'")),
        # The fair share (tasks.engine.fair): an owner's unpublished backlog by priority level,
        # due jobs first in each (0023), and the places it holds. No index reads heartbeat_at
        # or write_seq, so a checkpoint's update of the row is HOT (0018: fillfactor 80).
        Index("ix_agent_jobs_unpublished", "project_id", text("priority DESC"), "run_after",
              postgresql_where=text("(status || '') = 'queued' AND dispatched_at IS NULL")),
        Index("ix_agent_jobs_holding", "project_id", postgresql_where=text(
            "status = 'running' OR (status = 'queued' AND dispatched_at IS NOT NULL)")),
        Index("ix_agent_jobs_waiting", "wake_at", postgresql_where=text("status = 'waiting'")),
        Index("ix_agent_jobs_project_created", "project_id", "created_at", "id"),
        Index(
            "ix_agent_jobs_parent",
            "parent_job_id",
            postgresql_where=text("parent_job_id IS NOT NULL"),
        ),
        Index(
            "ix_agent_jobs_concurrency",
            "concurrency_key",
            "status",
            postgresql_where=text("concurrency_key IS NOT NULL"),
        ),
        Index("ix_agent_jobs_status_type", "status", "job_type"),
        # Retention (tasks.engine.retention): the oldest finished jobs first.
        Index("ix_agent_jobs_finished", "completed_at",
              postgresql_where=text("status IN ('canceled', 'completed', 'failed')")),
    )


class JobStep(Base):
    __tablename__ = "job_steps"

    job_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("agent_jobs.id", ondelete="CASCADE"), primary_key=True
    )
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(Text)
    output: Mapped[Any | None] = mapped_column(JSONB)
    error: Mapped[str | None] = mapped_column(Text)
    attempts: Mapped[int] = mapped_column(Integer, server_default=text("1"))
    started_at: Mapped[datetime] = _now_column()
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    __table_args__ = (CheckConstraint(f"status IN {STEP_STATUSES!r}", name="ck_job_steps_status"),)


EVENT_PARTITION = re.compile(r"agent_job_events_\d{8}")  # one per UTC day: migration 0006


def managed_by_migrations(name: str | None) -> bool:
    """Tables that exist in the database but not in the models: the event log's partitions."""
    return name is not None and EVENT_PARTITION.fullmatch(name) is None


class AgentJobEvent(Base):
    """The event log, partitioned by day (migration 0006): retention drops whole days
    (tasks.engine.retention), so its cost never grows with the table."""

    __tablename__ = "agent_job_events"

    # The stream cursor: monotonically increasing, never reused; one sequence for every
    # partition (an identity column cannot live on a partitioned table before PG 17).
    id: Mapped[int] = mapped_column(BigInteger, Sequence("agent_job_events_id_seq"),
                                    primary_key=True)
    # No foreign keys on purpose: every event is inserted by the statement that
    # changes its job, from that job's row, so the ids are right by construction,
    # and a key check per event (a FOR KEY SHARE lock on the project row that all
    # of a project's workers share) would be paid nine times per three-step job.
    job_id: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    project_id: Mapped[uuid.UUID] = mapped_column(Uuid)
    type: Mapped[str] = mapped_column(Text)
    message: Mapped[str] = mapped_column(Text, server_default=text("''"))
    data: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default=text("'{}'::jsonb"))
    # In the key because it is the partition key.
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), primary_key=True,
                                                 server_default=func.now())

    __table_args__ = (
        Index("ix_agent_job_events_project_id", "project_id", "id"),
        Index("ix_agent_job_events_job_id", "job_id", "id"),
        {"postgresql_partition_by": "RANGE (created_at)"},
    )


class WorkerHeartbeat(Base):
    __tablename__ = "worker_heartbeats"

    worker: Mapped[str] = mapped_column(Text, primary_key=True)
    hostname: Mapped[str] = mapped_column(Text)
    pid: Mapped[int] = mapped_column(Integer)
    queues: Mapped[Any] = mapped_column(JSONB, server_default=text("'[]'::jsonb"))
    started_at: Mapped[datetime] = _now_column()
    last_seen_at: Mapped[datetime] = _now_column()
    stopped_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    running: Mapped[int] = mapped_column(Integer, server_default=text("0"))


class SweepRun(Base):
    """One row per sweep and tick: the primary key is what makes two beats harmless."""

    __tablename__ = "sweep_runs"

    sweep: Mapped[str] = mapped_column(Text, primary_key=True)
    tick: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    ran_at: Mapped[datetime] = _now_column()
    ran_by: Mapped[str] = mapped_column(Text)
    stats: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default=text("'{}'::jsonb"))
