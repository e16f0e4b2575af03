"""The startup-OS tables: memory, chat, packets, approvals, the effect ledger, the email outbox,
LLM usage (migration 0003 on), artifacts (0010), workflows (0011) and functions (0014)."""

from __future__ import annotations

import uuid
from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Computed,
    DateTime,
    ForeignKey,
    Identity,
    Index,
    Integer,
    LargeBinary,
    Numeric,
    PrimaryKeyConstraint,
    Text,
    UniqueConstraint,
    Uuid,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from models.schema import Base

MEMORY_CATEGORIES = ("fact", "preference", "decision", "learning", "context")
APPROVAL_STATUSES = ("pending", "approved", "rejected", "expired")
EXECUTION_STATUSES = ("idle", "queued", "running", "completed", "failed")
EFFECT_STATUSES = ("intent", "succeeded", "failed", "unknown")
EMAIL_STATUSES = ("pending", "sending", "sent", "failed", "unknown")


def _now() -> Mapped[datetime]:
    return mapped_column(DateTime(timezone=True), server_default=func.now())


def _project_fk() -> Mapped[uuid.UUID]:
    return mapped_column(ForeignKey("projects.id", ondelete="CASCADE"))


class AgentMemory(Base):
    __tablename__ = "agent_memory"

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    project_id: Mapped[uuid.UUID] = _project_fk()
    category: Mapped[str] = mapped_column(Text)
    key: Mapped[str] = mapped_column(Text)
    content: Mapped[str] = mapped_column(Text)
    # Which job and step wrote the entry, so a memory can be traced to its source.
    source_job_id: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    source_step: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = _now()
    updated_at: Mapped[datetime] = _now()

    __table_args__ = (
        UniqueConstraint("project_id", "category", "key", name="uq_agent_memory_key"),
        CheckConstraint(f"category IN {MEMORY_CATEGORIES!r}", name="ck_agent_memory_category"),
    )


class ChatMessage(Base):
    __tablename__ = "chat_messages"

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    project_id: Mapped[uuid.UUID] = _project_fk()
    role: Mapped[str] = mapped_column(Text)
    content: Mapped[str] = mapped_column(Text)
    # The user message an assistant message answers: unique, so a reply is stored once.
    reply_to: Mapped[uuid.UUID | None] = mapped_column(Uuid, unique=True)
    job_id: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    created_at: Mapped[datetime] = _now()

    __table_args__ = (
        CheckConstraint("role IN ('user', 'assistant')", name="ck_chat_messages_role"),
        Index("ix_chat_messages_project_created", "project_id", "created_at"),
    )


class Packet(Base):
    __tablename__ = "packets"

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    project_id: Mapped[uuid.UUID] = _project_fk()
    job_id: Mapped[uuid.UUID] = mapped_column(Uuid, unique=True)
    phase: Mapped[int] = mapped_column(Integer)
    content: Mapped[dict[str, Any]] = mapped_column(JSONB)
    created_at: Mapped[datetime] = _now()

    __table_args__ = (Index("ix_packets_project_created", "project_id", "created_at"),)


class Approval(Base):
    __tablename__ = "approvals"

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    project_id: Mapped[uuid.UUID] = _project_fk()
    source_job_id: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    action_type: Mapped[str] = mapped_column(Text)
    title: Mapped[str] = mapped_column(Text)
    # The exact arguments the effect will run with, and their hash: an approval
    # is bound to them; different arguments need a new approval.
    action_args: Mapped[dict[str, Any]] = mapped_column(JSONB)
    args_hash: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(Text, server_default=text("'pending'"))
    version: Mapped[int] = mapped_column(Integer, server_default=text("1"))
    expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    decided_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    decided_by: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    execution_status: Mapped[str] = mapped_column(Text, server_default=text("'idle'"))
    execution_job_id: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    # What approving runs, chosen by the system that asked (tasks.services.approvals).
    on_approve: Mapped[dict[str, Any]] = mapped_column(
        JSONB, server_default=text("""'{"run": "effect"}'::jsonb"""))
    created_at: Mapped[datetime] = _now()
    updated_at: Mapped[datetime] = _now()

    __table_args__ = (
        CheckConstraint(f"status IN {APPROVAL_STATUSES!r}", name="ck_approvals_status"),
        CheckConstraint(f"execution_status IN {EXECUTION_STATUSES!r}",
                        name="ck_approvals_execution_status"),
        # One approval per source job and exact action (a packet re-run does not duplicate it).
        UniqueConstraint("project_id", "source_job_id", "args_hash", name="uq_approvals_action"),
        Index("ix_approvals_project_status", "project_id", "status", "created_at"),
    )


