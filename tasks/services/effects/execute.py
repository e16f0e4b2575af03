"""`approval.execute`: run an approved action once, through the effect ledger."""

from __future__ import annotations

import uuid
from typing import Any

from pydantic import BaseModel, ConfigDict

from tasks.engine import pg
from tasks.engine.context import JobContext
from tasks.engine.errors import PermanentError
from tasks.engine.registry import JobType, register
from tasks.services.effects.ledger import perform


class ExecutePayload(BaseModel):
    model_config = ConfigDict(extra="forbid")

    approval_id: uuid.UUID


def _start(approval_id: uuid.UUID, job_id: uuid.UUID) -> dict[str, Any]:
    row = pg.fetch_one_dict(
        "UPDATE approvals SET execution_status = 'running', execution_job_id = %s, "
        "updated_at = now() WHERE id = %s AND status = 'approved' "
        "AND execution_status IN ('idle', 'queued', 'running') "
        "RETURNING project_id, action_type, action_args, args_hash", (job_id, approval_id))
    if row is None:
        raise PermanentError(f"approval {approval_id} is not approved or already executed")
    return {"project_id": str(row["project_id"]), "action_type": row["action_type"],
            "args": row["action_args"]}


def _finish(approval_id: uuid.UUID, status: str) -> None:
    pg.execute("UPDATE approvals SET execution_status = %s, updated_at = now() WHERE id = %s",
               (status, approval_id))


def handle(ctx: JobContext, p: ExecutePayload) -> dict[str, Any]:
    action = ctx.step("start", _start, p.approval_id, ctx.job_id)
    try:
        outcome = ctx.step("perform", _perform, ctx, p.approval_id, action)
    except PermanentError:  # refused by permissions or caps: the approval shows it failed
        ctx.step("record", _finish, p.approval_id, "failed")
        raise
    status = "completed" if outcome["status"] == "succeeded" else "failed"
    ctx.step("record", _finish, p.approval_id, status)
    if outcome["status"] != "succeeded":
        raise PermanentError(f"{action['action_type']} ended {outcome['status']}: "
                             f"{outcome.get('error') or 'see the effect ledger'}")
    return outcome


def _perform(ctx: JobContext, approval_id: uuid.UUID, action: dict[str, Any]) -> dict[str, Any]:
    result = perform(project_id=action["project_id"], action_type=action["action_type"],
                     args=action["args"], idempotency_key=f"approval:{approval_id}",
                     job_id=str(ctx.job_id), approval_id=str(approval_id))
    return {"status": result.status, "provider_ref": result.provider_ref,
            "error": result.error, "replayed": result.replayed}


JOB_TYPE = register(JobType("approval.execute", ExecutePayload, handle, queue="io",
                            max_attempts=5, public=False))
