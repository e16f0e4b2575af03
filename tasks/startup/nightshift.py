"""`nightshift.cycle_project`: the nightly cycle of one project — derive the next actions
from its latest packet and queue them as approvals (skipped while approvals are pending)."""

from __future__ import annotations

import json
import uuid
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from tasks.engine import pg
from tasks.engine.context import JobContext
from tasks.engine.errors import PermanentError
from tasks.engine.registry import JobType, register
from tasks.engine.sql import pending_approval
from tasks.services.approvals import create_approval
from tasks.services.llm import get_client
from tasks.services.llm.flow import call_llm
from tasks.services.llm.types import LLMRequest
from tasks.services.memory import write_memory
from tasks.startup import phases, proposals
from tasks.startup.projects import project_context


class NightshiftPayload(BaseModel):
    model_config = ConfigDict(extra="forbid")

    date: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$")


def _pending_approvals(project_id: uuid.UUID) -> int:
    return int(pg.fetch_value(f"SELECT count(*) FROM approvals WHERE project_id = %s "
                              f"AND {pending_approval()}", (project_id,)))


def _derive(ctx: JobContext, context: dict[str, Any]) -> list[dict[str, Any]]:
    req = LLMRequest(purpose="nightshift", context=context,
                     system="You run the night shift of a startup operating system. Propose the "
                            "next concrete actions as a JSON list of {type, title, args}. "
                            + proposals.prompt(context),
                     messages=[{"role": "user", "content": json.dumps(context["latest_packet"])}])
    text = call_llm(get_client(), req, project_id=ctx.project_id, job_id=ctx.job_id,
                    step_seq=ctx.current_step).text
    try:
        actions = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PermanentError(f"night shift actions are not JSON: {exc}") from None
    if not isinstance(actions, list) or not all(
            isinstance(a, dict) and {"type", "title"} <= a.keys() for a in actions):
        raise PermanentError("night shift actions must be a list of {type, title, args}")
    return actions


def _queue(project_id: uuid.UUID, job_id: uuid.UUID, actions: list[dict]) -> list[str]:
    return [str(create_approval(project_id, job_id,
                                phases.approval_for(project_id, a)))
            for a in actions]


def handle(ctx: JobContext, p: NightshiftPayload) -> dict[str, Any]:
    pending = ctx.step("check-pending", _pending_approvals, ctx.project_id)
    if pending:
        ctx.emit("log", f"night shift skipped: {pending} approval(s) still pending",
                 {"summary": True, "skipped": True, "pending_approvals": pending})
        return {"skipped": True, "pending_approvals": pending}
    context = ctx.step("load-context", project_context, ctx.project_id)
    if not context["latest_packet"]:
        ctx.emit("log", "night shift skipped: no packet yet", {"summary": True, "skipped": True})
        return {"skipped": True, "reason": "no packet"}
    actions, aside = proposals.within(ctx.step("derive-actions", _derive, ctx, context), context)
    if aside:
        ctx.emit("log", proposals.log_line(aside), {"set_aside": aside})
    approvals = ctx.step("queue-approvals", _queue, ctx.project_id, ctx.job_id, actions)
    ctx.step("write-memory", write_memory, ctx.project_id, "learning", f"nightshift-{p.date}",
             f"{len(actions)} action(s) proposed", job_id=ctx.job_id, step="write-memory")
    ctx.emit("log", f"night shift {p.date}: {len(approvals)} action(s) queued for approval",
             {"summary": True, "approvals": approvals})
    return {"skipped": False, "approval_ids": approvals}


JOB_TYPE = register(JobType("nightshift.cycle_project", NightshiftPayload, handle,
                            queue="agents", max_attempts=3))