class ActionExecution(Base):
    """The effect ledger: intent recorded before the call, outcome after."""

    __tablename__ = "action_executions"

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    idempotency_key: Mapped[str] = mapped_column(Text, unique=True)
    project_id: Mapped[uuid.UUID] = _project_fk()
    approval_id: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    job_id: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    action_type: Mapped[str] = mapped_column(Text)
    args: Mapped[dict[str, Any]] = mapped_column(JSONB)
    status: Mapped[str] = mapped_column(Text, server_default=text("'intent'"))
    provider_ref: Mapped[str | None] = mapped_column(Text)
    response: Mapped[Any | None] = mapped_column(JSONB)
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = _now()
    completed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    __table_args__ = (
        CheckConstraint(f"status IN {EFFECT_STATUSES!r}", name="ck_action_executions_status"),
        Index("ix_action_executions_project_created", "project_id", "action_type", "created_at"),
    )


class EmailJob(Base):
    """The email outbox: rows to send, swept every minute by `email.process_due`."""

    __tablename__ = "email_jobs"

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    project_id: Mapped[uuid.UUID] = _project_fk()
    idempotency_key: Mapped[str] = mapped_column(Text, unique=True)
    kind: Mapped[str] = mapped_column(Text)
    to_addr: Mapped[str] = mapped_column(Text)
    subject: Mapped[str] = mapped_column(Text)
    body: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(Text, server_default=text("'pending'"))
    send_after: Mapped[datetime] = _now()
    attempts: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    last_error: Mapped[str | None] = mapped_column(Text)
    sent_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = _now()

    __table_args__ = (
        CheckConstraint(f"status IN {EMAIL_STATUSES!r}", name="ck_email_jobs_status"),
        Index("ix_email_jobs_due", "send_after", postgresql_where=text("status = 'pending'")),
    )


class LlmUsage(Base):
    __tablename__ = "llm_usage"

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=True), primary_key=True)
    project_id: Mapped[uuid.UUID] = mapped_column(Uuid)
    job_id: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    # The step of the job that made the call (None: outside a step, or recorded before 0005).
    step_seq: Mapped[int | None] = mapped_column(Integer)
    provider: Mapped[str] = mapped_column(Text)
    model: Mapped[str] = mapped_column(Text)
    input_tokens: Mapped[int] = mapped_column(Integer)
    output_tokens: Mapped[int] = mapped_column(Integer)
    cost_usd: Mapped[Decimal] = mapped_column(Numeric(12, 6))
    created_at: Mapped[datetime] = _now()

    __table_args__ = (Index("ix_llm_usage_project_created", "project_id", "created_at"),
                      Index("ix_llm_usage_job", "job_id"))


class ProjectSecret(Base):
    """A project's own credentials (tasks.services.keystore): AES-GCM ciphertext bound to the row by
    its associated data, so a value copied to another project or name does not decrypt."""

    __tablename__ = "project_secrets"

    project_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"),
                                                  primary_key=True)
    name: Mapped[str] = mapped_column(Text, primary_key=True)
    ciphertext: Mapped[bytes] = mapped_column(LargeBinary)
    key_id: Mapped[str] = mapped_column(Text)  # which key sealed it: a mismatch is explained
    created_at: Mapped[datetime] = _now()
    updated_at: Mapped[datetime] = _now()


class Artifact(Base):
    """A file a job produced (services.artifacts): its description here, its bytes in the store
    under `storage_key`. One row per job, step and name, so a replayed step stores nothing new."""

    __tablename__ = "artifacts"

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    project_id: Mapped[uuid.UUID] = _project_fk()
    job_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("agent_jobs.id", ondelete="CASCADE"))
    step_seq: Mapped[int] = mapped_column(Integer)
    step_name: Mapped[str] = mapped_column(Text)
    kind: Mapped[str] = mapped_column(Text)
    name: Mapped[str] = mapped_column(Text)
    content_type: Mapped[str] = mapped_column(Text)
    size: Mapped[int] = mapped_column(BigInteger)
    sha256: Mapped[str] = mapped_column(Text)
    storage_key: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = _now()

    __table_args__ = (
        UniqueConstraint("job_id", "step_seq", "name", name="uq_artifacts_job_step_name"),
        CheckConstraint("size >= 0", name="ck_artifacts_size"),
        Index("ix_artifacts_project_created", "project_id", "created_at"),
    )


class Workflow(Base):
    """One immutable version of a project's named workflow (tasks.workflows.store)."""

    __tablename__ = "workflows"

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    project_id: Mapped[uuid.UUID] = _project_fk()
    name: Mapped[str] = mapped_column(Text)
    version: Mapped[int] = mapped_column(Integer)
    spec: Mapped[dict[str, Any]] = mapped_column(JSONB)
    created_at: Mapped[datetime] = _now()

    __table_args__ = (
        UniqueConstraint("project_id", "name", "version", name="uq_workflows_version"),
        CheckConstraint("version >= 1", name="ck_workflows_version"),
    )


class WorkflowRunStep(Base):
    """The state of one step of a running DAG (tasks.workflows.driver mirrors it each round)."""

    __tablename__ = "workflow_run_steps"

    run_job_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("agent_jobs.id", ondelete="CASCADE"), primary_key=True)
    name: Mapped[str] = mapped_column(Text, primary_key=True)
    status: Mapped[str] = mapped_column(Text)
    job_id: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    approval_id: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    output: Mapped[Any | None] = mapped_column(JSONB)
    error: Mapped[str | None] = mapped_column(Text)
    updated_at: Mapped[datetime] = _now()


class Function(Base):
    """One immutable version of a project's named JavaScript function (tasks.functions.store);
    a trigger refuses updates (migration 0014)."""

    __tablename__ = "functions"

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    project_id: Mapped[uuid.UUID] = _project_fk()
    name: Mapped[str] = mapped_column(Text)
    version: Mapped[int] = mapped_column(Integer)
    code: Mapped[str] = mapped_column(Text)
    language: Mapped[str] = mapped_column(Text)
    description: Mapped[str] = mapped_column(Text)
    created_by_job: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    created_at: Mapped[datetime] = _now()

    __table_args__ = (
        UniqueConstraint("project_id", "name", "version", name="uq_functions_version"),
        CheckConstraint("version >= 1", name="ck_functions_version"),
        CheckConstraint("language IN ('javascript')", name="ck_functions_language"),
    )


class FunctionData(Base):
    """The per-project document store functions reach as the table "function_data"
    (tasks.functions.data): always scoped to the running job's project. A row is keyed by
    (project, id), so each project has the table to itself: an id another project used is
    neither refused nor revealed."""

    __tablename__ = "function_data"

    id: Mapped[uuid.UUID] = mapped_column(default=uuid.uuid4)
    project_id: Mapped[uuid.UUID] = _project_fk()
    # The call whose insert made the row (its seed-derived key): that call repeated after a
    # crash finds the row; any other insert of its id is a duplicate key.
    made_by: Mapped[uuid.UUID | None] = mapped_column(nullable=True)
    collection: Mapped[str] = mapped_column(Text)
    doc: Mapped[Any] = mapped_column(JSONB)
    # Bytes of JSON, kept by PostgreSQL: what the owner's quota sums (tasks.services.quotas).
    size: Mapped[int] = mapped_column(Integer, Computed("octet_length(doc::text)",
                                                        persisted=True))
    created_at: Mapped[datetime] = _now()
    updated_at: Mapped[datetime] = _now()

    __table_args__ = (PrimaryKeyConstraint("project_id", "id", name="function_data_pkey"),
                      Index("ix_function_data_project_collection", "project_id", "collection",
                            "created_at"),
                      # `eq` on a field of a function's own table is containment on doc
                      Index("ix_function_data_doc", "doc", postgresql_using="gin",
                            postgresql_ops={"doc": "jsonb_path_ops"}))
